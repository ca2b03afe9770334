"""Passwords encrypted as tidb-binlog encrypts them (``binlogctl -cmd encrypt``, the drainer's
``encrypted_password``).

Format, byte for byte tidb-binlog's: ``base64(iv + b"@" + AES-CFB(key, iv, plaintext))`` with
standard base64 (padded), a random 16-byte IV and full-block (128-bit) CFB; the key is
``BINLOG_SECRET_KEY`` (hex, 16, 24 or 32 bytes) when set, else tidb-binlog's built-in AES-256
default key. Invariant: what ``encrypt`` returns, tidb-binlog decrypts to the same text and so
does ``decrypt``; ``decrypt`` of anything else raises ``DecryptError`` (CFB carries no checksum,
so a wrong key is caught by the result not being UTF-8, which a short password may still pass).
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Mapping

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

KEY_ENV = "BINLOG_SECRET_KEY"
DEFAULT_KEY = bytes.fromhex("a529b7665997f043a30ac8fadcb51d6aa032c226ab5b7750530b12b8c1a16a48")
SEPARATOR = b"@"
BLOCK = 16


class DecryptError(ValueError):
    """Not a ciphertext of this key; never retriable."""

    retriable = False


def secret_key(env: Mapping[str, str] | None = None) -> bytes:
    """The key from ``BINLOG_SECRET_KEY`` (hex) in ``env`` (default ``os.environ``), else the
    default; ``ValueError`` for a value that is not 16, 24 or 32 bytes of hex."""
    text = (os.environ if env is None else env).get(KEY_ENV, "")
    if not text:
        return DEFAULT_KEY
    try:
        key = bytes.fromhex(text)
    except ValueError:
        raise ValueError(f"{KEY_ENV} is not hex") from None
    if len(key) not in (16, 24, 32):
        raise ValueError(f"{KEY_ENV} must be 16, 24 or 32 bytes (32, 48 or 64 hex digits)")
    return key


def encrypt(plaintext: str, key: bytes | None = None, *, iv: bytes | None = None) -> str:
    """``plaintext`` encrypted with ``key`` (default ``secret_key()``); ``iv`` for tests only."""
    iv = os.urandom(BLOCK) if iv is None else iv
    if len(iv) != BLOCK:
        raise ValueError(f"the IV must be {BLOCK} bytes")
    body = _cfb(key, iv, plaintext.encode(), decrypting=False)
    return base64.b64encode(iv + SEPARATOR + body).decode("ascii")


def decrypt(ciphertext: str, key: bytes | None = None) -> str:
    """The text ``ciphertext`` (from ``encrypt`` or tidb-binlog) was made from."""
    try:
        raw = base64.b64decode(ciphertext.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise DecryptError("not base64") from None
    if len(raw) < BLOCK + len(SEPARATOR) or raw[BLOCK : BLOCK + 1] != SEPARATOR:
        raise DecryptError("not an encrypted password (expected iv, '@', ciphertext)")
    plain = _cfb(key, raw[:BLOCK], raw[BLOCK + 1 :], decrypting=True)
    try:
        return plain.decode()
    except UnicodeDecodeError:
        raise DecryptError(
            f"does not decrypt to text: encrypted with another key ({KEY_ENV}?)"
        ) from None


def _cfb(key: bytes | None, iv: bytes, data: bytes, *, decrypting: bool) -> bytes:
    """Full-block CFB (Go's ``cipher.NewCFBEncrypter``): each 16-byte block of ``data`` is XORed
    with AES(previous ciphertext block), the first with AES(iv); a short last block uses the
    head of its keystream. Built on AES-ECB, which every ``cryptography`` release keeps."""
    aes = Cipher(algorithms.AES(secret_key() if key is None else key), modes.ECB()).encryptor()
    out = bytearray()
    previous = iv
    for start in range(0, len(data), BLOCK):
        chunk = data[start : start + BLOCK]
        stream = aes.update(previous)
        done = bytes(a ^ b for a, b in zip(chunk, stream, strict=False))
        out += done
        previous = chunk if decrypting else done
    return bytes(out)
