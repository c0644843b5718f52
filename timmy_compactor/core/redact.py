"""Credential redaction: secrets become stable `credential_ref:<hash>` references.

The same secret always maps to the same reference (a sha256 prefix), so a redacted log still
shows which calls used the same key. IPv4 addresses become `[REDACTED_IP]`. Keys and prefixes stay
readable: `api_key=sk-abc…` becomes `api_key=credential_ref:1f2e3d4c5b6a`.
"""

from __future__ import annotations

import hashlib
import re

_KEYED = re.compile(
    r"""(?ix)
    (?P<key>(?<![a-z0-9])(?:api[_-]?key|apikey|access[_-]?token|auth[_-]?token|token|secret|password|passwd|client[_-]?secret)
       ["']?\s*[:=]\s*["']?)
    (?P<secret>[^\s"',;}{]{6,})
    """
)
_BEARER = re.compile(r"(?i)(?P<key>\bAuthorization\s*:\s*(?:Bearer|Basic|Token)\s+)(?P<secret>[A-Za-z0-9._~+/=-]{8,})")
_PREFIXED = re.compile(
    r"\b(?:sk-(?:proj-|ant-)?[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"
    r"|xox[abpr]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{30,}|glpat-[A-Za-z0-9_-]{20,})"
)
_PREFIX_HINTS = ("sk-", "gh", "github_pat_", "xox", "AKIA", "AIza", "glpat-")
_KEY_HINTS = ("key", "token", "secret", "passw")
# Candidates are found with simple character-class patterns (fast in `re`); the conditions that
# would need lookarounds at every position are checked in Python on the few candidates.
_LONG_RUN = re.compile(r"[A-Za-z0-9_-]{32,}")
_IPV4_LIKE = re.compile(r"\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}")
_EDGE = frozenset("/.-_")

REF_PREFIX = "credential_ref:"
IP_MARKER = "[REDACTED_IP]"


def credential_ref(secret: str) -> str:
    return REF_PREFIX + hashlib.sha256(secret.encode("utf-8")).hexdigest()[:12]


def redact_text(text: str) -> str:
    """`text` with credentials replaced by stable references and IPv4 addresses masked."""
    if not text:
        return text
    low = text.lower()
    if "authorization" in low:
        text = _BEARER.sub(_keyed, text)
    if any(hint in low for hint in _KEY_HINTS):
        text = _KEYED.sub(_keyed, text)
    if any(hint in text for hint in _PREFIX_HINTS):
        text = _PREFIXED.sub(lambda m: credential_ref(m.group(0)), text)
    text = _LONG_RUN.sub(_token_like, text)
    return _IPV4_LIKE.sub(_ipv4, text)


def _standalone(match: re.Match[str]) -> bool:
    text, start, end = match.string, match.start(), match.end()
    before = text[start - 1] if start else " "
    after = text[end] if end < len(text) else " "
    return not (before.isalnum() or before in _EDGE or after.isalnum() or after in _EDGE)


def _token_like(match: re.Match[str]) -> str:
    """A long run of mixed upper, lower and digits: not a hex digest (git SHAs and sha256 sums in
    tool output are worth keeping), not part of a path or a longer word."""
    run = match.group(0)
    if (
        _standalone(match)
        and any(c.isupper() for c in run)
        and any(c.islower() for c in run)
        and any(c.isdigit() for c in run)
        and not run.startswith(REF_PREFIX)
    ):
        return credential_ref(run)
    return run


def _ipv4(match: re.Match[str]) -> str:
    text, start, end = match.string, match.start(), match.end()
    before = text[start - 1] if start else " "
    after = text[end] if end < len(text) else " "
    if before.isdigit() or before == "." or after.isdigit() or (after == "." and text[end + 1 : end + 2].isdigit()):
        return match.group(0)
    if all(int(octet) <= 255 for octet in match.group(0).split(".")):
        return IP_MARKER
    return match.group(0)


def _keyed(match: re.Match[str]) -> str:
    secret = match.group("secret")
    if match.string.startswith(REF_PREFIX, match.start("secret")):
        return match.group(0)
    return match.group("key") + credential_ref(secret)


def find_credentials(text: str) -> list[str]:
    """The references `redact_text` would put into `text`, in order, without duplicates."""
    return list(dict.fromkeys(re.findall(REF_PREFIX + r"[0-9a-f]{12}", redact_text(text))))
