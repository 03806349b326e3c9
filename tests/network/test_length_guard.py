"""An array count the frame cannot hold is a bad request, refused before kio reads the body.

Without the guard kio's native reader sizes the array from the count and the process aborts
on the allocation (a 30-byte DeleteGroups frame declaring 2**31 - 1 groups asked for hundreds
of gigabytes), so these tests check the guard's verdict before any such frame reaches kio:
`check_lengths` on its own, then `decode_request`, which must refuse it with a
BadRequestError (the socket server then closes the connection and logs why).
"""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

import pytest

from kafkactor.network.api_versions import SERVED_NOT_ADVERTISED, SUPPORTED, ApiKey
from kafkactor.network.codec import BadRequestError, decode_request, request_type
from kafkactor.network.length_guard import MalformedLengthError, check_lengths
from tests.network.wire import encode_request, sample_request, served_range

pytestmark = pytest.mark.timeout(60)

EVERY = [(api, version) for api in sorted(SUPPORTED) for version in served_range(api)] + [
    (api, version)
    for api, (low, high) in SERVED_NOT_ADVERTISED.items()
    for version in range(low, high + 1)
]
HEADER_V1 = struct.Struct(">hhih")  # api key, version, correlation id, client id length


def delete_groups_v0(count: int, *groups: bytes) -> bytes:
    """A DeleteGroups v0 frame (no size prefix) declaring `count` group ids."""
    body = struct.pack(">i", count) + b"".join(struct.pack(">h", len(g)) + g for g in groups)
    return HEADER_V1.pack(ApiKey.DELETE_GROUPS, 0, 7, -1) + body


@pytest.mark.parametrize(("api", "version"), EVERY)
def test_every_valid_request_passes_the_guard(api: ApiKey, version: int) -> None:
    frame = encode_request(api, version, sample_request(api, version), correlation_id=5)
    header, body = decode_request(frame)  # the guard ran, and kio read it all
    assert header.api_key == api and body is not None


def test_a_count_larger_than_the_bytes_left_is_refused_before_kio_reads_it() -> None:
    with pytest.raises(MalformedLengthError, match="a length of 2147483647"):
        check_lengths(request_type(ApiKey.DELETE_GROUPS, 0), delete_groups_v0(2**31 - 1), 10)
    with pytest.raises(BadRequestError, match="malformed body of api key 42 version 0"):
        decode_request(delete_groups_v0(2**31 - 1, b"orders"))


def test_a_count_that_fits_reads_as_before() -> None:
    _, body = decode_request(delete_groups_v0(2, b"orders", b"billing"))
    assert list(body.groups_names) == ["orders", "billing"]
    # one element too many but bytes to spare: kio reports the cut, the guard lets it through
    with pytest.raises(BadRequestError):
        decode_request(delete_groups_v0(3, b"orders", b"billing"))


# Every valid frame with each 4-byte window overwritten by 2**31 - 1 and each byte by the
# start of a huge varint (a flexible count): each decodes or is refused. In a child process,
# so that a count the guard missed shows as a failed test instead of aborting the run.
MUTATE_ALL = """
import struct, sys
from kafkactor.network.codec import BadRequestError, decode_request
from tests.network.test_length_guard import EVERY
from tests.network.wire import encode_request, sample_request

patches = (struct.pack(">i", 2**31 - 1), b"\\xff\\xff\\xff\\xff\\x07")
tried = 0
for api, version in EVERY:
    frame = encode_request(api, version, sample_request(api, version), correlation_id=5)
    for at in range(len(frame)):
        for patch in patches:
            mutated = frame[:at] + patch + frame[at + len(patch):]
            tried += 1
            try:
                decode_request(mutated)
            except BadRequestError:
                pass
print(tried)
"""


def test_huge_counts_anywhere_in_any_request_never_abort_the_process() -> None:
    run = subprocess.run(
        [sys.executable, "-c", MUTATE_ALL],
        capture_output=True,
        text=True,
        timeout=50,
        check=False,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert int(run.stdout) > 10_000
