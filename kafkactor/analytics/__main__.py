"""`python -m kafkactor.analytics EVENTS ... --out DIR`: `kafkactor analyze` as a module.

The same command as `kafkactor analyze`, runnable where only a Python file can be given:
`spark-submit` runs this file as a script (see docs/analytics.md), and then the session it
set up (master, memory, --conf) is the one the analysis uses.
"""

import sys
from pathlib import Path

if __name__ == "__main__":
    # Run as a file (spark-submit .../analytics/__main__.py), Python puts this directory first
    # on sys.path, where `schema`, `tables`, ... would shadow any top-level modules so named.
    here = Path(__file__).resolve().parent
    sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != here]

    from kafkactor.cli import main

    sys.exit(main(["analyze", *sys.argv[1:]]))
