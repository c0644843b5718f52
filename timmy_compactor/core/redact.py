"""Credential redaction: secrets become stable `credential_ref:<hash>` references.

The same secret always maps to the same reference (a sha256 prefix), so a redacted log still
shows which calls used the same key. IPv4 addresses become `[REDACTED_IP]`. Keys and prefixes stay
readable: `api_key=sk-abc…` becomes `api_key=credential_ref:1f2e3d4c5b6a`.

What is found (the formats follow the prefix rules of detect-secrets' plugins and gitleaks):

- private-key blocks (`-----BEGIN … PRIVATE KEY-----`): the whole body, also when JSON-escaped;
- passwords in URLs (`scheme://user:PASS@host`) and bare tokens as URL user (`https://TOKEN@host`);
- `Authorization:` / `Proxy-Authorization:` values (Bearer, Basic, token…), header or JSON form;
  every value of a `Cookie:` / `Set-Cookie:` line;
- values of keys that name a secret — `…password`, `…passwd`, `…passphrase`, `…pass`, `…token`,
  `…secret`, `api_key`, `secret_key`, `access_key`, `private_key`… — as `k=v`, `k: v`, `"k": "v"`,
  `k => v`, JSON-escaped `\\"k\\": \\"v\\"`, `--password v`, and `.netrc` `password v`;
- a name holding `auth`/`token`/`secret`/`key` (`X-Auth:`, `--auth-key`, docker's `"auth"`, "the api
  secret …") before a high-entropy value; `curl -u user:PASS`, `sshpass -p PASS`, `mysql -pPASS`;
- well-known token formats by prefix: AWS key ids, GitHub, GitLab, Slack (tokens and webhooks),
  OpenAI/Anthropic `sk-…`, Stripe, Google, npm, PyPI, Hugging Face, SendGrid, Twilio, Square,
  Shopify, DigitalOcean, Telegram and Discord bot tokens, JWTs;
- any other standalone run of 32+ letters and digits mixing upper, lower and digits (not hex:
  git SHAs and digests are kept), and IPv4 addresses.

Redaction is idempotent (`redact_text(redact_text(x)) == redact_text(x)`) and local: a URL or a line
is redacted the same way alone as inside a longer text, so the verification of a redacted view can
look for `redact_text(fact)`. Values are cut at a backslash, so a token right after an escaped `\\n`
in a JSON-encoded string is found, and the JSON stays valid. A JSON document inside a JSON string
(a tool result whose output is JSON: its quotes escaped twice) is read one level down (`escapes`), up to
five levels, so a secret there gets the reference it gets one level down, and the JSON stays valid at
every level. A value that already is a reference — or a prefix of one, as left by a truncation — or a
mask Hermes put in a secret's place (`***`, `sk-p...7890`, `«redacted:ghp_…»`) is never redacted (again).

Pure: no I/O, no logging; patterns are plain `re` with literal anchors, gated by substring tests.
Here: the order of the passes and their gates. The patterns and what each match becomes live by
family: `secrets_by_context` (the secret's key, header, flag or URL stands before it),
`secrets_by_shape` (the secret is known by its form alone); the reference itself in `credential_refs`.
"""

from __future__ import annotations

import re
from typing import Any

from timmy_compactor.core.credential_refs import REF_PREFIX, credential_ref
from timmy_compactor.core.escapes import has_second_level, redact_escaped
from timmy_compactor.core.secrets_by_command import GATE_WORDS as COMMAND_GATE_WORDS
from timmy_compactor.core.secrets_by_command import redact_commands
from timmy_compactor.core.secrets_by_context import (
    FLAG_HINTS,
    KEY_HINTS,
    NAMED_SEPARATOR,
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
from timmy_compactor.core.secrets_by_format import GATE_WORDS as FORMAT_GATE_WORDS
from timmy_compactor.core.secrets_by_format import PGPASS_GATE, redact_formats
from timmy_compactor.core.secrets_by_shape import redact_shapes
from timmy_compactor.core.text import any_of, first_letter_search, from_rarest, sharing_heads

IP_MARKER = "[REDACTED_IP]"
_IPV4_LIKE = re.compile(r"\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}")
_IPV4_GATE = re.compile(r"\.\d{1,3}\.\d")  # in every IPv4 address; a literal first: `re` skips to each `.`


_KEY_HINT = any_of(KEY_HINTS)  # faster than an `in` test for each
_FLAG_HINT = any_of(FLAG_HINTS)  # each holds a key hint (`-token`, `storepass`), as `sshpass` and PEM labels
# Characters by how often they stand in commands and prose, rarest first (measured on the real runs): `re`
# tries a branch of a search only where its first character stands, so a word is looked for from its
# rarest character, what comes before it checked behind (2x faster than from the first: `s`, `a`, `e`...).
_RARE_FIRST = "$7z=q|j<({}:_,vkx-/bw.fgymupdchlronisate"


def _from_rarest(word: str) -> tuple[str, str]:
    """`word` as a head of `first_letter_search`: its rarest character, and a pattern for the rest."""
    return from_rarest(word, _RARE_FIRST)


# In an ASCII text (where `(?i)` patterns match what the lower-cased text matches) a few words count only
# where a match of a pass they gate can stand: `pass` and `pat` before what follows a key's name (a
# separator of `redact_keyed`, the blank or `=` after a flag, `sshpass` or a `.netrc` password), a bare
# `pass` or `key` before a blank only when `=`, `:`, `is`... follow, `ssh`, `store`, `api` precede or (`key`)
# a value `redact_named` reads follows (`tests pass`, `path`, `patch`, `keyword` skip those passes); `seed`
# only in the key word `seed phrase`; `auth` only where a name that holds it ends before a separator or
# `(` (a header, `auth=(…)`, `BasicAuth(`; not `contrib/auth/`, `auth_tests.py`).
_BEFORE_VALUE = r"[\\\"' \t=:]"
_KEY_SEPARATOR = r"(?:[\\\"'=:]|[ \t]+(?:[=:]|is|are|was))"
_ASCII_HEADS = {
    "pass": (
        ("p", r"ass(?:(?:w(?:or)?d|phrase)" + _BEFORE_VALUE + "|" + _KEY_SEPARATOR + ")"),
        ("p", r"(?<=sshp|orep|keyp)ass[ \t]"),
    ),
    "pat": (("p", "at" + _BEFORE_VALUE),),
    "seed": (_from_rarest("phrase"),),
    "auth": (("u", r"(?<=au)th[\w-]{0,40}[\\\"' \t=:(]"),),
    "key": (
        ("k", "ey" + _KEY_SEPARATOR),
        ("k", r"(?<=apik)ey[ \t]"),
        ("k", r"(?<=api-k)ey[ \t]"),
        ("k", "ey" + NAMED_SEPARATOR + "[a-z0-9+/_.~=-]{20}"),
        _from_rarest("private key"),
        _from_rarest("static key"),
    ),
}


def _ascii_heads(words: tuple[str, ...]) -> list[tuple[str, str]]:
    return [head for word in words for head in _ASCII_HEADS.get(word) or (_from_rarest(word),)]


_ASCII_KEY_HINT = first_letter_search(_ascii_heads(KEY_HINTS))
# Every pass before the shapes is gated by one of these in the lower-cased text (`secrets_by_command` and
# `secrets_by_format` list theirs), or by a key hint: a text without any goes to the shapes at once. A gate
# on the text itself holds the same in the lower-cased text: `lower()` maps each character on its own, and
# those of the words (`://`, `-u`, `$apr1$`), digits and no other map to themselves.
_CONTEXT_WORDS = ("auth", "://", "cookie", "-u", "mysql", "mariadb", *COMMAND_GATE_WORDS, *FORMAT_GATE_WORDS)
_PGPASS_HEAD = (":", PGPASS_GATE.pattern[1:])
_WORDS = (*KEY_HINTS, *_CONTEXT_WORDS)
_ANY_CONTEXT = first_letter_search(  # of an ASCII text: the heads of the key hints, then each word from a shared letter
    dict.fromkeys(
        sharing_heads(
            [word for word in _WORDS if word not in _ASCII_HEADS],
            [*_ascii_heads(tuple(word for word in _WORDS if word in _ASCII_HEADS)), _PGPASS_HEAD],
            _RARE_FIRST,
        )
    )
)
# Of any text: the plain words, and `</` (`(?i)` reads `<paſſword>` as `<password>`).
_ANY_CONTEXT_WIDE = first_letter_search(
    dict.fromkeys([*map(_from_rarest, (*KEY_HINTS, *_CONTEXT_WORDS, "</")), _PGPASS_HEAD])
)


_DEEPER_LEVELS = 4  # a JSON document in a string in a string…: runs escaped 2 to 5 times are read


def redact_text(text: str, *, ips: bool = True) -> str:
    """`text` with credentials replaced by stable references and (unless `ips` is false) IPv4
    addresses masked."""
    return _redact(text, ips, _DEEPER_LEVELS)


def _redact(text: str, ips: bool, levels: int) -> str:
    """The runs escaped twice or more first, each decoded one level (and so on, `levels` deep), so a
    secret nested deeper gets the reference it gets one level down; then `text` as it reads."""
    if len(text) < 7:  # shorter than any IPv4 address or `key=val`: nothing to redact
        return text
    if levels and has_second_level(text):
        text = redact_escaped(text, lambda inner: _redact(inner, ips, levels - 1))
    return _redact_one_level(text, ips)


def _redact_one_level(text: str, ips: bool) -> str:
    """The passes over `text` as it reads: plain, or one level of JSON escaping."""
    low = text.lower()
    key_hint, any_context = (_ASCII_KEY_HINT, _ANY_CONTEXT) if text.isascii() else (_KEY_HINT, _ANY_CONTEXT_WIDE)
    if any_context.search(low) is not None:
        text = _by_context(text, low, key_hint)
    text = redact_shapes(text)
    return _IPV4_LIKE.sub(_ipv4, text) if ips and _IPV4_GATE.search(text) else text


def _by_context(text: str, low: str, key_hint: re.Pattern[str]) -> str:
    """The passes that find a secret by what stands before it, each where its gate holds; `low` is
    `text.lower()`, `key_hint` what marks a key word in it."""
    before = text
    keyed = key_hint.search(low) is not None
    authed = "auth" in low  # the hints are words the later ones hold: a check skipped where one is absent
    if keyed and ("private key" in low or "static key" in low):
        text = redact_pem(text)
    if "://" in text and "@" in text:
        text = redact_url_userinfo(text)
    if authed and "authorization" in low:
        text = redact_authorization(text)
    if "cookie" in low:
        text = redact_cookies(text)
    if keyed:
        if text is not before:
            low = text.lower()
        text = redact_keyed(text, low)
        if "password" in low:
            text = redact_netrc(text, text.lower() if text is not before else low)
        if _FLAG_HINT.search(low):
            text = redact_flags(text)
    if "-u" in text or "--user" in low:
        text = redact_user_option(text)
    if keyed and "sshpass" in low:
        text = redact_sshpass(text)
    if "mysql" in low or "mariadb" in low:
        text = redact_mysql_p(text)
    if text is not before:
        low = text.lower()
        keyed, authed = key_hint.search(low) is not None, "auth" in low
    text = redact_commands(text, low)
    text = redact_formats(text, low)
    if keyed or authed:
        text = redact_named(text, text.lower())
    return text


def _ipv4(match: re.Match[str]) -> str:
    text, start, end = match.string, match.start(), match.end()
    before = text[start - 1] if start else " "
    after = text[end] if end < len(text) else " "
    if before.isdigit() or before == "." or after.isdigit() or (after == "." and text[end + 1 : end + 2].isdigit()):
        return match.group(0)
    if all(int(octet) <= 255 for octet in match.group(0).split(".")):
        return IP_MARKER
    return match.group(0)


def redact_value(value: Any, *, ips: bool = True) -> Any:
    """`value` (decoded JSON) with `redact_text` on every string, keys kept; a stack, no recursion."""
    root = _container(value, ips)
    todo: list[tuple[Any, Any]] = [(value, root)] if isinstance(root, dict | list) else []
    while todo:
        source, copy = todo.pop()
        for key, item in source.items() if isinstance(source, dict) else enumerate(source):
            out = _container(item, ips)
            if isinstance(out, dict | list):
                todo.append((item, out))
            if isinstance(copy, dict):
                copy[key] = out
            else:
                copy.append(out)
    return root


MESSAGE_STRUCTURE = frozenset(("role", "tool_call_id", "id", "call_id", "type", "name", "tool_name", "tool_calls"))
"""Keys of a message that tie the conversation together: never redacted (a call's arguments are)."""
DOCUMENT_FIELDS_KEPT = frozenset(
    ("session_id", "messages", "message_count", "model", "platform", "session_start", "last_updated")
)
"""Fields of a session document that are ids and bookkeeping (the messages are redacted by the rules)."""


def redact_document_fields(document: dict[str, Any]) -> dict[str, Any]:
    """`document` with `redact_value` on every field but `DOCUMENT_FIELDS_KEPT`: the system prompt,
    `base_url`, the title, anything else a session carries."""
    return {key: value if key in DOCUMENT_FIELDS_KEPT else redact_value(value) for key, value in document.items()}


def _container(value: Any, ips: bool) -> Any:
    """A string redacted, an empty copy of a dict or list (filled by `redact_value`), anything else."""
    if isinstance(value, str):
        return redact_text(value, ips=ips)
    return {} if isinstance(value, dict) else [] if isinstance(value, list) else value


__all__ = [
    "IP_MARKER",
    "MESSAGE_STRUCTURE",
    "REF_PREFIX",
    "credential_ref",
    "redact_document_fields",
    "redact_text",
    "redact_value",
]
