"""``python -m services.status``: the same as ``binlog-status``."""

import sys

from services.status.cli import main

sys.exit(main())
