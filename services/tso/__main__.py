"""``python -m services.tso``."""

from services.tso.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
