"""Helpers of the credential table (tests/credential_table.py): alphabets, random text, prefixes
assembled from pieces (so no scanner-visible literal is in the repository), the sample record."""

from __future__ import annotations

import base64
import random
import string
from dataclasses import dataclass

UPPER = string.ascii_uppercase
LOWER = string.ascii_lowercase
DIGITS = string.digits
ALNUM = UPPER + LOWER + DIGITS
HEX = "0123456789abcdef"
B64 = ALNUM + "+/"
B64URL = ALNUM + "-_"


@dataclass(frozen=True)
class Sample:
    kind: str
    text: str
    secrets: tuple[str, ...]


def rand(rng: random.Random, alphabet: str, n: int) -> str:
    """Random text from `alphabet` with at least one upper, lower and digit when the alphabet has them."""
    while True:
        out = "".join(rng.choice(alphabet) for _ in range(n))
        needs = [chars for chars in (UPPER, LOWER, DIGITS) if set(chars) & set(alphabet)]
        if n < 8 or all(set(out) & set(chars) for chars in needs):
            return out


def assembled(*pieces: str) -> str:
    """A prefix assembled from pieces, so the source never holds a scanner-visible literal."""
    return "".join(pieces)


def b64url_text(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")
