"""The storage sink's formats against TiCDC's: paths and names, table definitions and their
checksums, CSV records, byte for byte where TiCDC's documents or tests give them.

Sources: TiCDC's storage sink and CSV documents (``ticdc-sink-to-cloud-storage.md``,
``ticdc-csv.md``) and tiflow's ``pkg/sink/cloudstorage/{path,table_definition}_test.go`` and
``pkg/sink/codec/csv/csv_message_test.go``.
"""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from urllib.parse import urlsplit

import pytest

from tributary.change import ColumnInfo, RowChange, SqlValue, TableInfo
from tributary.sinks import SinkError
from tributary.sinks.storage import csvcodec, tabledef
from tributary.sinks.storage.csvcodec import Bare, CsvEncoder, format_record, go_g
from tributary.sinks.storage.layout import (
    DataPath,
    data_dir,
    data_file_name,
    date_text,
    metadata_json,
    parse_schema_file_name,
    schema_file,
)
from tributary.sinks.storage.settings import CsvSettings, StorageSettings, parse_url
from tributary.sinks.storage.split import split_updates
from tributary.sinks.storage.tabledef import TableCol, TableDefinition, column_of

EMPLOYEE = TableInfo.build(
    "hr",
    "employee",
    [
        ("Id", "int"),
        ("LastName", "varchar(20)"),
        ("FirstName", "varchar(30)"),
        ("HireDate", "date"),
        ("OfficeLocation", "varchar(20)"),
    ],
    primary_key=["Id"],
)


def _employee(i: int, hired: str, office: str) -> dict[str, SqlValue]:
    first = {101: "Bob", 102: "Alice"}[i]
    last = {101: "Smith", 102: "Alex"}[i]
    return {
        "Id": i,
        "LastName": last,
        "FirstName": first,
        "HireDate": hired,
        "OfficeLocation": office,
    }


# -- layout ------------------------------------------------------------------------------------


def test_paths_and_names_are_ticdcs() -> None:
    # path_test.go: version 5, widths of 6, dates by separator
    at = dt.datetime(2022, 12, 31, 23, 59, 59)
    assert date_text("none", at) == ""
    assert date_text("year", at) == "2022"
    assert date_text("month", at) == "2022-12"
    assert date_text("day", at) == "2022-12-31"
    assert str(data_dir("test", "table1", 5, "") / data_file_name(1, ".json", 6)) == (
        "test/table1/5/CDC000001.json"
    )
    day = data_dir("test", "table1", 5, "2023-01-01") / data_file_name(2, ".json", 6)
    assert str(day) == "test/table1/5/2023-01-01/CDC000002.json"
    assert data_file_name(1, ".csv", 20) == "CDC00000000000000000001.csv"  # TiCDC's default
    assert metadata_json(433305438660591626) == b'{"checkpoint-ts":433305438660591626}'
    assert parse_schema_file_name("schema_441349361156227074_3131721815.json") == (
        441349361156227074,
        3131721815,
    )
    assert parse_schema_file_name("schema_1_12.json") is None


def test_data_paths_parse_in_reading_order() -> None:
    paths = [
        "shop/t/20/2026-05-02/CDC000001.csv",
        "shop/t/10/2026-05-02/CDC000010.csv",
        "shop/t/10/2026-05-02/CDC000002.csv",
        "shop/t/10/2026-05-01/CDC000007.csv",
    ]
    parsed = sorted(p for x in paths if (p := DataPath.parse(x, "day", ".csv")) is not None)
    assert [(p.version, p.date, p.index) for p in parsed] == [
        (10, "2026-05-01", 7),
        (10, "2026-05-02", 2),
        (10, "2026-05-02", 10),
        (20, "2026-05-02", 1),
    ]
    assert DataPath.parse("shop/t/10/2026-05-02/meta/CDC.index", "day", ".csv") is None
    assert DataPath.parse("shop/t/10/CDC1.csv", "day", ".csv") is None  # no date directory
    assert DataPath.parse("shop/t/10/CDC1.csv", "none", ".csv") == DataPath("shop", "t", 10, "", 1)
    assert DataPath.parse("shop/t/meta/schema_1_0000000001.json", "none", ".json") is None


def test_names_a_directory_cannot_carry_are_refused() -> None:
    with pytest.raises(ValueError, match="directory name"):
        data_dir("shop", "a/b", 1, "")
    with pytest.raises(ValueError, match="directory name"):
        schema_file("..", "", 1, 1)


# -- table definitions -------------------------------------------------------------------------


def _ticdc_table() -> TableDefinition:
    """table_definition_test.go's ``generateTableDef``: defaults included."""
    cols = (
        TableCol("Id", "INT", "11", nullable="false", is_pk="true", default=10),
        TableCol("LastName", "VARCHAR", "128", nullable="false", default="Default LastName"),
        TableCol("FirstName", "VARCHAR", "64", default="Default FirstName"),
        TableCol("Birthday", "DATETIME", default=12345678),
    )
    return TableDefinition("schema1", "table1", 100, cols)


def test_table_definition_json_and_checksums_are_ticdcs() -> None:
    table = _ticdc_table()
    doc = json.loads(table.render())
    assert doc == {
        "Table": "table1",
        "Schema": "schema1",
        "Version": 1,
        "TableVersion": 100,
        "Query": "",
        "Type": 0,
        "TableColumns": [
            {"ColumnName": "Id", "ColumnType": "INT", "ColumnPrecision": "11",
             "ColumnDefault": 10, "ColumnNullable": "false", "ColumnIsPk": "true"},
            {"ColumnName": "LastName", "ColumnType": "VARCHAR",
             "ColumnDefault": "Default LastName", "ColumnPrecision": "128",
             "ColumnNullable": "false"},
            {"ColumnName": "FirstName", "ColumnDefault": "Default FirstName",
             "ColumnType": "VARCHAR", "ColumnPrecision": "64"},
            {"ColumnName": "Birthday", "ColumnDefault": 12345678, "ColumnType": "DATETIME"},
        ],
        "TableColumnsTotal": 4,
    }  # fmt: skip
    assert table.render().startswith(b'{\n    "Table": "table1",\n    "Schema": "schema1",')
    assert str(schema_file("schema1", "table1", 100, table.checksum())) == (
        "schema1/table1/meta/schema_100_3752767265.json"
    )
    database = TableDefinition("schema1", "", 100, None)
    assert str(schema_file("schema1", "", 100, database.checksum())) == (
        "schema1/meta/schema_100_3233644819.json"
    )
    assert json.loads(database.render())["TableColumns"] is None
    # a query, a version and a type do not change the checksum (TiCDC's marshalWithoutQuery)
    ddl = TableDefinition("schema1", "table1", 200, table.columns, "alter table t add x int", 5)
    assert ddl.checksum() == table.checksum()


@pytest.mark.parametrize(
    ("mysql_type", "expected"),
    [
        ("time(5)", {"ColumnType": "TIME", "ColumnScale": "5"}),
        ("int(5) unsigned", {"ColumnType": "INT UNSIGNED", "ColumnPrecision": "5"}),
        ("float(12,3)", {"ColumnType": "FLOAT", "ColumnPrecision": "12", "ColumnScale": "3"}),
        ("float", {"ColumnType": "FLOAT", "ColumnPrecision": "12"}),
        ("double(7,3)", {"ColumnType": "DOUBLE", "ColumnPrecision": "7", "ColumnScale": "3"}),
        ("tinyint(5)", {"ColumnType": "TINYINT", "ColumnPrecision": "5"}),
        ("bigint(20)", {"ColumnType": "BIGINT", "ColumnPrecision": "20"}),
        ("bit(5)", {"ColumnType": "BIT", "ColumnPrecision": "5"}),
        ("varchar(128)", {"ColumnType": "VARCHAR", "ColumnPrecision": "128"}),
        ("char(32)", {"ColumnType": "CHAR", "ColumnPrecision": "32"}),
        ("enum('a','b')", {"ColumnType": "ENUM"}),
        ("set('a','b')", {"ColumnType": "SET"}),
        ("timestamp(2)", {"ColumnType": "TIMESTAMP", "ColumnScale": "2"}),
        ("timestamp", {"ColumnType": "TIMESTAMP"}),
        ("datetime", {"ColumnType": "DATETIME"}),
        ("date", {"ColumnType": "DATE"}),
        ("year(4)", {"ColumnType": "YEAR", "ColumnPrecision": "4"}),
        # widths the binlog does not carry: TiDB's defaults
        ("int", {"ColumnType": "INT", "ColumnPrecision": "11"}),
        ("int unsigned", {"ColumnType": "INT UNSIGNED", "ColumnPrecision": "10"}),
        ("decimal(10,2)", {"ColumnType": "DECIMAL", "ColumnPrecision": "10", "ColumnScale": "2"}),
        ("mediumtext", {"ColumnType": "MEDIUMTEXT", "ColumnPrecision": "16777215"}),
        ("varbinary(8)", {"ColumnType": "VARBINARY", "ColumnPrecision": "8"}),
        ("blob", {"ColumnType": "BLOB", "ColumnPrecision": "65535"}),
        ("json", {"ColumnType": "JSON"}),
    ],
)
def test_columns_are_ticdcs(mysql_type: str, expected: dict[str, str]) -> None:
    col = column_of(ColumnInfo("c", mysql_type))
    assert dict(col.fields()) == {"ColumnName": '"c"', **{k: f'"{v}"' for k, v in expected.items()}}


def test_a_definition_reads_back_into_the_table() -> None:
    info = TableInfo.build(
        "shop",
        "items",
        [("id", "bigint unsigned"), ("name", "varchar(32)"), ("price", "decimal(10,2)"),
         ("at", "datetime(3)"), ("raw", "varbinary(8)")],
        primary_key=["id"],
    )  # fmt: skip
    definition = TableDefinition.of(info, 7)
    back = tabledef.parse(definition.render())
    assert back == definition
    assert back.table_info() == info


# -- CSV ---------------------------------------------------------------------------------------

DOC_CSV = CsvSettings(include_commit_ts=True)


def test_csv_rows_are_ticdcs_documented_example() -> None:
    enc = CsvEncoder(DOC_CSV, "\n")
    rows = [
        (RowChange.insert(EMPLOYEE, _employee(101, "2014-06-04", "New York")), 433305438660591626),
        (
            RowChange.update(
                EMPLOYEE,
                _employee(101, "2014-06-04", "New York"),
                _employee(101, "2015-10-08", "Los Angeles"),
            ),
            433305438660591627,
        ),
        (RowChange.delete(EMPLOYEE, _employee(101, "2017-03-13", "Dallas")), 433305438660591629),
        (RowChange.insert(EMPLOYEE, _employee(102, "2017-03-14", "Shanghai")), 433305438660591630),
        (
            RowChange.update(
                EMPLOYEE,
                _employee(102, "2017-03-14", "Shanghai"),
                _employee(102, "2018-06-15", "Beijing"),
            ),
            433305438660591630,
        ),
    ]
    text = "".join(enc.encode(r, ts) for r, ts in rows)
    assert text == (
        '"I","employee","hr",433305438660591626,101,"Smith","Bob","2014-06-04","New York"\n'
        '"U","employee","hr",433305438660591627,101,"Smith","Bob","2015-10-08","Los Angeles"\n'
        '"D","employee","hr",433305438660591629,101,"Smith","Bob","2017-03-13","Dallas"\n'
        '"I","employee","hr",433305438660591630,102,"Alex","Alice","2017-03-14","Shanghai"\n'
        '"U","employee","hr",433305438660591630,102,"Alex","Alice","2018-06-15","Beijing"\n'
    )


def test_csv_output_old_value_is_ticdcs_documented_example() -> None:
    enc = CsvEncoder(CsvSettings(include_commit_ts=True, output_old_value=True), "\n")
    insert = RowChange.insert(EMPLOYEE, _employee(101, "2014-06-04", "New York"))
    update = RowChange.update(
        EMPLOYEE,
        _employee(101, "2015-10-08", "Shanghai"),
        _employee(101, "2015-10-08", "Los Angeles"),
    )
    text = enc.encode(insert, 433305438660591626) + enc.encode(update, 433305438660591627)
    assert text == (
        '"I","employee","hr",433305438660591626,false,101,"Smith","Bob","2014-06-04","New York"\n'
        '"D","employee","hr",433305438660591627,true,101,"Smith","Bob","2015-10-08","Shanghai"\n'
        '"I","employee","hr",433305438660591627,true,101,"Smith","Bob","2015-10-08",'
        '"Los Angeles"\n'
    )


TS = Bare(435661838416609281)


@pytest.mark.parametrize(
    ("csv", "terminator", "fields", "want"),
    [  # csv_message_test.go's TestCSVMessageEncode
        (
            CsvSettings(include_commit_ts=True),
            "\n",
            ["I", "table1", "test", TS, Bare(123), "hello,world"],
            '"I","table1","test",435661838416609281,123,"hello,world"\n',
        ),
        (
            CsvSettings(delimiter="!", quote="", include_commit_ts=True),
            "\n",
            ["U", "table2", "test", TS, "a!b!c", "def"],
            "U!table2!test!435661838416609281!a\\!b\\!c!def\n",
        ),
        (
            CsvSettings(delimiter="!", quote="", include_commit_ts=True, output_old_value=True),
            "\n",
            ["I", "table2", "test", TS, Bare("false"), "a!b!c", "def"],
            "I!table2!test!435661838416609281!false!a\\!b\\!c!def\n",
        ),
        (
            CsvSettings(delimiter="[*]", quote=""),
            "\r\n",
            ["D", "table4", "test", "a[*]b[*]c", "def"],
            "D[*]table4[*]test[*]a\\[\\*\\]b\\[\\*\\]c[*]def\r\n",
        ),
        (
            CsvSettings(delimiter="[*]", quote="'"),
            "\n",
            ["I", "table5", "test", "a[*]b[*]c", "def", None, Bare(go_g(12345.678))],
            "'I'[*]'table5'[*]'test'[*]'a[*]b[*]c'[*]'def'[*]\\N[*]12345.678\n",
        ),
        (
            CsvSettings(quote="", include_commit_ts=True),
            "\n",
            ["U", "table6", "test", TS, "a\\b\\c", "def\n"],
            "U,table6,test,435661838416609281,a\\\\b\\\\c,def\\n\n",
        ),
        (
            CsvSettings(quote="'"),
            "\n",
            ["I", "table7", "test", "\\", "\\\r", "\\\\"],
            "'I','table7','test','\\','\\\r','\\\\'\n",
        ),
        (
            CsvSettings(delimiter="\t", include_commit_ts=True),
            "\n",
            ["D", "table8", "test", TS, "a\tb", Bare(go_g(123.456)), "你好\uff0c世界"],
            '"D"\t"table8"\t"test"\t435661838416609281\t"a\tb"\t123.456\t"你好\uff0c世界"\n',
        ),
        (CsvSettings(), "\n", ["I", "t", "s", '"a,b,c'], '"I","t","s","""a,b,c"\n'),
        (CsvSettings(), "\n", ["I", "t", "s", ""], '"I","t","s",""\n'),
    ],
)
def test_csv_records_are_ticdcs(
    csv: CsvSettings, terminator: str, fields: list[str | None], want: str
) -> None:
    assert format_record(fields, csv, terminator) == want
    (back,) = csvcodec.parse(want, csv, terminator)
    data = fields[3 + csv.include_commit_ts + csv.output_old_value :]
    assert list(back.values) == [None if f is None else str(f) for f in data]


def test_values_by_type_as_ticdc_writes_them() -> None:
    info = TableInfo.build(
        "s",
        "t",
        [("i", "bigint unsigned"), ("f", "float"), ("d", "double"), ("m", "decimal(10,3)"),
         ("b", "varbinary(8)"), ("e", "enum('new','paid')"), ("z", "set('a','b','c')"),
         ("bit", "bit(8)"), ("y", "year"), ("j", "json"), ("txt", "text")],
    )  # fmt: skip
    row: dict[str, SqlValue] = {
        "i": 2**64 - 1, "f": 7.099999904632568, "d": 1e21, "m": Decimal("129012.123"),
        "b": "阿斯".encode(), "e": 2, "z": 5, "bit": b"\x51", "y": 1970, "j": '{"a": 1}',
        "txt": "x\r\ny",
    }  # fmt: skip
    text = CsvEncoder(CsvSettings(), "\r\n").encode(RowChange.insert(info, row), 1)
    assert text == (
        '"I","t","s",18446744073709551615,7.1,1e+21,"129012.123","6Zi/5pav","paid","a,c",81,'
        '1970,"{""a"": 1}","x\r\ny"\r\n'
    )  # the base64 and BIT 81 are TiCDC's document's examples
    hexed = CsvEncoder(CsvSettings(binary_encoding="hex"), "\n").encode(
        RowChange.insert(info, {**row, "b": b"\x00\xff"}), 1
    )
    assert ',"00ff",' in hexed
    (record,) = csvcodec.parse(text, CsvSettings(), "\r\n")
    definition = TableDefinition.of(info, 1)
    assert definition.columns is not None
    values = [
        csvcodec.value_of(v, c) for c, v in zip(definition.columns, record.values, strict=True)
    ]
    assert values == [
        2**64 - 1, 7.1, 1e21, Decimal("129012.123"), "阿斯".encode(), "paid", "a,c", 81, 1970,
        '{"a": 1}', "x\r\ny",
    ]  # fmt: skip


def test_null_and_the_text_of_the_null_string_differ() -> None:
    info = TableInfo.build("s", "t", [("a", "varchar(4)"), ("b", "varchar(4)")])
    for csv in (CsvSettings(), CsvSettings(quote="")):
        text = CsvEncoder(csv, "\n").encode(RowChange.insert(info, {"a": None, "b": "\\N"}), 1)
        (record,) = csvcodec.parse(text, csv, "\n")
        assert record.values == (None, "\\N"), text


def test_a_row_without_every_column_is_refused() -> None:
    info = TableInfo.build("s", "t", [("id", "int"), ("v", "int")], primary_key=["id"])
    with pytest.raises(SinkError, match="binlog_row_image=FULL"):
        CsvEncoder(CsvSettings(), "\n").encode(RowChange.insert(info, {"id": 1}), 1)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (12345.678, "12345.678"), (123.456, "123.456"), (1e6, "1e+06"), (999999.0, "999999"),
        (0.0001, "0.0001"), (0.00001, "1e-05"), (-2.5, "-2.5"), (100.0, "100"), (0.0, "0"),
        (608863452348.1149, "6.088634523481149e+11"), (float("inf"), "+Inf"),
    ],
)  # fmt: skip
def test_floats_are_gos_percent_v(value: float, text: str) -> None:
    assert go_g(value) == text


def test_updates_changing_a_key_split_in_place() -> None:
    moved = RowChange.update(
        EMPLOYEE, _employee(101, "a", "x"), {**_employee(101, "a", "x"), "Id": 7}
    )
    kept = RowChange.update(EMPLOYEE, _employee(102, "a", "x"), _employee(102, "b", "y"))
    first = RowChange.insert(EMPLOYEE, _employee(102, "c", "z"))
    out = split_updates([first, moved, kept])
    assert [r.kind.value for r in out] == ["insert", "delete", "insert", "update"]
    assert out[1].values["Id"] == 101 and out[2].values["Id"] == 7


# -- settings ----------------------------------------------------------------------------------


def test_url_settings_defaults_and_clamps() -> None:
    s = parse_url(urlsplit("file:///data/cdc?protocol=csv"))
    assert s == StorageSettings("/data/cdc")
    assert (s.flush_interval, s.file_size, s.worker_count, s.date_separator) == (
        5.0,
        64 << 20,
        16,
        "day",
    )
    assert (s.file_index_width, s.terminator, s.extension) == (20, "\r\n", ".csv")
    t = parse_url(
        urlsplit(
            "file:///d?protocol=canal-json&flush-interval=1s&file-size=1024&worker-count=900"
            "&file-index-width=6&date-separator=none&terminator=%0A&enable-tidb-extension=true"
            "&csv.delimiter=%7C&csv.quote=&csv.include-commit-ts=true&csv.output-old-value=true"
        )
    )
    assert (t.flush_interval, t.file_size, t.worker_count) == (2.0, 1 << 20, 512)  # clamped
    assert (t.file_index_width, t.date_separator, t.terminator, t.extension) == (
        6,
        "none",
        "\n",
        ".json",
    )
    assert t.csv == CsvSettings("|", "", "\\N", True, True)
    assert t.tidb_extension
    assert parse_url(urlsplit("file:///d?protocol=csv&file-index-width=3")).file_index_width == 20


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("protocol=xml", "protocol 'xml' is not one of csv, canal-json"),
        ("protocol=csv&bogus=1", "unknown option 'bogus'"),
        ("protocol=csv&date-separator=week", "date-separator must be one of"),
        ("protocol=csv&csv.delimiter=%0A", "csv.delimiter"),
        ("protocol=csv&csv.quote=%2C", "must not share"),
        ("protocol=csv&worker-count=0", "worker-count must be greater than 0"),
        ("protocol=csv&protocol=csv", "protocol given twice"),
        ("flush-interval=5s", "protocol is required"),
    ],
)
def test_bad_urls_are_refused_naming_the_problem(query: str, message: str) -> None:
    with pytest.raises(SinkError, match=message) as e:
        parse_url(urlsplit(f"file:///d?{query}"))
    assert not e.value.retriable
