"""Where in the upstream binlog a reader stands: a file and an offset, plus the last GTID.

``str(p)`` is a token, ``"mysql-bin.000003:1234"`` or ``"mysql-bin.000003:1234@0-1-77"``;
``Position.parse`` inverts it exactly and rejects anything else with ValueError. The offset is
the end of the last event read, so a dump started there resumes with the next event.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_TOKEN = re.compile(r"^([^:@\s]+):(\d+)(?:@(\S+))?$")


@dataclass(frozen=True)
class Position:
    file: str
    pos: int
    gtid: str = ""

    def __post_init__(self) -> None:
        if not self.file or ":" in self.file or "@" in self.file or self.pos < 0:
            raise ValueError(f"bad binlog position {self.file!r}:{self.pos}")

    def __str__(self) -> str:
        token = f"{self.file}:{self.pos}"
        return f"{token}@{self.gtid}" if self.gtid else token

    @classmethod
    def parse(cls, token: str) -> Position:
        m = _TOKEN.match(token)
        if m is None:
            raise ValueError(f"not a binlog position token: {token!r}")
        return cls(m.group(1), int(m.group(2)), m.group(3) or "")
