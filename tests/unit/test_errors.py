"""The one error root: every package's error derives from it and keeps its own defaults."""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path

import pytest

from binlog_operator.kube import KubeError
from binlog_operator.spec import SpecError
from services.binlogctl.errors import CtlError, WaitTimedOut
from services.capture.client import ClientError
from services.capture.errors import CaptureError, NotOwner
from services.demo.errors import DemoError
from services.drainer.errors import CollectorStopped, DrainerError
from services.pump.intake import Reason, WriteRefused
from services.pump.storage.errors import (
    StorageError,
    StorageFull,
    from_os_error,
    from_sqlite_error,
)
from services.spark.errors import JobError
from tributary.checker.errors import CheckerError
from tributary.coord.cluster_id import ClusterIdError
from tributary.coord.kv import KvError
from tributary.ddlhistory.errors import DdlHistoryError
from tributary.errors import TributaryError
from tributary.pumpclient.errors import PumpClientError, RpcFailure
from tributary.registry.registry import NodeNotFoundError, RegistryError
from tributary.settings.errors import Problem, SettingsError
from tributary.sinks import SinkError
from tributary.sources.mysql.errors import ConnectionLost, ServerError, SourceError
from tributary.staging.format import StagingError
from tributary.tidbcodec.errors import CodecError, DecodeError
from tributary.tso.errors import NotLeader, TsoError
from tributary.wire.peek import MalformedBinlog
from tributary.workload.errors import Conflict, WorkloadError

# (class, its retriable default)
ROOTS: list[tuple[type[TributaryError], bool]] = [
    (KvError, True),
    (PumpClientError, True),
    (TsoError, True),
    (StorageError, True),
    (SinkError, False),
    (CheckerError, False),
    (DdlHistoryError, False),
    (SourceError, False),
    (WorkloadError, False),
    (StagingError, False),
    (RegistryError, False),
    (CodecError, False),
    (DrainerError, False),
    (CaptureError, False),
    (JobError, False),
    (CtlError, False),
    (DemoError, False),
]


@pytest.mark.parametrize(("cls", "default"), ROOTS, ids=lambda v: getattr(v, "__name__", ""))
def test_roots_share_one_root_and_keep_their_defaults(
    cls: type[TributaryError], default: bool
) -> None:
    assert issubclass(cls, TributaryError)
    assert cls("x").retriable is default
    assert cls("x", retriable=not default).retriable is (not default)
    assert str(cls("what failed")) == "what failed"


def test_an_instance_override_does_not_touch_the_class() -> None:
    e = KvError("lease expired", retriable=False)
    assert not e.retriable
    assert KvError.retriable and KvError("again").retriable


def test_subclass_defaults_win_over_the_root() -> None:
    assert ClusterIdError("bad id").retriable is False
    assert ConnectionLost("gone").retriable is True
    assert Conflict("deadlock").retriable is True
    assert NotOwner("lost").retriable is True
    assert CollectorStopped("stopping").retriable is True
    assert StorageFull("full").retriable is False
    assert NotLeader(None).retriable is True
    assert WaitTimedOut("slow").retriable is True


def test_errors_with_their_own_arguments_set_retriable() -> None:
    assert ServerError(1205, "lock wait timeout").retriable
    assert not ServerError(1064, "syntax").retriable
    assert from_os_error("append", OSError(errno.ENOSPC, "full")).retriable is False
    assert from_os_error("append", OSError(errno.EAGAIN, "again")).retriable is True
    assert not WriteRefused(Reason.MALFORMED, "bad", retriable=False).retriable
    failure = RpcFailure("timeout", uncertain=True)
    assert failure.retriable and failure.uncertain and not failure.reset
    assert ClientError(503, "busy").retriable and not ClientError(404, "no").retriable
    assert KubeError("conflict", 429).retriable and not KubeError("bad", 422).retriable
    assert SettingsError([Problem("gc", "default", "bad")]).retriable is False


def test_value_errors_stay_value_errors() -> None:
    for cls in (CodecError, DecodeError, MalformedBinlog):
        assert issubclass(cls, ValueError) and issubclass(cls, TributaryError)
    assert issubclass(SpecError, ValueError) and not SpecError(["x"]).retriable
    assert issubclass(NodeNotFoundError, LookupError)


def test_a_full_disk_is_storage_full_by_its_code(tmp_path: Path) -> None:
    assert isinstance(from_os_error("append", OSError(errno.ENOSPC, "full")), StorageFull)
    assert isinstance(from_os_error("append", OSError(errno.EDQUOT, "quota")), StorageFull)
    assert not isinstance(from_os_error("append", OSError(errno.EIO, "io")), StorageFull)
    db = sqlite3.connect(tmp_path / "tiny.db")  # a real SQLITE_FULL: the file may not grow
    try:
        db.execute("PRAGMA max_page_count = 2")
        with pytest.raises(sqlite3.OperationalError) as full:
            db.execute("CREATE TABLE t (v BLOB)")
            db.execute("INSERT INTO t VALUES (zeroblob(100000))")
        with pytest.raises(sqlite3.OperationalError) as other:
            db.execute("SELECT * FROM missing")
    finally:
        db.close()
    assert isinstance(from_sqlite_error("index", full.value), StorageFull)
    mapped = from_sqlite_error("index", other.value)
    assert mapped.retriable and not isinstance(mapped, StorageFull)
