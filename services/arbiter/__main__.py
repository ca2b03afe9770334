"""``python -m services.arbiter`` runs ``binlog-arbiter``."""

import sys

from services.arbiter.cli import main

sys.exit(main())
