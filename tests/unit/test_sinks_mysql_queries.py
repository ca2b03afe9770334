"""How the MySQL sink packs a transaction's statements into multi-statement queries."""

from __future__ import annotations

from tributary.sinks.mysql.conn import MAX_QUERY, queries


def test_statements_share_a_query_up_to_the_limit() -> None:
    assert list(queries(["a", "bb", "c"], 5)) == ["a;\nbb", "c"]
    assert list(queries(["BEGIN", "x" * 3, "y" * 3], 100)) == ["BEGIN;\nxxx;\nyyy"]


def test_a_statement_over_the_limit_is_a_query_of_its_own() -> None:
    big = "z" * 50
    assert list(queries(["BEGIN", big, "a", "b"], 10)) == ["BEGIN", big, "a;\nb"]


def test_every_statement_is_sent_once_in_order_within_the_limit() -> None:
    texts = [str(i) * (i % 13 + 1) for i in range(500)]
    out = list(queries(texts, 40))
    assert ";\n".join(out).split(";\n") == texts
    assert all(len(q) <= 40 or ";" not in q for q in out)
    assert len(list(queries(texts))) == 1  # the default limit is far above this
    assert MAX_QUERY < 16 << 20  # the default max_allowed_packet


def test_nothing_gives_nothing() -> None:
    assert list(queries([], 10)) == []
