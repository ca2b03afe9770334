"""``python -m tributary.workload``."""

from tributary.workload.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
