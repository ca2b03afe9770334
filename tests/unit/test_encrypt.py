"""tidb-binlog's password encryption: fixed vectors, round trips, clear errors, and its users
(``binlogctl -cmd encrypt``, the drainer's ``[syncer.to] encrypted_password``)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from services.binlogctl.cli import main as binlogctl
from services.binlogctl.meta import savepoint_text
from tributary.config.drainer import DrainerConfig
from tributary.encrypt import DEFAULT_KEY, DecryptError, decrypt, encrypt, secret_key
from tributary.settings import SettingsError, load
from tributary.wire import ts as tso

IV = b"0123456789abcdef"
# Made with Go's standard library alone (crypto/aes, cipher.NewCFBEncrypter, base64.StdEncoding)
# from tidb-binlog's default key and the IV above, laid out as pkg/encrypt does: iv, '@', body.
VECTORS = [
    ("secret", "MDEyMzQ1Njc4OWFiY2RlZkBCYfiLpLI="),
    (
        "p@ss:w/rd with a longer tail to span blocks!",
        "MDEyMzQ1Njc4OWFiY2RlZkBBROiK+7HMPelZ1bSUfcQtqnijneqAiOZNY8O8wSNW4qDNDtuYP5TVTfW3Jg==",
    ),
    ("", "MDEyMzQ1Njc4OWFiY2RlZkA="),
]


@pytest.fixture(autouse=True)
def _default_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BINLOG_SECRET_KEY", raising=False)


@pytest.mark.parametrize(("plain", "cipher"), VECTORS)
def test_fixed_vectors_match_tidb_binlogs_format(plain: str, cipher: str) -> None:
    assert encrypt(plain, iv=IV) == cipher
    assert decrypt(cipher) == plain


def test_round_trip_with_a_random_iv_and_any_text() -> None:
    for text in ("root", "pässwörd ✓", "x" * 100):
        first, second = encrypt(text), encrypt(text)
        assert first != second  # a fresh IV each time
        raw = base64.b64decode(first)
        assert raw[16:17] == b"@" and len(raw) == 17 + len(text.encode())
        assert decrypt(first) == decrypt(second) == text


def test_the_key_comes_from_binlog_secret_key(monkeypatch: pytest.MonkeyPatch) -> None:
    assert secret_key() == DEFAULT_KEY and len(DEFAULT_KEY) == 32
    monkeypatch.setenv("BINLOG_SECRET_KEY", "00112233445566778899aabbccddeeff")
    assert secret_key() == bytes.fromhex("00112233445566778899aabbccddeeff")
    assert decrypt(encrypt("pw")) == "pw"
    with pytest.raises(DecryptError, match="another key"):
        decrypt(VECTORS[1][1])
    for bad in ("zz", "0011"):
        monkeypatch.setenv("BINLOG_SECRET_KEY", bad)
        with pytest.raises(ValueError, match="BINLOG_SECRET_KEY"):
            secret_key()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not base64!", "not base64"),
        (base64.b64encode(b"short").decode(), "not an encrypted password"),
        (base64.b64encode(IV + b"#body").decode(), "not an encrypted password"),
    ],
)
def test_malformed_ciphertexts_are_clear_errors(text: str, message: str) -> None:
    with pytest.raises(DecryptError, match=message):
        decrypt(text)


def test_drainer_decrypts_encrypted_password_at_load(tmp_path: Path) -> None:
    toml = tmp_path / "drainer.toml"
    toml.write_text(
        f'[syncer.to]\nuser = "rep"\npassword = "ignored"\nencrypted_password = "{VECTORS[0][1]}"\n'
        'read-timeout = "2m"\n'
    )
    cfg = load(DrainerConfig, ["-config", str(toml)], {}, "DRAINER")
    assert cfg.syncer.to.effective_password() == "secret"
    url = cfg.syncer.sink_url("d")
    assert url == "mysql://rep:secret@127.0.0.1:3306/?consistent=true&read-timeout=120"


def test_drainer_reports_an_undecryptable_password(tmp_path: Path) -> None:
    toml = tmp_path / "drainer.toml"
    toml.write_text('[syncer.to]\nencrypted_password = "plain-password"\n')
    with pytest.raises(SettingsError) as e:
        load(DrainerConfig, ["-config", str(toml)], {}, "DRAINER")
    [problem] = e.value.problems
    assert problem.key == "syncer.to.encrypted_password"
    assert problem.message.startswith("cannot decrypt: not")


def test_binlogctl_encrypt_prints_what_decrypts_to_the_text(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert binlogctl(["-cmd", "encrypt", "-text", "p@ss word"]) == 0
    assert decrypt(capsys.readouterr().out.strip()) == "p@ss word"
    assert binlogctl(["-cmd=encrypt", "-text=x", "--json"]) == 0
    assert decrypt(json.loads(capsys.readouterr().out)["encrypted"]) == "x"
    assert binlogctl(["-cmd", "encrypt"]) == 2
    assert "encrypt needs --text" in capsys.readouterr().err


def test_binlogctl_time_zone_names_the_savepoints_second_time(
    capsys: pytest.CaptureFixture[str],
) -> None:
    ts = tso.compose(1_700_000_000_123, 7)
    text = savepoint_text(ts, ZoneInfo("Asia/Shanghai"), "Asia/Shanghai")
    assert text.splitlines()[1:] == [
        "# UTC:   2023-11-14 22:13:20.123 +00:00",
        "# Asia/Shanghai: 2023-11-15 06:13:20.123 +08:00",
    ]
    assert binlogctl(["-cmd", "generate_meta", "-time-zone", "Nowhere/City"]) == 2
    assert "unknown time zone 'Nowhere/City'" in capsys.readouterr().err
