"""Import kio without its hypothesis hooks.

When hypothesis is importable, kio registers a hypothesis strategy for each of its primitive
types at import, which makes hypothesis build its Unicode tables: seconds of start-up (2.5 to
16 s measured here) for a broker that never generates test data. Unless hypothesis is already
loaded (a test run, where the hooks are harmless), kio is imported with hypothesis hidden.
"""

from __future__ import annotations

import sys


def _import_kio() -> None:
    if "kio.index" in sys.modules or "hypothesis" in sys.modules:
        import kio.index

        return
    sys.modules["hypothesis"] = None  # type: ignore[assignment]  # `import hypothesis` fails
    try:
        import kio.index  # noqa: F401
    finally:
        del sys.modules["hypothesis"]


_import_kio()
