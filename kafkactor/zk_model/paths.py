"""Znode paths as a ZooKeeper server checks them (`PathUtils.validatePath`), and their parts."""

from __future__ import annotations

from kazoo.exceptions import BadArgumentsError


def _invalid_char(char: str) -> bool:
    code = ord(char)
    return code <= 0x1F or 0x7F <= code <= 0x9F or 0xD800 <= code <= 0xF8FF or code >= 0xFFF0


def _problem(path: str) -> str | None:
    """Why ZooKeeper would refuse `path`, or None when it is a valid znode path."""
    problem = None
    if not path.startswith("/"):
        problem = "path must start with / character"
    elif path != "/":
        names = path[1:].split("/")
        if path.endswith("/"):
            problem = "path must not end with / character"
        elif "" in names:
            problem = "empty node name specified"
        elif "." in names or ".." in names:
            problem = "relative paths not allowed"
        elif any(_invalid_char(char) for char in path):
            problem = "invalid character"
    return problem


def validate(path: str, *, sequential: bool = False) -> None:
    """Raise BadArgumentsError unless `path` is a valid znode path.

    A sequential create's path is checked with a digit appended, as the server does: the name
    part may be empty there ("/queue/" creates "/queue/0000000000").
    """
    problem = _problem(path + "1" if sequential else path)
    if problem is not None:
        raise BadArgumentsError(f"{problem}: {path!r}")


def split(path: str) -> tuple[str, str]:
    """(parent path, node name) of a valid path other than "/"."""
    slash = path.rindex("/")
    return (path[:slash] or "/"), path[slash + 1 :]


def join(parent: str, name: str) -> str:
    """The path of child `name` of `parent`."""
    return parent + name if parent == "/" else f"{parent}/{name}"


def ancestors(path: str) -> list[str]:
    """Every proper ancestor of `path` except "/", outermost first: /a/b/c -> [/a, /a/b]."""
    names = path.split("/")[1:-1]
    return ["/" + "/".join(names[: i + 1]) for i in range(len(names))]
