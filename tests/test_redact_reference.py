"""`redact_text` runs the shape passes only on the runs that can hold a match, and skips a gate where a
shorter word it holds is absent: its output is the plain order of passes over the whole text, every gate
tested (`reference` below, `redact_text` as it was before, the same patterns), on any text without a second
level of JSON escaping; a text with one is read one level down first (`reference_nested`), then so."""

from __future__ import annotations

import json
import random
import re
import re._constants as sre
import re._parser as sre_parse
from re import Pattern

from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.credential_table import KINDS, sample
from timmy_compactor.core import redact as redact_module
from timmy_compactor.core import secrets_by_command as command
from timmy_compactor.core import secrets_by_format as formats
from timmy_compactor.core import secrets_by_shape as shape
from timmy_compactor.core.escapes import has_second_level, redact_escaped
from timmy_compactor.core.redact import redact_text
from timmy_compactor.core.secrets_by_context import (
    FLAG_HINTS,
    KEY_HINTS,
    redact_authorization,
    redact_cookies,
    redact_flags,
    redact_keyed,
    redact_mysql_p,
    redact_named,
    redact_netrc,
    redact_pem,
    redact_sshpass,
    redact_url_userinfo,
    redact_user_option,
)


def reference(text: str, *, ips: bool = True) -> str:
    """`redact_text` as it was before the passes were gated by runs: every pass on the whole text."""
    if len(text) < 7:
        return text
    low = text.lower()
    before = text
    if "private key" in low or "static key" in low:
        text = redact_pem(text)
    if "://" in text and "@" in text:
        text = redact_url_userinfo(text)
    if "authorization" in low:
        text = redact_authorization(text)
    if "cookie" in low:
        text = redact_cookies(text)
    if any(hint in low for hint in KEY_HINTS):
        if text is not before:
            low = text.lower()
        text = redact_keyed(text, low)
        if "password" in low:
            text = redact_netrc(text, text.lower() if text is not before else low)
    if any(hint in low for hint in FLAG_HINTS):
        text = redact_flags(text)
    if "-u" in text or "--user" in low:
        text = redact_user_option(text)
    if "sshpass" in low:
        text = redact_sshpass(text)
    if "mysql" in low or "mariadb" in low:
        text = redact_mysql_p(text)
    if text is not before:
        low = text.lower()
    text = reference_commands(text, low)
    text = reference_formats(text, low)
    if "auth" in low or any(hint in low for hint in KEY_HINTS):
        text = redact_named(text, text.lower())
    text = shape._PREFIXED.sub(shape._prefixed, text)
    if shape._MORE_GATE.search(text):
        text = shape._PREFIXED_MORE.sub(shape._prefixed, text)
    text = shape._LONG_RUN.sub(shape._token_like, text)
    if "/" in text or "+" in text:
        text = shape._B64_RUN.sub(shape._base64_like, text)
    return redact_module._IPV4_LIKE.sub(redact_module._ipv4, text) if ips else text


def reference_nested(text: str, *, ips: bool = True, levels: int = 4) -> str:
    """`reference` after the runs escaped twice or more are read one level down (tests/test_redact_nested.py)."""
    if len(text) >= 7 and levels and has_second_level(text):
        text = redact_escaped(text, lambda inner: reference_nested(inner, ips=ips, levels=levels - 1))
    return reference(text, ips=ips)


def reference_commands(text: str, low: str) -> str:
    for word, option, pattern in command._COMMANDS:
        if word in low and option in text:
            text = pattern.sub(command._value, text)
    if "%" in text and "-u" in low:
        text = command._SMB_USER.sub(command._value, text)
    if "pass:" in low:
        text = command._OPENSSL_PASS.sub(command._value, text)
    if "sqlplus" in low or "rman" in low or "expdp" in low or "impdp" in low:
        text = command._USER_SLASH.sub(command._value, text)
    if "lftp" in low:
        text = command._LFTP.sub(command._value, text)
    if "rabbitmqctl" in low:
        text = command._RABBIT.sub(command._value, text)
    if "7z" in low and " -p" in text:
        text = command._SEVEN_ZIP.sub(command._value, text)
    if "|" in text and ("sudo" in low or "passwd" in low) and ("echo" in low or "printf" in low):
        text = command._PIPED.sub(command._piped, text)
    if "htpasswd" in low:
        text = command._HTPASSWD_B.sub(command._value, text)
    return text


def reference_formats(text: str, low: str) -> str:
    if ":" in text and formats.PGPASS_GATE.search(text):
        text = formats._PGPASS.sub(formats._secret, text)
    if "</" in text:
        text = formats._XML.sub(formats._secret, text)
    if "private-lines" in low:
        text = formats._PUTTY.sub(formats._putty, text)
    if ("$" in text and any(gate in text for gate in formats._CRYPT_GATES)) or "{ssha}" in low or "{sha}" in low:
        text = formats._CRYPT.sub(formats._crypt, text)
    if "auth=" in low or "auth =" in low or "auth(" in low or "client(" in low:
        text = formats._BASIC_PAIR.sub(formats._pair, text)
    if "define(" in low:
        text = formats._DEFINE.sub(formats._secret, text)
    if "value=" in low and "key=" in low:
        text = formats._ADD_KEY.sub(formats._secret, text)
    if "sig=" in low or "signature=" in low:
        text = formats._SIGNATURE.sub(formats._signature, text)
    return text


def consumed(pattern: str) -> set[str]:
    """Every character a match of `pattern` can hold; fails on what has no bounded set (`.`, `\\w`,
    a negated class, an anchor or a lookaround, whose truth depends on text outside the match)."""
    chars: set[str] = set()
    todo = [sre_parse.parse(pattern)]
    while todo:
        for op, value in todo.pop():
            if op is sre.LITERAL:
                chars.add(chr(value))
            elif op is sre.IN:
                for kind, item in value:
                    assert kind in (sre.LITERAL, sre.RANGE), f"{kind} in {pattern[:60]}"
                    chars.update(chr(item) if kind is sre.LITERAL else map(chr, range(item[0], item[1] + 1)))
            elif op in (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT):
                todo.append(value[2])
            elif op is sre.SUBPATTERN:
                todo.append(value[3])
            elif op is sre.BRANCH:
                todo.extend(value[1])
            else:
                raise AssertionError(f"{op} in {pattern[:60]}")
    return chars


def test_every_shape_match_lies_in_one_candidate_run() -> None:
    assert [pattern for _, pattern, _ in shape._PASSES] == list(shape._SHORTEST)
    for gate, pattern, _ in shape._PASSES:
        shortest = shape._SHORTEST[pattern]
        assert consumed(pattern.pattern) <= shape.RUN_CHARS, pattern.pattern[:60]
        assert shape.LEAST_RUN <= shortest <= sre_parse.parse(pattern.pattern).getwidth()[0], pattern.pattern[:60]
        assert consumed(gate.pattern) <= shape.RUN_CHARS  # so a gate's match never holds the `\n` between runs


RUN = re.compile(f"[{re.escape(''.join(sorted(shape.RUN_CHARS)))}]{{{shape.LEAST_RUN},}}")


@given(st.text(st.one_of(st.sampled_from(sorted(shape.RUN_CHARS)), st.characters()), max_size=120))
@example("\ud800" + "a" * 15 + "😀 é" + "b/c" * 5 + "?" + "d" * 14)
def test_candidate_runs_are_the_runs_re_finds(text: str) -> None:
    assert shape.candidate_runs(text) == [match.span() for match in RUN.finditer(text)]


def test_the_words_gated_by_a_key_hint_hold_one() -> None:  # so they are looked for only after one
    assert all(any(key in word for key in KEY_HINTS) for word in (*FLAG_HINTS, "sshpass", "private key", "static key"))


GATED = [(gate, pattern) for gate, pattern, _ in shape._PASSES if gate is not pattern]


@given(st.sampled_from(GATED).flatmap(lambda pair: st.tuples(st.just(pair), st.from_regex(pair[1], fullmatch=True))))
def test_a_match_of_a_gated_pass_starts_with_a_match_of_its_gate(
    drawn: tuple[tuple[Pattern[str], Pattern[str]], str],
) -> None:
    (gate, pattern), token = drawn
    match = pattern.match(token)
    assert match is not None
    assert gate.match(token, 0, match.end())


WORDS = [
    "the", "path", "display.", "patch", "secret_", "dapi", "AAAA", "EAA", "00D", "sl.", "dp.", "discord",
    "password", "token", "key=", "api_key:", "Authorization: Bearer", "-u", "--user", "mysql -p", "://",
    "@", "1.2.3.4", "10.0.0.255", "999.1.1.1", "١٢.٣.٤.٥", "0x1F", "\\n", "\\", "\n", "\t", '"', "'", "$",
    "!", "~", "%", "=", "+", "/", ":", "-", "_", ".", "é", "ßpasswort", "x" * 40, "Ab1" * 12, "a/B+" * 11,
    "PRIVATE KEY", "private-lines: 2", "sshpass -p", "docker login -u me -p", " -p", "zip -P", "7z a -p",
    "auth=('u', 'p')", "auth (", "Client(", "{SSHA}", "{sha}", "$apr1$", "sig=", "&signature=", "Sig", "Key",
]  # fmt: skip
SHAPES = [shape._PREFIXED, shape._PREFIXED_MORE, shape._LONG_RUN, shape._B64_RUN, redact_module._IPV4_LIKE]
piece = st.one_of(
    st.sampled_from(WORDS),
    st.sampled_from(SHAPES).flatmap(lambda pattern: st.from_regex(pattern, fullmatch=True)),
    st.builds(lambda kind, seed: sample(kind, random.Random(seed)).text, st.sampled_from(sorted(KINDS)), st.integers()),
    st.text(max_size=12),
)
texts = st.builds("".join, st.lists(st.one_of(piece, st.sampled_from(["", " ", "", "\n", "=", ":"])), max_size=14))


@settings(max_examples=400)
@given(text=texts, ips=st.booleans(), encoded=st.booleans())
@example(text="bot 123456789:AA" + "b1C2" * 9, ips=True, encoded=False)
@example(text="x\\nghp_" + "aB3" * 12, ips=True, encoded=True)
@example(text="slack xoxb-12345abcde, the shortest match", ips=False, encoded=False)
@example(text="see 00D" + "a1" * 7 + "!" + "Ab9." * 16 + " and 192.168.0.1.", ips=True, encoded=False)
@example(text="https://discord.com/api/webhooks/123456/" + "aB1_" * 11, ips=False, encoded=True)
@example(text="\\n\x1fAKIA0000000000000000", ips=False, encoded=True)  # a key after `\u001f`, seen one level down
def test_redact_text_is_the_plain_order_of_passes(text: str, ips: bool, encoded: bool) -> None:
    text = json.dumps(text) if encoded else text
    if not has_second_level(text):  # as before, to the character
        assert redact_text(text, ips=ips) == reference(text, ips=ips)
    else:
        assert redact_text(text, ips=ips) == reference_nested(text, ips=ips)
