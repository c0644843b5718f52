"""Secrets known by the format of the line or call they stand in (a pass of `redact`):

- `.pgpass` lines `host:port:database:user:PASSWORD`;
- XML elements named like a secret (`<password>PASS</password>`, Maven's settings, `<apiKey>`);
- the private lines of a PuTTY key file (after `Private-Lines: N`);
- crypt(3) hashes — htpasswd's `$apr1$`, bcrypt's `$2y$`, `$1$`/`$5$`/`$6$` — salt and hash, and LDAP's
  `{SHA}`/`{SSHA}` (base64 of a SHA-1, salted or not);
- HTTP basic-auth pairs in code: `auth=('user', 'PASS')`, `HTTPBasicAuth('user', 'PASS')`,
  `BasicAuth(…)`, Twilio's `Client('AC…', 'TOKEN')`;
- PHP's `define('DB_PASSWORD', 'PASS')`, .NET's `<add key="…Password" value="PASS"/>`;
- signatures in URLs: `X-Amz-Signature=`, `X-Goog-Signature=`, `sig=` (Azure SAS), `signature=`.

The parts that name the secret stay readable. Pure.
"""

from __future__ import annotations

import re

from timmy_compactor.core.credential_refs import credential_ref, stands_in

_LINE_START = r"(?:(?<=[\n\"'` \t>(])|(?<=\\n)|^)"  # a line's start, or a quoted, indented or tagged one
_PGPASS = re.compile(
    _LINE_START + r"(?P<key>(?:[A-Za-z0-9_.*-]+|\[[0-9A-Fa-f:]+\]):(?:\d{2,5}|\*):[^\s:\\]+:[^\s:\\]+:)"
    r"(?P<secret>[^\s\\\"':`<>()]+)(?=$|[\s\"'`<)]|\\[nrt])"  # not a time or an IPv6 address: five fields, no more
)
PGPASS_GATE = re.compile(r":(?:\d{2,5}|\*):[^\s:\\]+:[^\s:\\]+:")
_XML = re.compile(
    r"(?P<key><(?P<name>[\w:.-]*(?:password|passwd|passphrase|secret|token|apikey|api_key|accesskey|secretkey))>)"
    r"(?P<secret>[^<\s][^<]*?)(?=</(?P=name)>)",
    re.IGNORECASE,
)
_PUTTY = re.compile(
    r"(?P<key>Private-Lines:[ \t]*\d+)(?P<secret>(?:(?:\r?\n|\\r\\n|\\n)[A-Za-z0-9+/=]{4,})+)", re.IGNORECASE
)
_PUTTY_BREAK = re.compile(r"\r?\n|\\r\\n|\\n")
_CRYPT = re.compile(
    r"(?P<key>\$(?:apr1|1|5|6|md5)\$(?:rounds=\d+\$)?)(?P<secret>[./A-Za-z0-9]{1,16}\$[./A-Za-z0-9]{22,86})"
    r"|(?P<bkey>\$2[abxy]?\$\d\d\$)(?P<bsecret>[./A-Za-z0-9]{53})"
    r"|(?P<skey>\{S?SHA\})(?P<ssecret>[A-Za-z0-9+/]{27,}={0,2})"
)
_CRYPT_GATES = ("$apr1$", "$1$", "$5$", "$6$", "$md5$", "$2$", "$2a$", "$2b$", "$2x$", "$2y$")
_Q = r"\\?[\"']"
_BASIC_PAIR = re.compile(
    r"(?P<key>(?:auth[ \t]*=[ \t]*[(\[]?|(?:HTTP)?(?:Basic|Digest|Proxy)Auth\(|Client\()"  # a literal first: fast
    rf"[ \t]*{_Q}[^\"'\\\n]*{_Q}[ \t]*,[ \t]*{_Q})(?P<secret>[^\"'\\\n]+)(?={_Q})"
)
# PHP's `define('DB_PASSWORD', 'PASS')` (wp-config.php), .NET's `<add key="ClearTextPassword" value="PASS"/>`.
_SECRET_NAME = r"[\w.-]*(?:password|passwd|secret|token|key|salt|pwd|connectionstring)[\w.-]*"
_QUOTED = rf"(?P<secret>[^\"'\\\n]+)(?={_Q})"
_DEFINE = re.compile(
    rf"(?i)(?P<key>(?:(?<!\w)|(?<=\\[nrt]))define\([ \t]*{_Q}{_SECRET_NAME}{_Q}[ \t]*,[ \t]*{_Q})" + _QUOTED
)
_ADD_KEY = re.compile(rf"(?i)(?P<key>(?<![\w-])key={_Q}{_SECRET_NAME}{_Q}[ \t]+value={_Q})" + _QUOTED)
_SIGNATURE = re.compile(
    r"(?i)(?P<key>(?:[?&]|(?<=, )|(?<=[ \t]))(?:x-amz-signature|x-goog-signature|signature|sig)=)"
    r"(?P<secret>[^&\s\"'\\#`<>()\[\]{},;|]+)"
)


# Every text a pass below changes holds one of these words, or a match of `PGPASS_GATE`, in its lower-cased
# form (`redact` skips them, with the other passes, where none is). Each gate holds one, but `</`: an XML
# element of an ASCII text holds its name, which ends with one of the first six (`<api_key>`, `<password>`).
GATE_WORDS = (
    "secret>", "token>", "key>", "password>", "passwd>", "passphrase>", "private-lines", *_CRYPT_GATES, "{ssha}",
    "{sha}", "auth", "client(", "define(", "key=", "sig=", "signature=",
)  # fmt: skip


def redact_formats(text: str, low: str) -> str:
    """Every format above; `low` is `text.lower()` (the gates)."""
    if ":" in text and PGPASS_GATE.search(text):
        text = _PGPASS.sub(_secret, text)
    if "</" in text:
        text = _XML.sub(_secret, text)
    if "private-lines" in low:
        text = _PUTTY.sub(_putty, text)
    if ("$" in text and any(gate in text for gate in _CRYPT_GATES)) or (
        "{s" in low and ("{ssha}" in low or "{sha}" in low)
    ):
        text = _CRYPT.sub(_crypt, text)
    if ("auth" in low and ("auth=" in low or "auth =" in low or "auth(" in low)) or "client(" in low:
        text = _BASIC_PAIR.sub(_pair, text)
    if "define(" in low:
        text = _DEFINE.sub(_secret, text)
    if "value=" in low and "key=" in low:
        text = _ADD_KEY.sub(_secret, text)
    if "sig" in low and ("sig=" in low or "signature=" in low):
        text = _SIGNATURE.sub(_signature, text)
    return text


def _secret(match: re.Match[str]) -> str:
    secret = match.group("secret")
    if stands_in(secret) or secret.startswith(("$", "<", "%(", "{")) or not secret.strip():
        return match.group(0)
    return match.group("key") + credential_ref(secret)


def _pair(match: re.Match[str]) -> str:
    before = match.string[match.start() - 1] if match.start() else " "
    if match.group(0)[0] in "aC" and (before.isalnum() or before == "_"):
        return match.group(0)  # `oauth=(…)`, `HttpClient(…)`: another name
    return _secret(match)


def _putty(match: re.Match[str]) -> str:
    body = match.group("secret")
    lead = _PUTTY_BREAK.match(body)
    lines = [line for line in _PUTTY_BREAK.split(body) if line]
    if not lines or stands_in(lines[0]):
        return match.group(0)
    return match.group("key") + (lead.group(0) if lead else "\n") + credential_ref("".join(lines))


def _crypt(match: re.Match[str]) -> str:
    for key, secret in (("key", "secret"), ("bkey", "bsecret"), ("skey", "ssecret")):
        if match.group(key) is not None:
            return match.group(key) + credential_ref(match.group(secret))
    return match.group(0)


def _signature(match: re.Match[str]) -> str:
    """A URL's signature, without the punctuation that ends a sentence (as a URL read from text ends)."""
    secret = match.group("secret").rstrip(".:!?")
    if len(secret) < 8 or stands_in(secret):
        return match.group(0)
    if match.group("key")[0] not in "?&" and (len(secret) < 32 or not any(c.isdigit() for c in secret)):
        return match.group(0)  # `signature=signature` in code: outside a query, only a long random value
    return match.group("key") + credential_ref(secret) + match.group("secret")[len(secret) :]
