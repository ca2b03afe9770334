"""TiDB's datum codec and old row format, in pure Python (no I/O).

Writers use it to produce the rows inside a binlog's ``PrewriteValue``; the
drainer uses it to read them back. Layers, bottom up:

* value encodings: :mod:`~tidbcodec.number`, :mod:`~tidbcodec.bytes_`,
  :mod:`~tidbcodec.decimal` (MyDecimal bin), :mod:`~tidbcodec.timecodec`
  (packed times, durations), :mod:`~tidbcodec.json_binary` (+ ``json_text``
  for TiDB's JSON text);
* :mod:`~tidbcodec.datum`: flagged datums, EncodeValue / EncodeKey / DecodeOne;
* :mod:`~tidbcodec.row`: the old row format and the inserted / updated /
  deleted row layouts of a binlog; :mod:`~tidbcodec.rowdecoder` decodes them
  in one pass per row with converters compiled per table (the drainer's path);
* :mod:`~tidbcodec.convert` / :mod:`~tidbcodec.unflatten`: Python values <->
  datums by MySQL column type (:mod:`~tidbcodec.mysqltypes`).

Every error is a :class:`CodecError` (``retriable = False``).
"""

from tributary.tidbcodec.convert import JSON_NULL, JsonNull, SqlValue, from_datum, to_datum
from tributary.tidbcodec.datum import (
    MAX_VALUE,
    MIN_NOT_NULL,
    NULL,
    BytesDatum,
    Datum,
    DecimalDatum,
    DurationDatum,
    FloatDatum,
    IntDatum,
    JsonDatum,
    MaxValueDatum,
    MinNotNullDatum,
    NullDatum,
    UintDatum,
    decode_all,
    decode_one,
    encode_key,
    encode_value,
)
from tributary.tidbcodec.errors import CodecError, DecodeError, EncodeError
from tributary.tidbcodec.json_binary import JsonOpaque, JsonValue
from tributary.tidbcodec.mysqltypes import ColumnType
from tributary.tidbcodec.row import (
    EXTRA_HANDLE_ID,
    decode_deleted_row,
    decode_inserted_row,
    decode_old_row,
    decode_updated_row,
    encode_deleted_row,
    encode_inserted_row,
    encode_old_row,
    encode_updated_row,
)
from tributary.tidbcodec.timecodec import CoreTime

__all__ = [
    "EXTRA_HANDLE_ID",
    "JSON_NULL",
    "MAX_VALUE",
    "MIN_NOT_NULL",
    "NULL",
    "BytesDatum",
    "CodecError",
    "ColumnType",
    "CoreTime",
    "Datum",
    "DecimalDatum",
    "DecodeError",
    "DurationDatum",
    "EncodeError",
    "FloatDatum",
    "IntDatum",
    "JsonDatum",
    "JsonNull",
    "JsonOpaque",
    "JsonValue",
    "MaxValueDatum",
    "MinNotNullDatum",
    "NullDatum",
    "SqlValue",
    "UintDatum",
    "decode_all",
    "decode_deleted_row",
    "decode_inserted_row",
    "decode_old_row",
    "decode_one",
    "decode_updated_row",
    "encode_deleted_row",
    "encode_inserted_row",
    "encode_key",
    "encode_old_row",
    "encode_updated_row",
    "encode_value",
    "from_datum",
    "to_datum",
]
