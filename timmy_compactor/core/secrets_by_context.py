"""Secrets found by what stands before them: a private key's BEGIN line, a URL's userinfo, a header, a
key or flag that names a secret, a command's password option (the first passes of `redact`).

Keys and prefixes stay readable, only the value becomes a reference. A value that is code, a
placeholder or a reference to a secret (`$VAR`, `<password>`) is kept. Patterns are plain `re` with
literal anchors; `redact` runs each only when its anchor's words are in the text. Pure.
"""

from __future__ import annotations

import re
from itertools import pairwise

from timmy_compactor.core.credential_refs import credential_ref, stands_in

# Private keys: the body after the BEGIN line, up to the END line (or the end of the base64 run when
# the block was cut), real or JSON-escaped newlines included.
_PEM = re.compile(
    r"(?P<key>-----BEGIN(?:[A-Z0-9 ]{0,40} PRIVATE KEY(?: BLOCK)?| OpenVPN Static key V1)-----)"
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
    r"(?:(?:bearer|basic|token|bot|apikey|key|sso-key|ssws|otp|klaviyo-api-key)[ \t]+)?)"
    r"(?P<secret>[^\s\"'`\\,;()<>\[\]{}]{6,})"
)
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # code (`request.headers…`), not a base64 credential
_AUTH_SCHEMES = frozenset(("bearer", "basic", "token", "digest", "negotiate", "apikey", "sso-key", "ssws"))
_COOKIE_LINE = re.compile(
    r"(?i)(?P<key>(?:set-)?cookie(?:\\?[\"'])?[ \t]*[:=][ \t]*(?:\\?[\"'])?)(?P<pairs>[^\r\n\"'\\]+)"
)
_COOKIE_PAIR = re.compile(r"(?P<name>[^\s=;,]+)=(?P<secret>[^;\s,]+)")
_COOKIE_ATTRIBUTES = frozenset(("path", "domain", "expires", "max-age", "samesite", "secure", "httponly", "version"))

# Keys that name a secret: the key must END with one of these words (so `AWS_SECRET_ACCESS_KEY`,
# `client_secret`, `_authToken`, `X-Auth-Token` count, while `max_tokens`, `cache_key` do not). The
# pattern runs on the lower-cased text with literal words first (10x faster in `re` than a
# case-insensitive pattern with lookbehinds); what precedes `key` and `pass` is checked in Python.
_KEY_WORDS = r"(?P<word>key|token|secret|pass(?:w(?:or)?d|phrase)?|pwd|psk|pat|mnemonic|seed[ _-]?phrase)"
_KEY_VALUE = (
    r"(?P<sep>(?:\\?[\"'])?[ \t]*(?:=>|:=|[:=])[ \t]*|[ \t]+(?:is|are|was)[ \t]+(?:now[ \t]+|actually[ \t]+)?)"
    r"(?:\"(?P<dq>(?:[^\"\\\r\n]|\\[^nrt\"\\])*)\"|'(?P<sq>[^'\\\r\n]*)'|\\\"(?P<eq>[^\"\\\r\n]*)\\\""
    r"|(?P<bare>[^\s\"'`\\,;&<>(){}\[\]]+))"
)
_KEYED = re.compile(_KEY_WORDS + _KEY_VALUE)
_KEYED_ANY_CASE = re.compile("(?i)" + _KEY_WORDS + _KEY_VALUE)  # when lower() changes the length
_KEY_OWNERS = re.compile(
    r"(?:api|secret|access|private|auth|signing|master|encryption|client|account|app|license|preshared|sas|shared)"
    r"[ _-]?\Z"
)
# Command-line flags (`--password v`, `--token=v`, `-p` is too ambiguous) and `.netrc` lines.
_FLAG = re.compile(
    r"(?i)(?P<key>(?<![\w-])--?(?:[\w-]*(?:password|passwd|passphrase|token|secret|api-key|apikey)"
    r"|(?:src|dest)?(?:store|key)pass)(?:=|[ \t]+))"
    r"(?P<secret>[^\s\"'`\\;&|<>-][^\s\"'`\\;&|<>]*)"
)
# Command passwords: `curl -u user:PASS`, `sshpass -p PASS`, `mysql -pPASS` (`-p PASS`: a prompt).
# A URL given as the user (`az login -u http://app`) is no user:password pair.
_USER_OPTION = re.compile(
    r"(?P<key>(?<![\w-])(?:-u|--user)(?:=|[ \t]+)(?:\\?[\"'])?[^\s:,\"'\\]+:)(?!//)(?P<secret>[^\s\"'\\]+)"
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
NAMED_SEPARATOR = r"[\w-]{0,40}(?:\\?[\"'])?(?:[ \t]*(?:=>|:=|[:=])[ \t]*|[ \t]+)(?:\\?[\"'])?"  # the name's tail too
_NAMED_VALUE = re.compile(r"(?:auth|token|secret|key)" + NAMED_SEPARATOR + r"(?P<secret>[a-z0-9+/_.~=-]{20,})")
_NETRC = re.compile(r"password[ \t]+(?P<secret>[^\s\"'\\=:][^\s\"'\\]*)")  # on the lower-cased text
_NETRC_ANY_CASE = re.compile("(?i)" + _NETRC.pattern)
_NETRC_LOGIN = re.compile(r"(?<![a-z0-9_])login[ \t]+[^\s\\]+[ \t]*\Z")
KEY_HINTS = ("key", "token", "secret", "pass", "pwd", "psk", "pat", "mnemonic", "seed")  # every word of _KEY_WORDS
FLAG_HINTS = ("-password", "-passwd", "-passphrase", "-token", "-secret", "-api-key", "-apikey", "storepass", "keypass")
# A lower-case name with `_` or `.` and no digit that names a secret (`runtime_api_key`,
# `self.password`): code passing a secret on, not a secret.
_SECRET_VARIABLE = re.compile(r"[a-z_]+(?:[._][a-z_]+)+")
_VARIABLE_HINTS = ("key", "token", "secret", "pass", "pwd", "psk", "pat", "auth", "cred")
_CAMEL = re.compile(r"[A-Z]{0,4}[a-z]*(?:[A-Z][a-z]+)+")  # `MultiDomainBasicAuth`, `SSHCertPublicKeyTypes`
_TYPE_NAME = re.compile(r"(?:[a-z_][a-z0-9_]*\.)*[A-Z][A-Za-z]*[a-z][A-Z][A-Za-z]*")  # `ec.EllipticCurvePrivateKey`
_WORD_SPLIT = re.compile(r"[-_ .]")
_FIXTURE_MARKS = frozenset(("test", "testing", "dummy", "fake", "example", "sample", "placeholder", "insecure"))
_FIXTURE_WORDS = _FIXTURE_MARKS | frozenset(
    ("secret", "key", "token", "password", "pass", "api", "not", "a", "real", "your", "here", "my", "only", "for")
)
# Values of a secret-named key that are code or placeholders, not secrets.
_NOT_SECRETS = frozenset(
    (
        "none", "null", "nil", "true", "false", "undefined", "str", "string", "bytes", "int", "bool", "any",
        "optional", "dict", "list", "object", "secretstr", "self", "cls", "env", "required", "redacted",
        "***", "xxx", "....", "...",
    )
)  # fmt: skip


def redact_pem(text: str) -> str:
    return _PEM.sub(_pem, text)


def _pem(match: re.Match[str]) -> str:
    body = match.group("secret")
    core = _PEM_SPACE.sub("", body)
    if not core or stands_in(core):
        return match.group(0)
    lead = _PEM_LEAD.match(body)
    tail = _PEM_TAIL.search(body)
    return match.group("key") + (lead.group(0) if lead else "") + credential_ref(core) + (tail.group(0) if tail else "")


def redact_url_userinfo(text: str) -> str:
    return _URL_USERINFO.sub(_userinfo, text)


def _userinfo(match: re.Match[str]) -> str:
    token = match.group("token")
    if token is not None:
        if stands_in(token) or not (any(c.isdigit() for c in token) and any(c.isalpha() for c in token)):
            return match.group(0)
        return "://" + credential_ref(token) + "@"
    secret = match.group("secret")
    if stands_in(secret) or stands_in(match.group("user") + ":" + secret):
        return match.group(0)  # a password already redacted, or a token redacted as the URL's user
    return "://" + match.group("user") + ":" + credential_ref(secret) + "@"


def redact_authorization(text: str) -> str:
    return _AUTH_HEADER.sub(_authorization, text)


def _authorization(match: re.Match[str]) -> str:
    secret = match.group("secret")
    code = _IDENTIFIER.fullmatch(secret) and match.string[match.end() : match.end() + 1] in ("(", ".")
    if secret.lower() in _AUTH_SCHEMES or code:
        return match.group(0)  # `Authorization: Bearer` alone, `authorization = request.headers…`
    return _header(match)


def _header(match: re.Match[str]) -> str:
    secret = match.group("secret")
    if stands_in(secret):
        return match.group(0)
    return match.group("key") + credential_ref(secret)


def redact_cookies(text: str) -> str:
    return _COOKIE_LINE.sub(_cookies, text)


def _cookies(match: re.Match[str]) -> str:
    return match.group("key") + _COOKIE_PAIR.sub(_cookie_pair, match.group("pairs"))


def _cookie_pair(match: re.Match[str]) -> str:
    name, secret = match.group("name"), match.group("secret")
    if name.lower() in _COOKIE_ATTRIBUTES or stands_in(secret):
        return match.group(0)
    return name + "=" + credential_ref(secret)


def redact_keyed(text: str, low: str) -> str:
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
    if word == "psk" and head[-1:] not in ("_", "-", "", "\n", " ", "\t"):
        return None  # `psk="…"`, `wpa_psk=…`
    if word == "pat" and (head[-1:] not in ("_", "-") or match.group("sep") not in ("=", ":", ": ")):
        return None  # `GITHUB_PAT=…` (env style); not `_HEX_PAT = "…"` (a regex), `pat = re.compile(…)`
    if word == "pwd" and (head[-1:].isalpha() or "=" not in match.group("sep")):
        return None  # `OLDPWD=…`, `pwd: not found`: only ODBC's `PWD=…` names a password
    password = word.startswith("pass")
    for group in ("dq", "sq", "eq", "bare"):
        if match.group(group) is not None:
            break
    value_start, value_end = match.span(group)
    secret = text[value_start:value_end]
    if stands_in(secret) or "://" in secret or secret.lower() in _NOT_SECRETS or _placeholder(secret):
        return None
    if secret.startswith(("$", "%(", "<")) or (word == "pwd" and secret.startswith(("/", "~", "."))):
        return None  # `$VAR`, `%(name)s`, `<password>`: a reference to a secret, not one
    if group == "bare":
        if text[value_end : value_end + 1] in ("(", "[") and _looks_like_code(secret):
            return None  # `token = get_token()`, `secret = keys[0]`: code
        if _SECRET_VARIABLE.fullmatch(secret) and any(hint in secret for hint in _VARIABLE_HINTS):
            return None  # `api_key=runtime_api_key`, `password = self.password`: a variable holding it
        if secret == word and (" = " in match.group("sep") or text[value_end : value_end + 1] in (",", ")")):
            return None  # `self.password = password`, `f(password=password)`: code passing the variable on
        if secret.split("[")[0].split("|")[0].rstrip(":,").lower() in _NOT_SECRETS:
            return None  # `password: Optional[str]`, `token: str | None`, `if password is None:`
        if ":" in match.group("sep") and _TYPE_NAME.fullmatch(secret.rstrip(",)")):
            return None  # `private_key: SSHPrivateKeyTypes`: a type annotation
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


def _placeholder(value: str) -> bool:
    """A test fixture's or an example's value made of such words only (`test-secret-key`, `dummy`,
    `your_api_key_here`), not a weak password (`changeme`, `password` are still redacted)."""
    words = _WORD_SPLIT.split(value.lower())
    return bool(_FIXTURE_MARKS.intersection(words)) and all(w in _FIXTURE_WORDS for w in words)


def _looks_like_code(value: str) -> bool:
    """A name called or indexed (`get_token(`, `keys[`), not a random secret that a `(` happens to follow."""
    if "_" in value or "." in value:
        return True
    return value.isalpha() and value.islower() and len(value) <= 20


def redact_netrc(text: str, low: str) -> str:
    """`.netrc` passwords: `password X` at the start of a line or after `login NAME`."""
    same = len(low) == len(text)
    out: list[str] = []
    last = 0
    for match in _NETRC.finditer(low) if same else _NETRC_ANY_CASE.finditer(text):
        head = text[max(0, match.start() - 200) : match.start()].lower().rstrip(" \t").rstrip("+>").rstrip(" \t")
        if not (head == "" or head.endswith(("\n", "\r", "\\n")) or _NETRC_LOGIN.search(head + " ")):
            continue
        start, end = match.span("secret")
        secret = text[start:end]
        if stands_in(secret):
            continue
        out += (text[last:start], credential_ref(secret))
        last = end
    if not out:
        return text
    out.append(text[last:])
    return "".join(out)


def redact_flags(text: str) -> str:
    return _FLAG.sub(_flag, text)


def _flag(match: re.Match[str]) -> str:
    if "://" in match.group("secret"):
        return match.group(0)  # `--token https://u:p@host/`: the URL's password is redacted in place
    return _header(match)


def redact_user_option(text: str) -> str:
    return _USER_OPTION.sub(_header, text)


def redact_sshpass(text: str) -> str:
    return _SSHPASS.sub(_header, text)


def redact_mysql_p(text: str) -> str:
    return _MYSQL_P.sub(_header, text)


def redact_named(text: str, low: str) -> str:
    """High-entropy values after a name holding auth/token/secret/key; anything else is kept."""
    if len(low) != len(text):
        return text  # lower() changed the length (rare characters): the keyed rules still apply
    out: list[str] = []
    last = 0
    for match in _NAMED_VALUE.finditer(low):
        start, end = match.span("secret")
        secret = text[start:end].rstrip(".~-=")
        if not stands_in(secret) and _high_entropy(secret):
            out += (text[last:start], credential_ref(secret))
            last = start + len(secret)
    return "".join([*out, text[last:]]) if out else text


def _high_entropy(value: str) -> bool:
    """A credential's randomness: 32+ hex digits; 20+ characters of upper, lower case and digits; 24+ of
    one case and digits, a fifth digits; 20+ letters whose case flips at every third character or more
    (not CamelCase). Not words, identifiers, paths, dotted names, versions."""
    dotted = "." in value and any(len(p) >= 3 and p.isalpha() and p.islower() for p in value.split("."))
    if dotted or value.startswith(("/", "~", ".")) or "//" in value:
        return False  # a dotted name (`django.contrib.auth.backends.ModelBackend2`), a path
    digits = sum(c.isdigit() for c in value)
    if len(value) >= 32 and all(c in "0123456789abcdefABCDEF" for c in value):
        return 0 < digits < len(value)
    if len(value) >= 20 and not digits:  # base64 of `user:pass` may hold no digit: its case flips often
        flips = sum(a.isupper() != b.isupper() for a, b in pairwise(value) if a.isalpha() and b.isalpha())
        return flips * 3 >= len(value) and not _CAMEL.fullmatch(value) and "_" not in value and "-" not in value
    if len(value) < 20 or not digits:
        return False
    upper, lower = any(c.isupper() for c in value), any(c.islower() for c in value)
    return (upper and lower) or (len(value) >= 24 and digits * 5 >= len(value) and (upper or lower))
