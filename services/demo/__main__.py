"""``python -m services.demo`` runs the demo."""

import sys

try:
    from services.demo.cli import main
except KeyboardInterrupt:  # Ctrl-C while still importing: nothing was started yet
    sys.exit(130)

sys.exit(main())
