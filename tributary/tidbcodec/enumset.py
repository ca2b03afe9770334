"""ENUM and SET values: names <-> the numbers TiDB stores (``types/enum.go``, ``set.go``).

An ENUM is stored as the 1-based index of its element (0 is the empty
"error" value ``''``); a SET as a bitmask, bit ``i`` for ``elems[i]``.
Example with elems ``("a", "b", "c")``: enum ``"b"`` is 2, set ``{"a", "c"}``
is ``0b101`` = 5.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from tributary.tidbcodec.errors import DecodeError, EncodeError


def _find(elems: Sequence[str], name: str) -> int | None:
    """0-based position of ``name``: exact match first, then case-insensitive."""
    for i, elem in enumerate(elems):
        if elem == name:
            return i
    folded = name.casefold()
    for i, elem in enumerate(elems):
        if elem.casefold() == folded:
            return i
    return None


def enum_index(elems: Sequence[str], value: str | int) -> int:
    if isinstance(value, int):
        if not 0 <= value <= len(elems):
            raise EncodeError(f"enum index {value} outside 1..{len(elems)}")
        return value
    pos = _find(elems, value)
    if pos is not None:
        return pos + 1
    if value == "":
        return 0
    if value.isdigit():
        return enum_index(elems, int(value))
    raise EncodeError(f"{value!r} is not one of the enum elements {list(elems)}")


def enum_name(elems: Sequence[str], index: int) -> str:
    """The element for ``index``; ``''`` for 0 or an index TiDB could not map (as TiDB does)."""
    if 1 <= index <= len(elems):
        return elems[index - 1]
    return ""


def set_mask(elems: Sequence[str], value: str | int | Iterable[str]) -> int:
    if isinstance(value, int):
        if value >> len(elems):
            raise EncodeError(f"set value {value} has bits beyond {len(elems)} elements")
        return value
    names = (value.split(",") if value else []) if isinstance(value, str) else list(value)
    mask = 0
    for name in names:
        pos = _find(elems, name)
        if pos is None:
            raise EncodeError(f"{name!r} is not one of the set elements {list(elems)}")
        mask |= 1 << pos
    return mask


def set_names(elems: Sequence[str], mask: int) -> frozenset[str]:
    if mask >> len(elems):
        raise DecodeError(f"set value {mask} has bits beyond {len(elems)} elements")
    return frozenset(elem for i, elem in enumerate(elems) if mask >> i & 1)


def set_to_str(elems: Sequence[str], names: Iterable[str]) -> str:
    """MySQL's text form: members in definition order, comma separated."""
    wanted = set(names)
    return ",".join(elem for elem in elems if elem in wanted)
