"""The stand-in a secret becomes: `credential_ref:` and a sha256 prefix of the secret.

The same secret always gives the same reference, so a redacted text still shows which calls used the
same key. Pure.
"""

from __future__ import annotations

import hashlib

REF_PREFIX = "credential_ref:"


def credential_ref(secret: str) -> str:
    return REF_PREFIX + hashlib.sha256(secret.encode("utf-8")).hexdigest()[:12]


def is_ref(value: str) -> bool:
    """A reference, or what a truncation left of one (`credential_r…`): never redacted again."""
    return value.startswith(REF_PREFIX) or (len(value) >= 4 and REF_PREFIX.startswith(value))
