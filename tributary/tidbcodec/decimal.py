"""TiDB's ``MyDecimal`` binary format (``types/mydecimal.go`` ToBin/FromBin).

A decimal of (precision, frac) is stored as its integer digits and its
fraction digits, each cut into 9-digit words of 4 big-endian bytes; the
leftover leading integer digits and trailing fraction digits take only
``DIG2BYTES[n]`` bytes. A negative number has every byte inverted, and the
first bit is flipped last so the result sorts with memcmp.

Worked example (from mydecimal.go): ``1234567890.1234`` as (14, 4) is the
words ``1 | 234567890 | 1234``, stored in 1 + 4 + 2 bytes as
``01 0D FB 38 D2 04 D2`` and after the sign-bit flip ``81 0D FB 38 D2 04 D2``;
``-1234567890.1234`` is ``7E F2 04 C7 2D FB 2D``.

Invariant: encoding is exact or fails. Integer digits beyond
``precision - frac`` and non-zero fraction digits beyond ``frac`` raise
:class:`EncodeError` (TiDB reports overflow/truncation there too); callers that
want MySQL's rounding quantize first (see :mod:`tidbcodec.convert`). Python's
decimal context is never used, so 65-digit values stay exact.
"""

from __future__ import annotations

from decimal import Decimal

from tributary.tidbcodec.errors import DecodeError, EncodeError

DIGITS_PER_WORD = 9
WORD_SIZE = 4
MAX_PRECISION = DIGITS_PER_WORD * 9  # TiDB accepts up to 81 digits in ToBin
MAX_FRAC = 30  # mysql.MaxDecimalScale
DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)


def decimal_bin_size(precision: int, frac: int) -> int:
    digits_int = precision - frac
    words_int, lead = divmod(digits_int, DIGITS_PER_WORD)
    words_frac, trail = divmod(frac, DIGITS_PER_WORD)
    return (words_int + words_frac) * WORD_SIZE + DIG2BYTES[lead] + DIG2BYTES[trail]


def _check_shape(precision: int, frac: int, err: type[Exception]) -> None:
    if not (0 < precision <= MAX_PRECISION and 0 <= frac <= MAX_FRAC and frac <= precision):
        raise err(f"invalid decimal precision/frac ({precision}, {frac})")


def _split_digits(value: Decimal) -> tuple[bool, str, str]:
    """(negative, integer digits without leading zeros, fraction digits)."""
    if not value.is_finite():
        raise EncodeError(f"{value} is not a finite decimal")
    sign, digit_tuple, exp = value.as_tuple()
    assert isinstance(exp, int)
    digits = "".join(map(str, digit_tuple))
    if exp >= 0:
        int_part, frac_part = digits + "0" * exp, ""
    elif -exp >= len(digits):
        int_part, frac_part = "", "0" * (-exp - len(digits)) + digits
    else:
        int_part, frac_part = digits[:exp], digits[exp:]
    int_part = int_part.lstrip("0")
    negative = bool(sign) and any(d != "0" for d in digits)
    return negative, int_part, frac_part


def precision_and_frac(value: Decimal) -> tuple[int, int]:
    """TiDB's ``PrecisionAndFrac``: frac = stored fraction digits, at least 1 digit."""
    _, int_part, frac_part = _split_digits(value)
    frac = len(frac_part)
    return max(len(int_part) + frac, 1), frac


def encode_decimal_bin(value: Decimal, precision: int, frac: int) -> bytes:
    _check_shape(precision, frac, EncodeError)
    negative, int_part, frac_part = _split_digits(value)
    digits_int = precision - frac
    if len(int_part) > digits_int:
        raise EncodeError(f"{value} overflows DECIMAL({precision},{frac})")
    if len(frac_part) > frac:
        if frac_part[frac:].strip("0"):
            raise EncodeError(f"{value} would be truncated to DECIMAL({precision},{frac})")
        frac_part = frac_part[:frac]
    int_part = int_part.rjust(digits_int, "0")
    frac_part = frac_part.ljust(frac, "0")

    out = bytearray()
    lead = digits_int % DIGITS_PER_WORD
    if lead:
        out += int(int_part[:lead]).to_bytes(DIG2BYTES[lead], "big")
    for i in range(lead, digits_int, DIGITS_PER_WORD):
        out += int(int_part[i : i + DIGITS_PER_WORD]).to_bytes(WORD_SIZE, "big")
    full = frac - frac % DIGITS_PER_WORD
    for i in range(0, full, DIGITS_PER_WORD):
        out += int(frac_part[i : i + DIGITS_PER_WORD]).to_bytes(WORD_SIZE, "big")
    trail = frac - full
    if trail:
        out += int(frac_part[full:]).to_bytes(DIG2BYTES[trail], "big")
    if negative:
        out = bytearray(b ^ 0xFF for b in out)
    out[0] ^= 0x80
    return bytes(out)


def _read_group(raw: bytes, pos: int, nbytes: int, ndigits: int, neg: bool) -> tuple[str, int]:
    word = int.from_bytes(raw[pos : pos + nbytes], "big")
    if neg:
        word ^= (1 << (8 * nbytes)) - 1
    if word >= 10**ndigits:
        raise DecodeError("invalid decimal digits")
    return str(word).rjust(ndigits, "0"), pos + nbytes


def decode_decimal_bin(buf: bytes, pos: int, precision: int, frac: int) -> tuple[Decimal, int]:
    """Decode one (precision, frac) decimal at ``pos``; the result keeps ``frac`` digits."""
    _check_shape(precision, frac, DecodeError)
    size = decimal_bin_size(precision, frac)
    if len(buf) - pos < size:
        raise DecodeError("insufficient bytes to decode decimal")
    raw = bytearray(buf[pos : pos + size])
    neg = not raw[0] & 0x80
    raw[0] ^= 0x80
    data = bytes(raw)
    digits_int = precision - frac
    lead = digits_int % DIGITS_PER_WORD
    trail = frac % DIGITS_PER_WORD
    parts: list[str] = []
    at = 0
    if lead:
        part, at = _read_group(data, at, DIG2BYTES[lead], lead, neg)
        parts.append(part)
    for _ in range(digits_int // DIGITS_PER_WORD + frac // DIGITS_PER_WORD):
        part, at = _read_group(data, at, WORD_SIZE, DIGITS_PER_WORD, neg)
        parts.append(part)
    if trail:
        part, at = _read_group(data, at, DIG2BYTES[trail], trail, neg)
        parts.append(part)
    digits = "".join(parts) or "0"
    sign = 1 if neg and digits.strip("0") else 0
    value = Decimal((sign, tuple(int(d) for d in digits), -frac))
    return value, pos + size
