"""``python -m tributary.checker`` runs the consistency checker."""

import sys

from tributary.checker.cli import main

sys.exit(main())
