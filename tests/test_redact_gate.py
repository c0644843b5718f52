"""`redact` skips the passes that find a secret by what stands before it where no word their gates look for
is in the text; in an ASCII text `pass`, `pat`, `key`, `auth` and `seed` count only where a match of a
pass they gate can stand (`path`, `tests pass`, `keyword`, `contrib/auth/`), and an XML element only by
its name: the output is the one every pass gives, gated as before (`_by_context` with the plain key hints,
the IPv4 pattern on every text), to the character."""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.credential_table import KINDS, sample
from timmy_compactor.core import redact as redact_module
from timmy_compactor.core.redact import redact_text
from timmy_compactor.core.secrets_by_command import GATE_WORDS as COMMAND_WORDS
from timmy_compactor.core.secrets_by_context import FLAG_HINTS, KEY_HINTS
from timmy_compactor.core.secrets_by_format import _CRYPT_GATES as CRYPT_GATES
from timmy_compactor.core.secrets_by_format import GATE_WORDS as FORMAT_WORDS
from timmy_compactor.core.secrets_by_format import PGPASS_GATE
from timmy_compactor.core.secrets_by_shape import redact_shapes
from timmy_compactor.core.text import first_letter_search


def every_pass(text: str, *, ips: bool = True) -> str:
    """One level of `redact_text` as it was: the context passes on every text, gated by the plain hints."""
    text = redact_module._by_context(text, text.lower(), redact_module._KEY_HINT)
    text = redact_shapes(text)
    return redact_module._IPV4_LIKE.sub(redact_module._ipv4, text) if ips else text


NEAR = [  # words that hold a gate word, or nearly
    "path", "patch", "pat", "pat=", "GITHUB_PAT: ", "passed", "bypass", "pass", "PASS: ", "Passwd ", "passphrase\t",
    "password", "passwords=", "sshpass -p ", "--password=", "-password", "storepass ", "keypass=", "KeyError",
    "monkey", "token", "tokens", "secret", "seed phrase", "seeds", "seedphrase", "seed-", "mnemonic", "auth", "author",
    "Authorization: Basic ", "tests pass ", "pass is ", "pass  = ", "keypass ", "sshpass\t", "auth_tests/", "/auth/",
    "auth(", "auth =", "BasicAuth(", "authorization", "my_auth_token: ", "auth\\\"", "authtoken ", "keyword ",
    "key point", "api-key ", "--api-key ", "-apikey ", "key: ", "x_key = ", "the key is ", "<apiKey>", "</apiKey>",
    "cookie", "Set-Cookie: ", "https://", "user:", "@", "-u ", "--user ", "curl -u me:", "mysql -p", "MariaDB",
    "docker login -u me -p ", "mongo", "redis-cli -a ", "sqlcmd -P ", "ldapsearch -w ", "zip -P ", "7z a -p",
    "%", "pass:", "sqlplus u/", "lftp -u a,", "rabbitmqctl add_user u ", "echo x | sudo -S", "htpasswd -b f u ",
    ":5432:db:u:", "</password>", "<token>", "Private-Lines: 1\n", "$apr1$", "$2y$10$", "{SSHA}", "auth=('u', '",
    "Client('AC", "define('DB_PASSWORD', '", 'key="Password" value="', "?sig=", "&signature=", "\\\"", "\\n",
    "\n", "\t", " ", "=", ":", "'", '"', "\\", "ſecret=", "İ", "K", "é", "paſſword=", "Pwd=", "psk=",
]  # fmt: skip
VALUES = ["hunter2", "s3cr3tV4lue!", "AbCdEf1234567890XyZ", "Ab1" * 12, "x", "$VAR", "credential_ref:0123456789ab"]
piece = st.one_of(
    st.sampled_from(NEAR),
    st.sampled_from([*KEY_HINTS, *FLAG_HINTS, *COMMAND_WORDS, *FORMAT_WORDS, *redact_module._CONTEXT_WORDS]),
    st.sampled_from(VALUES),
    st.builds(lambda kind, seed: sample(kind, random.Random(seed)).text, st.sampled_from(sorted(KINDS)), st.integers()),
    st.text(max_size=8),
)
texts = st.builds("".join, st.lists(piece, max_size=12))


@settings(max_examples=600)
@given(text=texts, ips=st.booleans())
@example(text="see path=/x and ſecret=abcdefgh12 İ", ips=True)  # `(?i)` reads `ſ` as `s`: plain hints there
@example(text="-passwordx --paſſword=hunter2 İ", ips=True)
@example(text="GITHUB_PAT=AbCdEf1234567890XyZ", ips=False)
@example(text="<paſſword>hunter2x</paſſword>", ips=False)
@example(text="<Password>hunter2x</Password>", ips=False)
def test_one_level_is_every_pass(text: str, ips: bool) -> None:
    assert redact_module._redact_one_level(text, ips) == every_pass(text, ips=ips)


@settings(max_examples=300)
@given(text=texts)
def test_an_ascii_text_without_a_context_word_is_left_to_the_shapes(text: str) -> None:
    low = text.lower()
    if text.isascii() and redact_module._ANY_CONTEXT.search(low) is None:
        assert redact_module._by_context(text, low, redact_module._KEY_HINT) == text


WORDS = (*KEY_HINTS, *redact_module._CONTEXT_WORDS)
SEPARATED = first_letter_search(redact_module._ascii_heads(tuple(w for w in WORDS if w in redact_module._ASCII_HEADS)))


def holds_a_context_word(low: str) -> bool:
    """What the search for every context word finds, told plainly: a word, or a word that counts only
    before a separator (`pass`, `key`...) where one follows, or a `.pgpass` line."""
    return (
        any(word in low for word in WORDS if word not in redact_module._ASCII_HEADS)
        or SEPARATED.search(low) is not None
        or PGPASS_GATE.search(low) is not None
    )


@settings(max_examples=600)
@given(text=texts)
@example(text="lftp")
@example(text="sqlplus")
@example(text="x7z")
@example(text="redis-cli")
def test_the_search_from_shared_letters_finds_what_the_search_from_the_rarest_finds(text: str) -> None:
    for low in (text.lower(), text):
        assert (redact_module._ANY_CONTEXT.search(low) is not None) == holds_a_context_word(low)


def test_every_context_word_alone_is_found() -> None:
    for word in WORDS:
        if word not in redact_module._ASCII_HEADS:  # those count only before a separator
            for text in (word, f"({word})", f"a{word}b"):
                assert redact_module._ANY_CONTEXT.search(text) is not None, text


def test_words_that_only_look_like_a_key_skip_the_context_passes() -> None:
    for text in (
        "cd path/to/patch && echo passed",
        "python -m pytest tests/auth_tests/test_validators.py django/contrib/auth/urls.py",
        "All tests pass before the seed is set",
        "pass it as a keyword argument, the key point",
    ):
        assert redact_module._ANY_CONTEXT.search(text.lower()) is None
        assert redact_text(text) == every_pass(text) == text


TRIGGERS = [  # one text per gate, each redacted by it (and by few others)
    "-----BEGIN RSA PRIVATE KEY-----\nMIIBOgIBAAJBAKj34GkxFhD90vcNLYLInFEX6Ppy1tPf\n-----END RSA PRIVATE KEY-----",
    "https://bob:hunter2x@example.com/x", "Authorization: Bearer abcdef123456", "Cookie: sid=abcdef123456",
    "password=hunter2", "GITHUB_PAT=AbCdEf1234567890XyZ", "passphrase: hunter22",
    "machine h login bob password hunter2",
    "--password hunter2x", "--storepass hunter2x", "curl -u bob:hunter2x https://h", "sshpass -p hunter2x ssh h",
    "mysql -uroot -phunter2x", "docker login -u bob -p hunter2x", "mongo -u bob -p hunter2x", "redis-cli -a hunter2x",
    "sqlcmd -S h -P hunter2x", "ldapsearch -w hunter2x", "zip -P hunter2x a.zip f", "smbclient -U bob%hunter2x",
    "openssl enc -in f -pass pass:hunter2x", "sqlplus bob/hunter2x@db", "lftp -u bob,hunter2x h",
    "rabbitmqctl add_user bob hunter2x", "7z a -phunter2x a.7z f", "echo 'hunter2x' | sudo -S ls",
    "htpasswd -b f bob hunter2x", "h:5432:db:bob:hunter2x", "<password>hunter2x</password>",
    "Private-Lines: 1\nAAAAB3NzaC1yc2EAAAADAQAB", "$apr1$abcdefgh$abcdefghijklmnopqrstuv", "auth=('bob', 'hunter2x')",
    "Client('AC123', 'hunter2x')", "define('DB_PASSWORD', 'hunter2x')", '<add key="Password" value="hunter2x"/>',
    "https://h/x?sig=abcdefgh12345678", "X-Auth-Thing: aBcDeFgHiJ1234567890kLmN", "{SSHA}abcdefghijklmnopqrstuvwxyz12",
    "mysql -phunter2x", "mariadb -phunter2x", "docker login -p hunter2x r", "mongo -p hunter2x", "rman bob/hunter2x@db",
    "expdp bob/hunter2x@db", "impdp bob/hunter2x@db", "$1$abcdefgh$abcdefghijklmnopqrstuv", "$5$abc$" + "d" * 43,
    "$6$abc$" + "d" * 86, "$md5$abcdefgh$abcdefghijklmnopqrstuv", "$2y$10$" + "a" * 53, "$2$10$" + "a" * 53,
    *(f"${kind}$10$" + "a" * 53 for kind in ("2a", "2b", "2x")), "define('DB_SALT', 'hunter2x')",
    "see ?sig=abcdefgh12345678",
    "see &signature=abcdefgh12345678", "token: abcdef123456", "secret=hunter2x", "PWD=hunter2x", "psk=hunter2x",
    "mnemonic=hunter2xy", "seed_phrase=hunter2xy", "seed phrase: hunter2xy", "<db_passwd>hunter2x</db_passwd>",
    "<passphrase>hunter2x</passphrase>", "--api-key hunter2x", "-apikey hunter2x", "-storepass hunter2x",
    "-keypass hunter2x", "X-Api-Key-Thing aB1cD2eF3gH4iJ5kL6mN7", "<apiKey>hunter2x</apiKey>",
    "private_key: hunter2xyz",
    "-----BEGIN OpenVPN Static key V1-----\n0123456789abcdef0123456789abcdef\n-----END OpenVPN Static key V1-----",
]  # fmt: skip


@pytest.mark.parametrize("text", TRIGGERS)
def test_every_gate_lets_its_secret_through(text: str) -> None:
    assert every_pass(text) != text
    assert redact_module._redact_one_level(text, True) == every_pass(text)


def test_lower_keeps_what_the_gates_on_the_text_look_for() -> None:
    """A gate on the text itself (`://`, `-u`, `$apr1$`, `PGPASS_GATE`) holds in the lower-cased text too,
    which the search for every gate's word reads: `lower()` maps each character on its own, a digit to
    itself, and no character outside `PGPASS_GATE`'s class of value characters into it."""
    value_char = re.compile(r"[^\s:\\]")
    for code in range(0x110000):
        char = chr(code)
        low = char.lower()
        if char.isdigit() or re.fullmatch(r"\d", char):
            assert low == char
        if value_char.fullmatch(char):
            assert all(value_char.fullmatch(c) for c in low), hex(code)
    assert all(word.lower() == word for word in ("://", "-u", "</", *CRYPT_GATES))  # looked for in the text
