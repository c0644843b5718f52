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
in a JSON-encoded string is found, and the JSON stays valid. A value that already is a reference —
or a prefix of one, as left by a truncation — is never redacted again.

Pure: no I/O, no logging; patterns are plain `re` with literal anchors, gated by substring tests.
"""

from __future__ import annotations

import hashlib
import math
import re
from typing import Any

REF_PREFIX = "credential_ref:"
IP_MARKER = "[REDACTED_IP]"

# ------------------------------------------------------------------ patterns

# Private keys: the body after the BEGIN line, up to the END line (or the end of the base64 run when
# the block was cut), real or JSON-escaped newlines included.
_PEM = re.compile(
    r"(?P<key>-----BEGIN[A-Z0-9 ]{0,40} PRIVATE KEY(?: BLOCK)?-----)"
    r"(?P<secret>(?:[A-Za-z0-9+/=_:,.\s]|\\{1,3}[nrt]|-(?!----))+)"
)
_PEM_SPACE = re.compile(r"\s+|\\{1,3}[nrt]")
_PEM_LEAD = re.compile(r"(?:\s|\\{1,3}[nrt])+")
_PEM_TAIL = re.compile(r"(?:\s|\\{1,3}[nrt])+\Z")
# Userinfo of a URL: `://user:password@` (the password may hold `@`; the last one ends it) or
# `://TOKEN@`. Anchored on the literal `://`.
_URL_USERINFO = re.compile(
    r"://(?:(?P<user>[^\s:/?#@\"'`<>\\]*):(?P<secret>[^\s/?#\"'`<>\\]+)|(?P<token>[A-Za-z0-9_.~-]{16,}))@"
)
_AUTH_HEADER = re.compile(
    r"(?i)(?P<key>authorization(?:\\?[\"'])?[ \t]*[:=][ \t]*(?:\\?[\"'])?"
    r"(?:(?:bearer|basic|token|bot|apikey|key|sso-key)[ \t]+)?)"
    r"(?P<secret>[^\s\"'`\\,;()<>\[\]{}]{6,})"
)
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # code (`request.headers…`), not a base64 credential
_AUTH_SCHEMES = frozenset(("bearer", "basic", "token", "digest", "negotiate", "apikey", "sso-key"))
_COOKIE_LINE = re.compile(
    r"(?i)(?P<key>(?:set-)?cookie(?:\\?[\"'])?[ \t]*[:=][ \t]*(?:\\?[\"'])?)(?P<pairs>[^\r\n\"'\\]+)"
)
_COOKIE_PAIR = re.compile(r"(?P<name>[^\s=;,]+)=(?P<secret>[^;\s,]+)")
_COOKIE_ATTRIBUTES = frozenset(("path", "domain", "expires", "max-age", "samesite", "secure", "httponly", "version"))

# Keys that name a secret: the key must END with one of these words (so `AWS_SECRET_ACCESS_KEY`,
# `client_secret`, `_authToken`, `X-Auth-Token` count, while `max_tokens`, `cache_key` do not). The
# pattern runs on the lower-cased text with literal words first (10x faster in `re` than a
# case-insensitive pattern with lookbehinds); what precedes `key` and `pass` is checked in Python.
_KEY_WORDS = r"(?P<word>key|token|secret|pass(?:w(?:or)?d|phrase)?)"
_KEY_VALUE = (
    r"(?P<sep>(?:\\?[\"'])?[ \t]*(?:=>|:=|[:=])[ \t]*|[ \t]+(?:is|are|was)[ \t]+(?:now[ \t]+|actually[ \t]+)?)"
    r"(?:\"(?P<dq>(?:[^\"\\\r\n]|\\[^nrt\"\\])*)\"|'(?P<sq>[^'\\\r\n]*)'|\\\"(?P<eq>[^\"\\\r\n]*)\\\""
    r"|(?P<bare>[^\s\"'`\\,;&<>(){}\[\]]+))"
)
_KEYED = re.compile(_KEY_WORDS + _KEY_VALUE)
_KEYED_ANY_CASE = re.compile("(?i)" + _KEY_WORDS + _KEY_VALUE)  # when lower() changes the length
_KEY_OWNERS = re.compile(
    r"(?:api|secret|access|private|auth|signing|master|encryption|client|account|app|license)[ _-]?\Z"
)
# Command-line flags (`--password v`, `--token=v`, `-p` is too ambiguous) and `.netrc` lines.
_FLAG = re.compile(
    r"(?i)(?P<key>(?<![\w-])--?[\w-]*(?:password|passwd|passphrase|token|secret|api-key|apikey)(?:=|[ \t]+))"
    r"(?P<secret>[^\s\"'`\\;&|<>-][^\s\"'`\\;&|<>]*)"
)
# Command passwords: `curl -u user:PASS`, `sshpass -p PASS`, `mysql -pPASS` (`-p PASS`: a prompt).
_USER_OPTION = re.compile(
    r"(?P<key>(?<![\w-])(?:-u|--user)(?:=|[ \t]+)(?:\\?[\"'])?[^\s:\"'\\]+:)(?P<secret>[^\s\"'\\]+)"
)
_SSHPASS = re.compile(
    r"(?P<key>(?:(?<!\w)|(?<=\\[nrt]))sshpass[ \t]+(?:-[a-oq-z][ \t]+\S+[ \t]+)*-p[ \t]*(?:\\?[\"'])?)"
    r"(?P<secret>[^\s\"'\\]+)"
)
_MYSQL_P = re.compile(
    r"(?P<key>(?:(?<!\w)|(?<=\\[nrt]))(?:mysql|mysqldump|mysqladmin|mariadb|mariadb-dump)\b"
    r"[^\n\\|;&]{0,200}?[ \t]-p(?:\\?[\"'])?)(?P<secret>[^\s\"'\\-][^\s\"'\\]*)"
)
# A name holding auth/token/secret/key, a separator (`:`, `=`, `=>`, quotes, or blanks), a value for
# `_high_entropy`; on the lower-cased text, from the word on, the name's tail bounded (no rescans).
_NAMED_VALUE = re.compile(
    r"(?:auth|token|secret|key)[\w-]{0,40}(?:\\?[\"'])?"
    r"(?:[ \t]*(?:=>|:=|[:=])[ \t]*|[ \t]+)(?:\\?[\"'])?"
    r"(?P<secret>[a-z0-9+/_.~=-]{20,})"
)
_NETRC = re.compile(r"password[ \t]+(?P<secret>[^\s\"'\\]+)")  # on the lower-cased text
_NETRC_ANY_CASE = re.compile("(?i)" + _NETRC.pattern)
_NETRC_LOGIN = re.compile(r"(?<![a-z0-9_])login[ \t]+[^\s\\]+[ \t]*\Z")

# Token formats recognised by their prefix (detect-secrets' plugins and gitleaks' rules as reference),
# grouped by first letter (a trie: `re` tries one branch per candidate position, not twenty).
_PREFIXED = re.compile(
    r"A(?:KIA|SIA|BIA|CCA|3T[A-Z0-9])[A-Z0-9]{16}"  # AWS access key id
    r"|AIza[0-9A-Za-z_-]{30,}|ya29\.[0-9A-Za-z_-]{20,}|GOCSPX-[0-9A-Za-z_-]{20,}"  # Google
    r"|g(?:h[pousr]_[A-Za-z0-9_]{20,}|ithub_pat_[A-Za-z0-9_]{22,}"  # GitHub
    r"|l(?:pat|dt|rt|ptt|cbt|soat)-[A-Za-z0-9_-]{20,})"  # GitLab
    r"|x(?:ox[abposre]|app)-[A-Za-z0-9-]{10,}"  # Slack tokens
    r"|s(?:k-[A-Za-z0-9_-]{20,}"  # OpenAI (sk-, sk-proj-, sk-svcacct-), Anthropic (sk-ant-)
    r"|k_(?:live|test)_[A-Za-z0-9]{10,}"  # Stripe secret key
    r"|q0(?:atp|csp)-[0-9A-Za-z_-]{22,}"  # Square
    r"|hp(?:at|ca|pa|ss)_[a-fA-F0-9]{32})"  # Shopify
    r"|[rp]k_(?:live|test)_[A-Za-z0-9]{10,}|whsec_[A-Za-z0-9]{20,}"  # Stripe restricted, publishable, webhook
    r"|npm_[A-Za-z0-9]{30,}|pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{20,}|hf_[A-Za-z0-9]{30,}"  # npm, PyPI, HF
    r"|S(?:G\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}"  # SendGrid
    r"|K[0-9a-fA-F]{32})"  # Twilio API key
    r"|EAAA[0-9A-Za-z_-]{60}"  # Square
    r"|do[opr]_v1_[a-f0-9]{64}"  # DigitalOcean
    r"|lin_api_[A-Za-z0-9]{40}"  # Linear
    r"|:AA[0-9A-Za-z_-]{30,}"  # Telegram bot token (`<bot id>:AA…`; the id is checked in Python)
    r"|[MNO][A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6,7}\.[A-Za-z0-9_-]{27,40}"  # Discord bot token
    r"|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"  # JWT
    r"|hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/_-]{20,}"  # Slack webhook
)
_KEY_HINTS = ("key", "token", "secret", "pass")  # every word of _KEY_WORDS
_FLAG_HINTS = ("-password", "-passwd", "-passphrase", "-token", "-secret", "-api-key", "-apikey")

# Candidates are found with simple character-class patterns (fast in `re`); the conditions that
# would need lookarounds at every position are checked in Python on the few candidates.
_LONG_RUN = re.compile(r"[A-Za-z0-9_-]{32,}")
# A standalone base64 run of 40+ characters holding `/` or `+`, which _LONG_RUN misses: an AWS secret
# access key, a line of a key body listed on its own (a summary's "refs"). Paths have this shape too;
# they are told apart by the mix a random base64 string has (upper and lower case each a fifth or
# more, digits, entropy), so the key alone redacts as it does in place.
_B64_RUN = re.compile(r"[A-Za-z0-9+/]{40,}")
_B64_EDGE = frozenset("+/=.-_")
_IPV4_LIKE = re.compile(r"\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}")
_EDGE = frozenset("/.-_")
_ESCAPES = frozenset("nrt")
# Values of a secret-named key that are code or placeholders, not secrets.
_NOT_SECRETS = frozenset(
    (
        "none", "null", "nil", "true", "false", "undefined", "str", "string", "bytes", "int", "bool", "any",
        "optional", "dict", "list", "object", "secretstr", "self", "cls", "env", "required", "redacted",
        "***", "xxx", "....", "...",
    )
)  # fmt: skip


def credential_ref(secret: str) -> str:
    return REF_PREFIX + hashlib.sha256(secret.encode("utf-8")).hexdigest()[:12]


def redact_text(text: str, *, ips: bool = True) -> str:
    """`text` with credentials replaced by stable references and (unless `ips` is false) IPv4
    addresses masked."""
    if len(text) < 7:  # shorter than any IPv4 address or `key=val`: nothing to redact
        return text
    low = text.lower()
    before = text
    if "private key" in low:
        text = _PEM.sub(_pem, text)
    if "://" in text and "@" in text:
        text = _URL_USERINFO.sub(_userinfo, text)
    if "authorization" in low:
        text = _AUTH_HEADER.sub(_authorization, text)
    if "cookie" in low:
        text = _COOKIE_LINE.sub(_cookies, text)
    if any(hint in low for hint in _KEY_HINTS):
        if text is not before:
            low = text.lower()
        text = _redact_keyed(text, low)
        if "password" in low:
            text = _redact_netrc(text, text.lower() if text is not before else low)
    if any(hint in low for hint in _FLAG_HINTS):
        text = _FLAG.sub(_flag, text)
    if "-u" in text or "--user" in low:
        text = _USER_OPTION.sub(_header, text)
    if "sshpass" in low:
        text = _SSHPASS.sub(_header, text)
    if "mysql" in low or "mariadb" in low:
        text = _MYSQL_P.sub(_header, text)
    if "auth" in low or any(hint in low for hint in _KEY_HINTS):
        text = _redact_named(text, text.lower())
    text = _PREFIXED.sub(_prefixed, text)
    text = _LONG_RUN.sub(_token_like, text)
    if "/" in text or "+" in text:
        text = _B64_RUN.sub(_base64_like, text)
    return _IPV4_LIKE.sub(_ipv4, text) if ips else text


# ------------------------------------------------------------------ replacements


def _is_ref(value: str) -> bool:
    """A reference, or what a truncation left of one (`credential_r…`): never redacted again."""
    return value.startswith(REF_PREFIX) or (len(value) >= 4 and REF_PREFIX.startswith(value))


def _after_escape(text: str, start: int) -> bool:
    """Whether `start` is right after a JSON escape such as `\\n` (so the letter before is no word)."""
    return start >= 2 and text[start - 2] == "\\" and text[start - 1] in _ESCAPES


def _pem(match: re.Match[str]) -> str:
    body = match.group("secret")
    core = _PEM_SPACE.sub("", body)
    if not core or _is_ref(core):
        return match.group(0)
    lead = _PEM_LEAD.match(body)
    tail = _PEM_TAIL.search(body)
    return match.group("key") + (lead.group(0) if lead else "") + credential_ref(core) + (tail.group(0) if tail else "")


def _userinfo(match: re.Match[str]) -> str:
    token = match.group("token")
    if token is not None:
        if _is_ref(token) or not (any(c.isdigit() for c in token) and any(c.isalpha() for c in token)):
            return match.group(0)
        return "://" + credential_ref(token) + "@"
    secret = match.group("secret")
    if _is_ref(secret):
        return match.group(0)
    return "://" + match.group("user") + ":" + credential_ref(secret) + "@"


def _header(match: re.Match[str]) -> str:
    secret = match.group("secret")
    if _is_ref(secret):
        return match.group(0)
    return match.group("key") + credential_ref(secret)


def _authorization(match: re.Match[str]) -> str:
    secret = match.group("secret")
    code = _IDENTIFIER.fullmatch(secret) and match.string[match.end() : match.end() + 1] in ("(", ".")
    if secret.lower() in _AUTH_SCHEMES or code:
        return match.group(0)  # `Authorization: Bearer` alone, `authorization = request.headers…`
    return _header(match)


def _flag(match: re.Match[str]) -> str:
    if "://" in match.group("secret"):
        return match.group(0)  # `--token https://u:p@host/`: the URL's password is redacted in place
    return _header(match)


def _redact_named(text: str, low: str) -> str:
    """High-entropy values after a name holding auth/token/secret/key; anything else is kept."""
    if len(low) != len(text):
        return text  # lower() changed the length (rare characters): the keyed rules still apply
    out: list[str] = []
    last = 0
    for match in _NAMED_VALUE.finditer(low):
        start, end = match.span("secret")
        secret = text[start:end].rstrip(".~-=")
        if not _is_ref(secret) and _high_entropy(secret):
            out += (text[last:start], credential_ref(secret))
            last = start + len(secret)
    return "".join([*out, text[last:]]) if out else text


def _high_entropy(value: str) -> bool:
    """A credential's randomness: 32+ hex digits; 20+ characters of upper, lower case and digits; 24+ of
    one case and digits, a fifth digits. Not words, identifiers, paths, dotted names, versions."""
    dotted = "." in value and any(len(p) >= 3 and p.isalpha() and p.islower() for p in value.split("."))
    if dotted or value.startswith(("/", "~", ".")) or "//" in value:
        return False  # a dotted name (`django.contrib.auth.backends.ModelBackend2`), a path
    digits = sum(c.isdigit() for c in value)
    if len(value) >= 32 and all(c in "0123456789abcdefABCDEF" for c in value):
        return 0 < digits < len(value)
    if len(value) < 20 or not digits:
        return False
    upper, lower = any(c.isupper() for c in value), any(c.islower() for c in value)
    return (upper and lower) or (len(value) >= 24 and digits * 5 >= len(value) and (upper or lower))


def _cookies(match: re.Match[str]) -> str:
    return match.group("key") + _COOKIE_PAIR.sub(_cookie_pair, match.group("pairs"))


def _cookie_pair(match: re.Match[str]) -> str:
    name, secret = match.group("name"), match.group("secret")
    if name.lower() in _COOKIE_ATTRIBUTES or _is_ref(secret):
        return match.group(0)
    return name + "=" + credential_ref(secret)


def _redact_keyed(text: str, low: str) -> str:
    """Values of secret-named keys; matched on `low` (same positions as `text`), values cut from `text`.
    A value that holds no secret (a URL, code) is searched again for keys (`token=https://h/?token=…`)."""
    same = len(low) == len(text)
    pattern, haystack = (_KEYED, low) if same else (_KEYED_ANY_CASE, text)
    lowered = low if same else text.lower()
    out: list[str] = []
    last = pos = 0
    while (match := pattern.search(haystack, pos)) is not None:
        span = _keyed_secret(text, lowered, match)
        if span is None:
            pos = match.end("sep")
            continue
        start, end = span
        out += (text[last:start], credential_ref(text[start:end]))
        last = pos = end
    if not out:
        return text
    out.append(text[last:])
    return "".join(out)


def _keyed_secret(text: str, low: str, match: re.Match[str]) -> tuple[int, int] | None:
    """The span of the secret of a keyed match, or None when the match holds no secret."""
    word, start = match.group("word").lower(), match.start()
    head = low[max(0, start - 16) : start]
    if word == "key" and not _KEY_OWNERS.search(head):
        return None  # `key=…`, `cache_key=…`: not a secret's name
    if word == "pass" and head[-1:].isalpha():
        return None  # `bypass=…`, `compass: …`
    password = word.startswith("pass")
    for group in ("dq", "sq", "eq", "bare"):
        if match.group(group) is not None:
            break
    value_start, value_end = match.span(group)
    secret = text[value_start:value_end]
    if _is_ref(secret) or "://" in secret or secret.lower() in _NOT_SECRETS:
        return None
    if secret.startswith(("$", "%(", "<")):
        return None  # `$VAR`, `%(name)s`, `<password>`: a reference to a secret, not one
    if group == "bare":
        if text[value_end : value_end + 1] in ("(", "[") and _looks_like_code(secret):
            return None  # `token = get_token()`, `secret = keys[0]`: code
        if secret.split("[")[0].split("|")[0].lower() in _NOT_SECRETS:
            return None  # `password: Optional[str]`, `token: str | None`
        sep = match.group("sep")
        if sep.rstrip()[-1:].isalpha() and secret.startswith(("/", "~", ".")):
            return None  # `the key is ~/.ssh/id_rsa`: where a secret lives, not the secret
        if "=" not in sep and ((secret.isalpha() and len(secret) < 16) or word == "pass"):
            return None  # `Token: expired`, `PASS: Got it`, `the secret is out`: prose, a log line
        if len(secret) < (3 if password else 8):
            return None
    elif not secret.strip() or (not password and len(secret) < 4):
        return None
    return value_start, value_end


def _redact_netrc(text: str, low: str) -> str:
    """`.netrc` passwords: `password X` at the start of a line or after `login NAME`."""
    same = len(low) == len(text)
    out: list[str] = []
    last = 0
    for match in _NETRC.finditer(low) if same else _NETRC_ANY_CASE.finditer(text):
        head = text[max(0, match.start() - 200) : match.start()].lower().rstrip(" \t")
        if not (head == "" or head.endswith(("\n", "\r", "\\n")) or _NETRC_LOGIN.search(head + " ")):
            continue
        start, end = match.span("secret")
        secret = text[start:end]
        if _is_ref(secret):
            continue
        out += (text[last:start], credential_ref(secret))
        last = end
    if not out:
        return text
    out.append(text[last:])
    return "".join(out)


def _prefixed(match: re.Match[str]) -> str:
    text, start = match.string, match.start()
    before = text[start - 1] if start else " "
    token = match.group(0)
    if token.startswith(":AA"):  # a Telegram bot token `<bot id>:AA…`: the id stays
        head = text[max(0, start - 11) : start]
        digits = len(head) - len(head.rstrip("0123456789"))
        return ":" + credential_ref(token[1:]) if 8 <= digits <= 10 else token
    if (before.isalnum() or before == "_") and not _after_escape(text, start):
        return token  # inside a longer word
    if token.startswith("hooks.slack.com/"):
        head, _, rest = token.partition("/")
        kind, _, path = rest.partition("/")
        return f"{head}/{kind}/{credential_ref(path)}"
    return credential_ref(token)


def _token_like(match: re.Match[str]) -> str:
    """A long run of mixed upper, lower and digits: not a hex digest (git SHAs and sha256 sums in
    tool output are worth keeping), not part of a path or a longer word. After a JSON escape
    (`\\nAbC…`) the escape's letter is kept and the rest judged alone."""
    run = match.group(0)
    text, start = match.string, match.start()
    lead = ""
    if run[0] in _ESCAPES and start and text[start - 1] == "\\":
        lead, run = run[0], run[1:]
        start += 1
        if len(run) < 32:
            return match.group(0)
    before = text[start - 1] if start and not lead else " "
    end = match.end()
    after = text[end] if end < len(text) else " "
    if (
        not (before.isalnum() or before in _EDGE or after.isalnum() or after in _EDGE)
        and any(c.isupper() for c in run)
        and any(c.islower() for c in run)
        and any(c.isdigit() for c in run)
        and not run.startswith(REF_PREFIX)
    ):
        return lead + credential_ref(run)
    return match.group(0)


def _base64_like(match: re.Match[str]) -> str:
    run, text, start, end = match.group(0), match.string, match.start(), match.end()
    lead = ""
    if run[0] in _ESCAPES and start and text[start - 1] == "\\":
        lead, run, start = run[0], run[1:], start + 1  # `\nAbC…`: the escape's letter is no part of it
    before = text[start - 1] if start and not lead else " "
    after = text[end] if end < len(text) else " "
    if (
        len(run) < 40
        or before.isalnum()
        or before in _B64_EDGE
        or after.isalnum()
        or after in _B64_EDGE
        or not ("/" in run or "+" in run)
        or not _random_mix(run)
    ):
        return match.group(0)
    return lead + credential_ref(run)


def _random_mix(run: str) -> bool:
    n = len(run)
    upper = sum(c.isupper() for c in run)
    lower = sum(c.islower() for c in run)
    if upper * 5 < n or lower * 5 < n or not any(c.isdigit() for c in run):
        return False
    counts: dict[str, int] = {}
    for c in run:
        counts[c] = counts.get(c, 0) + 1
    return -sum(k / n * math.log2(k / n) for k in counts.values()) >= 4.2


def _ipv4(match: re.Match[str]) -> str:
    text, start, end = match.string, match.start(), match.end()
    before = text[start - 1] if start else " "
    after = text[end] if end < len(text) else " "
    if before.isdigit() or before == "." or after.isdigit() or (after == "." and text[end + 1 : end + 2].isdigit()):
        return match.group(0)
    if all(int(octet) <= 255 for octet in match.group(0).split(".")):
        return IP_MARKER
    return match.group(0)


def _looks_like_code(value: str) -> bool:
    """A name called or indexed (`get_token(`, `keys[`), not a random secret that a `(` happens to follow."""
    if "_" in value or "." in value:
        return True
    return value.isalpha() and value.islower() and len(value) <= 20


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


def _container(value: Any, ips: bool) -> Any:
    """A string redacted, an empty copy of a dict or list (filled by `redact_value`), anything else."""
    if isinstance(value, str):
        return redact_text(value, ips=ips)
    return {} if isinstance(value, dict) else [] if isinstance(value, list) else value
