"""Which build of kafkactor this interpreter runs: pure Python, or with its pure cores compiled.

kafkactor is typed Python throughout. Its compiled build (``KAFKACTOR_MYPYC=1 pip install .``,
[docs/compiled-build.md]) compiles the modules named in `MYPYC_MODULES` with mypyc, from the
same source, as black and mypy ship their compiled wheels; every other module, and every
editable install, is the pure build, which stays the reference. ``kafkactor version`` says which
build runs.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
from typing import Final

# The pure cores on the hot path: the timing wheel, its buckets and the SystemTimer over them,
# the purgatory's DelayedOperation and watch lists, the record batch reader and validator
# every produce goes through, the batch builder the in-process producer encodes with, the
# log's append path around them (log, segment, the offset and time indexes, the append's
# result, the leader epoch cache and the producer state every append consults), and the
# partition's replication state (ISR, follower log ends, high watermark).
# setup.py reads this tuple (as a literal, without importing kafkactor) to know what to compile.
MYPYC_MODULES: Final = (
    "kafkactor.timer.task",
    "kafkactor.timer.wheel",
    "kafkactor.timer.delay_queue",
    "kafkactor.timer.system_timer",
    "kafkactor.actors.purgatory.purgatory",
    "kafkactor.storage.record_batch",
    "kafkactor.storage.records",
    "kafkactor.storage.abstract_index",
    "kafkactor.storage.index",
    "kafkactor.storage.time_index",
    "kafkactor.storage.segment",
    "kafkactor.storage.log",
    "kafkactor.storage.log_info",
    "kafkactor.storage.leader_epoch",
    "kafkactor.storage.producer_state",
    "kafkactor.actors.replication.partition",
)


def compiled_modules() -> list[str]:
    """The modules of `MYPYC_MODULES` this interpreter loads as compiled extension modules."""
    found = []
    for name in MYPYC_MODULES:
        spec = importlib.util.find_spec(name)
        if spec is not None and isinstance(spec.loader, importlib.machinery.ExtensionFileLoader):
            found.append(name)
    return found


def describe() -> str:
    """The build in a phrase: 'pure build', 'compiled build: 6 modules by mypyc', or what is
    partly compiled."""
    compiled = compiled_modules()
    if not compiled:
        return "pure build"
    if len(compiled) == len(MYPYC_MODULES):
        return f"compiled build: {len(compiled)} modules by mypyc"
    missing = ", ".join(m for m in MYPYC_MODULES if m not in compiled)
    return (
        f"partly compiled build: {len(compiled)} of {len(MYPYC_MODULES)} modules by mypyc;"
        f" pure: {missing}"
    )
