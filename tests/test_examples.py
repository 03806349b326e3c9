"""Every script in examples/ runs as a newcomer would run it, and prints what it promises."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

# what each example must print (a line fragment), beyond exiting 0
PROMISES = {
    "embed_cluster.py": ["sent RecordMetadata(topic='orders'", "offset 0: b'order"],
    "acks_under_follower_failure.py": [
        "once the ISR shrank to",
        "acks=all refused: NOT_ENOUGH_REPLICAS",
        "acks=1 still answered: RecordMetadata",
    ],
    "long_poll_fetch.py": ["idle poll returned []", "long poll returned [b'click!']"],
    "timing_wheel.py": ["t= 8000ms  8000ms task", "pending: 0"],
    "controller_failover.py": ["epoch 2"],
}


def test_every_example_is_listed() -> None:
    assert sorted(p.name for p in EXAMPLES.glob("*.py")) == sorted(PROMISES)


@pytest.mark.timeout(90)
@pytest.mark.parametrize("name", sorted(PROMISES))
def test_example_runs_and_prints_what_it_promises(name: str, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=80,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    for promise in PROMISES[name]:
        assert promise in done.stdout, (promise, done.stdout)
    assert not list(tmp_path.iterdir()), "an example left files behind"
