"""Kafka's `sasl.jaas.config` value: one JAAS login module entry, as Kafka's `JaasConfig` reads it.

`org.apache.kafka.common.security.plain.PlainLoginModule required username="admin"
password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";`

The syntax is Java's `StreamTokenizer` as Kafka sets it up: whitespace (every byte up to a
space) separates tokens; `;` and `=` are tokens of their own; a value is a word or a string in
double or single quotes, where a backslash escapes the next character (`\\n`, `\\t`, `\\b`,
`\\r`, `\\f`, `\\a`, `\\v` and octal `\\ddd` as in Java, any other character as itself) and a line
break ends the string; `//` and `/` start a comment to the end of the line, `/* ... */` a block
comment. An entry is `<login module> <control flag> (<option>=<value>)* ;` and the value of
`sasl.jaas.config` holds exactly one (Kafka's `JaasContext`).

Only the login modules of the mechanisms kafkactor serves are accepted: `PlainLoginModule`
(PLAIN: `username` / `password` for the broker's own login, `user_<name>` for the users it
accepts) and `ScramLoginModule` (SCRAM-SHA-256/512: `username` / `password`; the users'
credentials live in ZooKeeper). Errors never quote an option's value: values are passwords.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Final

__all__ = [
    "PLAIN_LOGIN_MODULE",
    "SCRAM_LOGIN_MODULE",
    "JaasConfigError",
    "JaasEntry",
    "format_jaas",
    "parse_jaas",
]

PLAIN_LOGIN_MODULE: Final = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE: Final = "org.apache.kafka.common.security.scram.ScramLoginModule"
LOGIN_MODULES: Final = frozenset({PLAIN_LOGIN_MODULE, SCRAM_LOGIN_MODULE})
CONTROL_FLAGS: Final = ("required", "requisite", "sufficient", "optional")
_ESCAPES: Final = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
_SPECIAL: Final = frozenset(";=\"/'")
_EOF: Final = ""


class JaasConfigError(ValueError):
    """A `sasl.jaas.config` value kafkactor cannot use (Kafka's IllegalArgumentException from
    `JaasConfig`); the message never quotes an option's value."""


@dataclass(frozen=True, slots=True)
class JaasEntry:
    """One JAAS login module entry: the module's class name, its control flag (lower case) and
    its options (name -> value). The repr hides the options (they hold passwords)."""

    login_module: str
    control_flag: str
    options: Mapping[str, str] = field(default_factory=dict, repr=False, hash=False)

    @property
    def username(self) -> str | None:
        return self.options.get("username")

    @property
    def password(self) -> str | None:
        return self.options.get("password")

    def plain_users(self) -> dict[str, str]:
        """PlainLoginModule's `user_<name>="<password>"` options: the users PLAIN accepts."""
        return {
            name[len("user_") :]: value
            for name, value in self.options.items()
            if name.startswith("user_") and len(name) > len("user_")
        }


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # "word", "quoted", ";", "=" or "" (the end)
    text: str


def _tokens(text: str) -> Iterator[_Token]:
    """StreamTokenizer's tokens under Kafka's JaasConfig syntax (see the module doc)."""
    i, n = 0, len(text)
    while i < n:
        char = text[i]
        if char <= " ":
            i += 1
        elif char == "/":
            if text.startswith("/*", i):
                end = text.find("*/", i + 2)
                i = n if end < 0 else end + 2
            else:  # `//` or `/`: a comment to the end of the line
                while i < n and text[i] not in "\r\n":
                    i += 1
        elif char in ";=":
            yield _Token(char, char)
            i += 1
        elif char in "\"'":
            value, i = _quoted(text, i + 1, char)
            yield _Token("quoted", value)
        else:
            start = i
            while i < n and text[i] > " " and text[i] not in _SPECIAL:
                i += 1
            yield _Token("word", text[start:i])
    yield _Token(_EOF, "")


def _quoted(text: str, i: int, quote: str) -> tuple[str, int]:
    """The string from `i` up to the closing `quote` (or a line break, or the end), escapes
    read as Java's StreamTokenizer reads them; and where reading goes on."""
    out: list[str] = []
    n = len(text)
    while i < n and text[i] != quote and text[i] not in "\r\n":
        char = text[i]
        i += 1
        if char != "\\" or i >= n:
            out.append(char)
            continue
        char = text[i]
        i += 1
        if "0" <= char <= "7":  # octal: up to three digits, the first 0-3 for a third
            digits = char
            limit = 3 if char <= "3" else 2
            while len(digits) < limit and i < n and "0" <= text[i] <= "7":
                digits += text[i]
                i += 1
            out.append(chr(int(digits, 8)))
        else:
            out.append(_ESCAPES.get(char, char))
    if i < n and text[i] == quote:
        i += 1
    return "".join(out), i


def _entries(text: str) -> list[JaasEntry]:
    tokens = _tokens(text)
    entries = []
    token = next(tokens)
    while token.kind != _EOF:
        if token.kind in ";=":
            raise JaasConfigError(f"unexpected {token.text!r} where a login module was expected")
        module = token.text
        token = next(tokens)
        if token.kind == _EOF:
            raise JaasConfigError("Login module control flag not specified in JAAS config")
        flag = token.text
        if token.kind in ";=" or flag.lower() not in CONTROL_FLAGS:
            raise JaasConfigError(f"Invalid login module control flag {flag!r} in JAAS config")
        options: dict[str, str] = {}
        token = next(tokens)
        while token.kind not in (_EOF, ";"):
            key = token.text
            if token.kind == "=":
                raise JaasConfigError("an option has no name in JAAS config")
            equals = next(tokens)
            value = next(tokens) if equals.kind == "=" else equals
            if equals.kind != "=" or value.kind not in ("word", "quoted"):
                raise JaasConfigError(f"Value not specified for key {key!r} in JAAS config")
            options[key] = value.text
            token = next(tokens)
        if token.kind != ";":
            raise JaasConfigError("JAAS config entry not terminated by semi-colon")
        entries.append(JaasEntry(module, flag.lower(), options))
        token = next(tokens)
    return entries


def parse_jaas(text: str) -> JaasEntry:
    """The one login module entry of a `sasl.jaas.config` value; JaasConfigError when it is
    malformed, holds no entry or more than one, or names a login module kafkactor has not."""
    entries = _entries(text)
    if not entries:
        raise JaasConfigError("Login module not specified in JAAS config")
    if len(entries) > 1:
        raise JaasConfigError(
            f"JAAS config property contains {len(entries)} login modules, should be 1 module"
        )
    entry = entries[0]
    if entry.login_module not in LOGIN_MODULES:
        raise JaasConfigError(
            f"login module {entry.login_module!r} is not supported: kafkactor serves PLAIN "
            f"({PLAIN_LOGIN_MODULE}) and SCRAM-SHA-256/512 ({SCRAM_LOGIN_MODULE})"
        )
    return entry


def format_jaas(entry: JaasEntry) -> str:
    """The entry as `sasl.jaas.config` text that `parse_jaas` reads back to an equal entry."""
    options = " ".join(f'{key}="{_escape(value)}"' for key, value in entry.options.items())
    return f"{entry.login_module} {entry.control_flag}{' ' if options else ''}{options};"


def _escape(value: str) -> str:
    out = []
    for char in value:
        if char in '\\"':
            out.append("\\" + char)
        elif char in "\r\n" or ord(char) < 0x20:
            out.append(f"\\{ord(char):03o}")
        else:
            out.append(char)
    return "".join(out)
