"""``python -m services.drainer`` runs ``binlog-drainer``."""

import sys

from services.drainer.cli import main

sys.exit(main())
