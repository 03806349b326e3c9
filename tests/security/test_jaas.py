"""`sasl.jaas.config` as Kafka's JaasConfig reads it: PlainLoginModule / ScramLoginModule
entries, quoting and escapes, comments, the trailing `;`, and refusals that never quote a
value."""

from __future__ import annotations

import pytest

from kafkactor.security.jaas import (
    PLAIN_LOGIN_MODULE,
    SCRAM_LOGIN_MODULE,
    JaasConfigError,
    JaasEntry,
    format_jaas,
    parse_jaas,
)

pytestmark = pytest.mark.timeout(10)

PLAIN = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret" '
    'user_alice="alice-secret";'
)


def test_plain_login_module_with_its_users() -> None:
    entry = parse_jaas(PLAIN)
    assert entry.login_module == PLAIN_LOGIN_MODULE
    assert entry.control_flag == "required"
    assert (entry.username, entry.password) == ("admin", "admin-secret")
    assert entry.plain_users() == {"admin": "admin-secret", "alice": "alice-secret"}
    assert "admin-secret" not in repr(entry)


def test_scram_login_module_over_several_lines_with_comments() -> None:
    text = (
        "  org.apache.kafka.common.security.scram.ScramLoginModule REQUIRED // the broker\n"
        "    username=broker /* its own login */\n"
        "    password='b-secret'\n"
        ";  "
    )
    entry = parse_jaas(text)
    assert entry.login_module == SCRAM_LOGIN_MODULE
    assert entry.control_flag == "required"  # case-insensitive, as Kafka's
    assert (entry.username, entry.password) == ("broker", "b-secret")
    assert entry.plain_users() == {}


@pytest.mark.parametrize(
    ("quoted", "value"),
    [
        (r'"a\"b"', 'a"b'),
        (r'"back\\slash"', "back\\slash"),
        (r'"tab\there"', "tab\there"),
        (r'"oct\101\7"', "octA\x07"),
        (r'"semi;colon = equals"', "semi;colon = equals"),
        ("'single \"double\" inside'", 'single "double" inside'),
        (r'"\q"', "q"),  # any other escaped character is itself
        ('"pässwörd"', "pässwörd"),
        ('""', ""),
    ],
)
def test_quoted_values_and_escapes(quoted: str, value: str) -> None:
    entry = parse_jaas(f"{PLAIN_LOGIN_MODULE} required password={quoted};")
    assert entry.password == value


@pytest.mark.parametrize("value", ['a"b\\c', "new\nline", "plain", "", "x;y=z/*w*/"])
def test_format_reads_back_to_the_same_entry(value: str) -> None:
    entry = JaasEntry(SCRAM_LOGIN_MODULE, "required", {"username": "u", "password": value})
    assert parse_jaas(format_jaas(entry)) == entry


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("", "Login module not specified in JAAS config"),
        ("  // only a comment", "Login module not specified in JAAS config"),
        (PLAIN_LOGIN_MODULE, "Login module control flag not specified"),
        (f"{PLAIN_LOGIN_MODULE} mandatory;", "Invalid login module control flag 'mandatory'"),
        (f'{PLAIN_LOGIN_MODULE} required password="s3cret"', "not terminated by semi-colon"),
        (f"{PLAIN_LOGIN_MODULE} required password;", "Value not specified for key 'password'"),
        (f"{PLAIN_LOGIN_MODULE} required password=;", "Value not specified for key 'password'"),
        (f"{PLAIN_LOGIN_MODULE} required;{PLAIN_LOGIN_MODULE} required;", "contains 2 login"),
        (
            "com.sun.security.auth.module.Krb5LoginModule required;",
            "login module 'com.sun.security.auth.module.Krb5LoginModule' is not supported",
        ),
        (
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
            "kafkactor serves PLAIN",
        ),
    ],
)
def test_malformed_entries_are_refused_with_kafkas_message(text: str, needle: str) -> None:
    with pytest.raises(JaasConfigError) as raised:
        parse_jaas(text)
    assert needle in str(raised.value)
    assert "s3cret" not in str(raised.value)
