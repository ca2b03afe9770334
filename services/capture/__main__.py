"""``python -m services.capture``: the same as ``binlog-cdc``."""

import sys

from services.capture.cli import main

sys.exit(main())
