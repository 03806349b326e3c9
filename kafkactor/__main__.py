"""`python -m kafkactor`: the `kafkactor` command, for a venv whose scripts are not on PATH."""

import sys

from kafkactor.cli import main

if __name__ == "__main__":
    sys.exit(main())
