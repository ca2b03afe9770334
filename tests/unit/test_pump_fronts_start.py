"""Starting front processes (``services.pump.split.child``, ``split.fronts``), with real child
processes: an exit is seen with its code and the end of its stderr, a signal is never sent to a
reaped process, and a front that cannot start is tried ``START_ATTEMPTS`` times before the
failure is reported with why."""

from __future__ import annotations

import logging
import os
import sys

import pytest

from services.pump.split import fronts as fronts_module
from services.pump.split.child import Child, describe
from services.pump.split.front import FrontSpec
from services.pump.split.fronts import START_ATTEMPTS, FrontDied, Fronts
from services.pump.split.local import local_names
from tributary.settings.logs import LogSettings
from tributary.settings.security import SecuritySettings


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


async def test_an_exit_is_seen_with_its_code_and_stderr() -> None:
    child = Child(python("import sys; print('one'); sys.stderr.write('two\\nthree'); exit(3)"), {})
    assert await child.wait() == 3
    assert child.returncode == 3
    assert child.tail() == "two\nthree"
    child.kill()  # reaped: nothing is sent, nothing raised
    child.terminate()
    assert describe(3) == "exit 3"


async def test_a_killed_child_reports_the_signal() -> None:
    child = Child(python("import time; time.sleep(600)"), dict(os.environ))
    child.kill()
    code = await child.wait()
    assert describe(code) == "killed by SIGKILL"
    assert child.tail() == ""


def spec_without_writer() -> FrontSpec:
    names = local_names("writer", "grpc", "http")  # nothing listens on them
    return FrontSpec(
        addr="127.0.0.1:0",
        writer=names["writer"],
        grpc=names["grpc"],
        http=names["http"],
        cluster_id=1,
        max_message_size=1 << 20,
        methods={},
        security=SecuritySettings(),
        log=LogSettings(),
        parent=os.getpid(),
    )


async def test_a_front_that_cannot_start_is_tried_again_then_reported(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(fronts_module, "RESTART_DELAY", 0.0)
    fronts = Fronts(spec_without_writer(), 1)
    with caplog.at_level(logging.WARNING, logger=fronts_module.__name__):
        with pytest.raises(FrontDied) as err:
            await fronts.start()
    message = str(err.value)
    assert "(exit 1)" in message and f"gave up after {START_ATTEMPTS} attempts" in message
    assert "ConnectionRefusedError" in message  # the end of the front's own traceback
    retries = [r for r in caplog.records if "starting another" in r.getMessage()]
    assert len(retries) == START_ATTEMPTS - 1
    assert fronts.pids == []
    await fronts.stop()
