"""``python -m services.binlogctl`` runs ``binlogctl``."""

import sys

from services.binlogctl.cli import main

sys.exit(main())
