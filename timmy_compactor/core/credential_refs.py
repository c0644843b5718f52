"""The stand-in a secret becomes: `credential_ref:` and a sha256 prefix of the secret.

The same secret always gives the same reference, so a redacted text still shows which calls used the
same key. A value that already stands in for a secret -- one of our references, or a mask Hermes put in
its place -- is no secret: it is never redacted (again) nor counted. Pure.
"""

from __future__ import annotations

import hashlib
import re

REF_PREFIX = "credential_ref:"

# Hermes' masks (agent/redact.py): `***` (a short value, a URL password, `123456789:***` for a bot
# token), `mask_secret`'s head...tail (`sk-p...7890`, `sk_liv...3a2Z`: at most 6 and 4 characters
# of the secret, the rest gone), the non-reusable `«redacted:ghp_…»` / `«redacted-secret»`, and
# `[REDACTED]`-style markers; a masked phone number keeps 2-4 digits around `****`.
_MASK = re.compile(
    r"(?:[\w.+-]{0,20}:)?[\w+-]{0,4}\*{3,}[\w-]{0,4}"
    r"|[\w+/=-]{1,8}(?:\.\.\.|…)[\w+/=-]{1,8}"
    r"|«redacted[^»]{0,40}»"
    r"|\[REDACTED[\w -]{0,40}\]"
)


def credential_ref(secret: str) -> str:
    return REF_PREFIX + hashlib.sha256(secret.encode("utf-8")).hexdigest()[:12]


def is_ref(value: str) -> bool:
    """A reference, or what a truncation left of one (`credential_r…`): never redacted again."""
    return value.startswith(REF_PREFIX) or (len(value) >= 4 and REF_PREFIX.startswith(value))


def is_masked(value: str) -> bool:
    """A value Hermes masked in place of a secret (`***`, `sk-p...7890`, `«redacted:ghp_…»`)."""
    return _MASK.fullmatch(value) is not None


def stands_in(value: str) -> bool:
    """A reference of ours or a mask of Hermes': no secret, never redacted nor counted as one."""
    return is_ref(value) or is_masked(value)
