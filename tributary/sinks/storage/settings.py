"""The storage sink's settings, read from its URL as TiCDC reads its storage sink URI.

``file:///DIR?protocol=csv&flush-interval=5s&file-size=67108864&worker-count=16`` plus the keys
TiCDC takes from the changefeed config (``[sink]`` and ``[sink.csv]``), which this project keeps
in the sink URL: ``date-separator``, ``file-index-width`` (TiCDC's ``file-index-digit``),
``terminator``, ``csv.delimiter``, ``csv.quote``, ``csv.null``, ``csv.include-commit-ts``,
``csv.output-old-value``, ``csv.binary-encoding-method`` and, for canal-json,
``enable-tidb-extension``. Values out of TiCDC's ranges are clamped as TiCDC clamps them, with
a warning: ``flush-interval`` to 2s..10m, ``file-size`` to 1 MiB..512 MiB, ``worker-count`` to
at most 512; a ``file-index-width`` outside 6..20 is TiCDC's default, 20. Anything else wrong (an
unknown key, a protocol other than ``csv`` and ``canal-json``, a delimiter with a line break) is
a non-retriable ``SinkError`` naming it.

``s3://BUCKET/PREFIX?protocol=csv&endpoint=http://HOST:PORT`` puts the same files under that
bucket prefix (``s3.S3Store``), with the S3 parameters of TiCDC's external storage URI:
``endpoint`` (an S3-compatible service), ``region``, ``access-key``, ``secret-access-key``,
``session-token`` (without keys, botocore's usual chain: the environment, the shared files, the
instance's role), ``force-path-style`` (default true), ``use-accelerate-endpoint``,
``storage-class``, ``sse``, ``sse-kms-key-id`` and ``acl``. ``role-arn`` and ``external-id``
(assuming another role) are refused as not supported.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from urllib.parse import SplitResult, parse_qsl, unquote

from tributary.settings.parsers import parse_bool, parse_byte_size, parse_duration
from tributary.sinks.port import SinkError
from tributary.sinks.urls import redact, unknown_options

log = logging.getLogger(__name__)

PROTOCOLS = ("csv", "canal-json")
DATE_SEPARATORS = ("none", "year", "month", "day")
BINARY_ENCODINGS = ("base64", "hex")
EXTENSIONS = {"csv": ".csv", "canal-json": ".json"}

MIN_FLUSH_INTERVAL, MAX_FLUSH_INTERVAL = 2.0, 600.0
MIN_FILE_SIZE, MAX_FILE_SIZE = 1 << 20, 512 << 20
MAX_WORKER_COUNT = 512
MIN_INDEX_WIDTH, MAX_INDEX_WIDTH = 6, 20

S3_KEYS = (
    "endpoint",
    "region",
    "access-key",
    "secret-access-key",
    "session-token",
    "force-path-style",
    "use-accelerate-endpoint",
    "storage-class",
    "sse",
    "sse-kms-key-id",
    "acl",
)
S3_REFUSED = ("role-arn", "external-id")
SSE = ("", "AES256", "aws:kms")

_KEYS = (
    "protocol",
    "flush-interval",
    "file-size",
    "worker-count",
    "date-separator",
    "file-index-width",
    "terminator",
    "csv.delimiter",
    "csv.quote",
    "csv.null",
    "csv.include-commit-ts",
    "csv.output-old-value",
    "csv.binary-encoding-method",
    "enable-tidb-extension",
)


@dataclass(frozen=True, slots=True)
class CsvSettings:
    """TiCDC's ``[sink.csv]``, with its defaults."""

    delimiter: str = ","  # 1 to 3 characters, no CR or LF, none of them the quote
    quote: str = '"'  # "" or one character: "" escapes delimiters and line breaks instead
    null: str = "\\N"  # how NULL is written
    include_commit_ts: bool = False  # the commit ts as the 4th column
    output_old_value: bool = False  # an UPDATE as a D row (old) and an I row (new)
    binary_encoding: str = "base64"  # binary strings as base64 or hex

    def __post_init__(self) -> None:
        if not 1 <= len(self.delimiter) <= 3 or any(c in self.delimiter for c in "\r\n"):
            raise ValueError("csv.delimiter must be 1 to 3 characters without CR or LF")
        if len(self.quote) > 1 or self.quote in ("\r", "\n"):
            raise ValueError("csv.quote must be empty or one character other than CR or LF")
        if self.quote and self.quote in self.delimiter:
            raise ValueError("csv.quote and csv.delimiter must not share a character")
        if self.binary_encoding not in BINARY_ENCODINGS:
            raise ValueError(f"csv.binary-encoding-method must be one of {BINARY_ENCODINGS}")


@dataclass(frozen=True, slots=True)
class S3Settings:
    """Where an ``s3://`` sink's objects go, as TiCDC's S3 URI parameters say."""

    bucket: str
    prefix: str = ""  # the keys' common start, without a leading or trailing /
    endpoint: str = ""  # an S3-compatible service's URL; "" is AWS's own
    region: str = ""  # "" lets botocore decide (AWS_REGION, the config file)
    access_key: str = field(default="", repr=False)
    secret_access_key: str = field(default="", repr=False)
    session_token: str = field(default="", repr=False)
    force_path_style: bool = True  # http://host/bucket/key rather than http://bucket.host/key
    use_accelerate_endpoint: bool = False
    storage_class: str = ""  # STANDARD, STANDARD_IA, ...; "" is the bucket's default
    sse: str = ""  # "", AES256 or aws:kms
    sse_kms_key_id: str = ""
    acl: str = ""  # a canned ACL: private, authenticated-read, ...

    def __post_init__(self) -> None:
        if not self.bucket:
            raise ValueError("the URL names no bucket (s3://BUCKET/PREFIX)")
        if self.sse not in SSE:
            raise ValueError(f"sse must be empty, AES256 or aws:kms, not {self.sse!r}")
        if self.sse_kms_key_id and self.sse != "aws:kms":
            raise ValueError("sse-kms-key-id needs sse=aws:kms")
        if bool(self.access_key) != bool(self.secret_access_key):
            raise ValueError("access-key and secret-access-key go together")


@dataclass(frozen=True, slots=True)
class StorageSettings:
    directory: str  # the sink's root directory; for s3://, the bucket and prefix as a URL
    protocol: str = "csv"  # csv or canal-json
    flush_interval: float = 5.0  # seconds between two flushes of every table's buffer
    file_size: int = 64 << 20  # bytes: a table's buffer this large is written at once
    worker_count: int = 16  # files written at the same time
    date_separator: str = "day"  # none, year, month or day: the date directory of a file
    file_index_width: int = 20  # digits of a file's number (TiCDC's default is 20)
    terminator: str = "\r\n"  # after each row (TiCDC's default)
    csv: CsvSettings = field(default_factory=CsvSettings)
    tidb_extension: bool = False  # canal-json: _tidb.commitTs in every message
    s3: S3Settings | None = None  # set for s3:// (then the files are objects: ``s3``)

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"protocol {self.protocol!r} is not one of {', '.join(PROTOCOLS)}")
        if self.date_separator not in DATE_SEPARATORS:
            raise ValueError(f"date-separator must be one of {', '.join(DATE_SEPARATORS)}")
        if self.flush_interval <= 0 or self.file_size <= 0 or self.worker_count <= 0:
            raise ValueError("flush-interval, file-size and worker-count must be positive")
        if not MIN_INDEX_WIDTH <= self.file_index_width <= MAX_INDEX_WIDTH:
            raise ValueError("file-index-width must be 6 to 20")
        if not self.terminator or any(c not in "\r\n" for c in self.terminator):
            raise ValueError("terminator must be made of CR and LF")

    @property
    def extension(self) -> str:
        return EXTENSIONS[self.protocol]


def _clamp(name: str, value: float, low: float, high: float) -> float:
    if not low <= value <= high:
        clamped = min(max(value, low), high)
        log.warning(
            "storage sink: %s %s is out of %s..%s, using %s", name, value, low, high, clamped
        )
        return clamped
    return value


def _s3(url: SplitResult, q: dict[str, str]) -> S3Settings:
    refused = [k for k in S3_REFUSED if k in q]
    if refused:
        raise ValueError(f"{', '.join(refused)} (assuming another IAM role) is not supported")
    return S3Settings(
        bucket=unquote(url.netloc),
        prefix=unquote(url.path).strip("/"),
        endpoint=q.get("endpoint", ""),
        region=q.get("region", ""),
        access_key=q.get("access-key", ""),
        secret_access_key=q.get("secret-access-key", ""),
        session_token=q.get("session-token", ""),
        force_path_style=parse_bool(q.get("force-path-style", "true")),
        use_accelerate_endpoint=parse_bool(q.get("use-accelerate-endpoint", "false")),
        storage_class=q.get("storage-class", ""),
        sse=q.get("sse", ""),
        sse_kms_key_id=q.get("sse-kms-key-id", ""),
        acl=q.get("acl", ""),
    )


def parse_url(url: SplitResult) -> StorageSettings:
    """The settings of ``file:///DIR?protocol=...`` or ``s3://BUCKET/PREFIX?protocol=...``; a
    SinkError naming what is wrong."""
    is_s3 = url.scheme.lower() == "s3"
    directory = unquote(url.netloc + url.path)
    known = (*_KEYS, *S3_KEYS, *S3_REFUSED) if is_s3 else _KEYS
    problem = unknown_options(url, known)
    if problem:
        raise SinkError(f"storage sink URL {redact(url)!r}: {problem}", retriable=False)
    query = parse_qsl(url.query, keep_blank_values=True)
    twice = sorted({k for k, _ in query if [q for q, _ in query].count(k) > 1})
    if twice:
        raise SinkError(f"storage sink URL {redact(url)!r}: {', '.join(twice)} given twice")
    q = dict(query)
    try:
        s3 = _s3(url, q) if is_s3 else None
        if s3 is not None:
            directory = f"s3://{s3.bucket}/{s3.prefix}".rstrip("/")
        if not directory:
            raise ValueError("the URL names no directory")
        if "protocol" not in q:
            raise ValueError("protocol is required (csv or canal-json)")
        interval = _clamp(
            "flush-interval",
            parse_duration(q.get("flush-interval", "5s")),
            MIN_FLUSH_INTERVAL,
            MAX_FLUSH_INTERVAL,
        )
        size = int(
            _clamp(
                "file-size",
                parse_byte_size(q.get("file-size", 64 << 20)),
                MIN_FILE_SIZE,
                MAX_FILE_SIZE,
            )
        )
        workers = int(q.get("worker-count", 16))
        if workers <= 0:
            raise ValueError(f"worker-count must be greater than 0, not {workers}")
        width = int(q.get("file-index-width", MAX_INDEX_WIDTH))
        if not MIN_INDEX_WIDTH <= width <= MAX_INDEX_WIDTH:
            width = MAX_INDEX_WIDTH  # TiCDC adjusts it silently
        csv = CsvSettings(
            delimiter=q.get("csv.delimiter", ","),
            quote=q.get("csv.quote", '"'),
            null=q.get("csv.null", "\\N"),
            include_commit_ts=parse_bool(q.get("csv.include-commit-ts", "false")),
            output_old_value=parse_bool(q.get("csv.output-old-value", "false")),
            binary_encoding=q.get("csv.binary-encoding-method", "base64"),
        )
        return StorageSettings(
            directory=directory,
            protocol=q["protocol"],
            flush_interval=interval,
            file_size=size,
            worker_count=min(workers, MAX_WORKER_COUNT),
            date_separator=q.get("date-separator", "day"),
            file_index_width=width,
            terminator=q.get("terminator", "\r\n"),
            csv=csv,
            tidb_extension=parse_bool(q.get("enable-tidb-extension", "false")),
            s3=s3,
        )
    except ValueError as e:
        raise SinkError(f"storage sink URL {redact(url)!r}: {e}", retriable=False) from e
