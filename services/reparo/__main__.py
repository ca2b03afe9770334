"""``python -m services.reparo`` runs ``reparo``."""

import sys

from services.reparo.cli import main

sys.exit(main())
