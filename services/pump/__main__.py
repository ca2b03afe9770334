"""``python -m services.pump`` runs ``binlog-pump``."""

import sys

from services.pump.cli import main

sys.exit(main())
