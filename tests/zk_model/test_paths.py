"""Znode path checks and parts."""

from __future__ import annotations

import pytest
from kazoo.exceptions import BadArgumentsError

from kafkactor.zk_model import paths


@pytest.mark.parametrize("path", ["/", "/a", "/a/b-c.d_e", "/zookeeper/quota", "/a/.b", "/ü"])
def test_valid_paths(path: str) -> None:
    paths.validate(path)


@pytest.mark.parametrize("path", ["", "a", "/a/", "//", "/a//b", "/..", "/a/.", "/\x01", "/\ufff0"])
def test_invalid_paths(path: str) -> None:
    with pytest.raises(BadArgumentsError):
        paths.validate(path)


def test_a_sequential_path_may_end_in_a_slash() -> None:
    paths.validate("/queue/", sequential=True)
    with pytest.raises(BadArgumentsError):
        paths.validate("/queue//", sequential=True)


def test_parts() -> None:
    assert paths.split("/a") == ("/", "a")
    assert paths.split("/a/b") == ("/a", "b")
    assert paths.split("/q/") == ("/q", "")
    assert paths.join("/", "a") == "/a"
    assert paths.join("/a", "b") == "/a/b"
    assert paths.ancestors("/a/b/c") == ["/a", "/a/b"]
    assert paths.ancestors("/a") == []
    assert paths.ancestors("/q/") == ["/q"]
