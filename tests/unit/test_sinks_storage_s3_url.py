"""The storage sink's ``s3://`` URL: TiCDC's S3 parameters read into ``S3Settings``, the
refused ones named, and the keys never shown in a message (``urls.redact``)."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from tributary.sinks import SinkError
from tributary.sinks.schemes import check_options
from tributary.sinks.storage import is_storage_url
from tributary.sinks.storage.settings import S3Settings, parse_url
from tributary.sinks.urls import redact


def test_bucket_prefix_and_parameters() -> None:
    s = parse_url(
        urlsplit(
            "s3://cdc/feeds/one/?protocol=canal-json&endpoint=http://127.0.0.1:8333"
            "&region=eu-west-1&access-key=AK&secret-access-key=SK&session-token=T"
            "&force-path-style=false&storage-class=STANDARD_IA&sse=aws:kms&sse-kms-key-id=k1"
            "&acl=private&flush-interval=3s"
        )
    )
    assert s.directory == "s3://cdc/feeds/one" and s.protocol == "canal-json"
    assert s.flush_interval == 3.0
    assert s.s3 == S3Settings(
        bucket="cdc",
        prefix="feeds/one",
        endpoint="http://127.0.0.1:8333",
        region="eu-west-1",
        access_key="AK",
        secret_access_key="SK",
        session_token="T",
        force_path_style=False,
        storage_class="STANDARD_IA",
        sse="aws:kms",
        sse_kms_key_id="k1",
        acl="private",
    )
    assert "SK" not in repr(s.s3) and "AK" not in repr(s.s3)


def test_defaults_and_the_bucket_root() -> None:
    s = parse_url(urlsplit("s3://cdc?protocol=csv"))
    assert s.s3 == S3Settings(bucket="cdc") and s.s3.force_path_style
    assert s.directory == "s3://cdc"
    assert is_storage_url(urlsplit("s3://cdc"))  # s3:// is always the storage sink


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("s3://cdc/p?protocol=csv&role-arn=arn:aws:iam::1:role/r", "role-arn"),
        ("s3:///p?protocol=csv", "no bucket"),
        ("s3://cdc/p?protocol=csv&sse=DES", "sse must be"),
        ("s3://cdc/p?protocol=csv&sse-kms-key-id=k", "needs sse=aws:kms"),
        ("s3://cdc/p?protocol=csv&access-key=AK", "go together"),
        ("s3://cdc/p?endpoint=http://x", "protocol is required"),
        ("file:///d?protocol=csv&endpoint=http://x", "unknown option 'endpoint'"),
    ],
)
def test_refused(url: str, problem: str) -> None:
    with pytest.raises(SinkError, match=problem) as e:
        check_options(url)
    assert not e.value.retriable


def test_keys_are_masked() -> None:
    url = "s3://cdc/p?protocol=csv&access-key=AK1&secret-access-key=SK1&session-token=T1&x=1"
    shown = redact(url, mask="xxxxx")
    assert "AK1" not in shown and "SK1" not in shown and "T1" not in shown
    assert shown.endswith("secret-access-key=xxxxx&session-token=xxxxx&x=1")
    with pytest.raises(SinkError) as e:
        check_options(url)
    assert "SK1" not in str(e.value)
