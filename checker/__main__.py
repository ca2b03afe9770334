"""``python -m checker`` runs the consistency checker."""

import sys

from checker.cli import main

sys.exit(main())
