"""`python -m plait`: the `plait` command line (train, evaluate, predict, plot; demo-ops for the raw-Ops demo)."""
from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
