"""What a Spark job reported: its JSON rows lines and its human line, for the tests that run
a job (``services.spark.progress``)."""

from __future__ import annotations

import io
import json
from typing import Any

from services.spark.progress import ROWS, Progress
from tributary.telemetry.progress import open_progress


class Recorded:
    """A ``Progress`` that shows every step (interval 0) into two buffers."""

    def __init__(self, label: str = "job") -> None:
        self.json, self.human = io.StringIO(), io.StringIO()
        meter = open_progress(label, mode="tty", stream=self.human, redraw=0)
        self.progress = Progress(self.json, meter=meter, interval=0)

    def rows(self) -> list[dict[str, Any]]:
        lines = [json.loads(x) for x in self.json.getvalue().splitlines()]
        return [x for x in lines if x.get("phase") == ROWS]

    def assert_reached(self, total: int) -> None:
        """Rows lines appeared, moved forward only, passed through values between 0 and the
        total, and ended at the total; the human line ended with a done line of the total."""
        rows = self.rows()
        done = [x["rows_done"] for x in rows]
        assert done == sorted(done), done
        assert rows[0]["rows_total"] == rows[-1]["rows_total"] == total
        assert done[-1] == total, done
        assert any(0 < d < total for d in done), done
        assert all(x["rate"] >= 0 for x in rows)
        final = self.human.getvalue().rsplit("\r", 1)[-1]
        assert f"rows {total:,}/{total:,}" in final and "done in" in final, final
        shown = self.human.getvalue().split("\r")
        assert any("ETA" in s or "%" in s for s in shown[:-1]), shown  # moving lines before
