"""`python -m plait`: the demo entry point (the command line comes in a later issue)."""
from .demo import main

if __name__ == "__main__":
    raise SystemExit(main())
