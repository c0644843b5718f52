"""Secrets found by their shape alone, wherever they stand (the passes after the named ones in `redact`).

- well-known token formats by prefix (detect-secrets' plugins and gitleaks' rules as reference);
- a standalone run of 32+ letters and digits mixing upper, lower and digits (not hex: git SHAs and
  digests are kept);
- a standalone base64 run of 40+ characters holding `/` or `+` with the mix of a random string.

Candidates are found with simple character-class patterns (fast in `re`); the conditions that would
need lookarounds at every position are checked in Python on the few candidates. Every match lies in a
run of `RUN_CHARS` of 15 or more, so the patterns search only those runs (`redact_shapes`). Pure.
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Callable

from timmy_compactor.core.credential_refs import REF_PREFIX, credential_ref
from timmy_compactor.core.text import char_runs, first_letter_search, run_marks, sharing_heads

# Token formats recognised by their prefix (detect-secrets' plugins and gitleaks' rules as reference),
# grouped by first letter, each alternative beginning with a literal (Discord's `[MNO]` spelled out):
# `re` jumps to the positions where one may begin and tries one branch there, not twenty.
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
    r"|rk_(?:live|test)_[A-Za-z0-9]{10,}|pk_(?:live|test)_[A-Za-z0-9]{10,}"  # Stripe restricted, publishable
    r"|whsec_[A-Za-z0-9]{20,}"  # Stripe webhook
    r"|npm_[A-Za-z0-9]{30,}|pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{20,}|hf_[A-Za-z0-9]{30,}"  # npm, PyPI, HF
    r"|S(?:G\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}"  # SendGrid
    r"|K[0-9a-fA-F]{32})"  # Twilio API key
    r"|EAAA[0-9A-Za-z_-]{60}"  # Square
    r"|do[opr]_v1_[a-f0-9]{64}"  # DigitalOcean
    r"|lin_api_[A-Za-z0-9]{40}"  # Linear
    r"|:AA[0-9A-Za-z_-]{30,}"  # Telegram bot token (`<bot id>:AA…`; the id is checked in Python)
    + "".join(  # Discord bot token
        rf"|{first}[A-Za-z0-9_-]{{23,27}}\.[A-Za-z0-9_-]{{6,7}}\.[A-Za-z0-9_-]{{27,40}}" for first in "MNO"
    )
    + r"|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"  # JWT
    r"|hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/_-]{20,}"  # Slack webhook
)
# More formats by prefix, in a second pattern: their first letters (`a`, `f`, `v`...) are common, and
# in the first they made `re` try a branch at most positions (15x slower). It runs only where one of
# `_MORE_GATES` stands (one search for their literal prefixes).
_PREFIXED_MORE = re.compile(
    r"AGE-SECRET-KEY-1[0-9A-Z]{50,}"  # age
    r"|ATBB[A-Za-z0-9_=.-]{24,}|ATATT3[A-Za-z0-9_=-]{40,}"  # Bitbucket app password, Atlassian API token
    r"|AAAA[A-Za-z0-9_-]{7}:[A-Za-z0-9_-]{100,}"  # Firebase Cloud Messaging server key
    r"|GR1348941[A-Za-z0-9_-]{20,}"  # GitLab runner registration token
    r"|NR(?:AK|II|JS|RA)-[A-Z0-9]{20,}|PMAK-[a-f0-9]{24}-[a-f0-9]{34}"  # New Relic, Postman
    r"|HRKU-[A-Za-z0-9_-]{40,}"  # Heroku
    r"|dckr_pat_[A-Za-z0-9_-]{20,}|dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9._-]{40,}"  # Docker Hub, Doppler
    r"|hv[sbr]\.[A-Za-z0-9_-]{24,}|atlasv1\.[A-Za-z0-9_=-]{40,}"  # Vault, Terraform Cloud
    r"|sntr(?:ys|yu)_[A-Za-z0-9+/=_]{40,}|gl(?:sa|c)_[A-Za-z0-9+/=_]{32,}"  # Sentry, Grafana
    r"|lsv2_(?:pt|sk)_[a-f0-9]{32}_[a-f0-9]{10}"  # LangSmith
    r"|n(?:fp_[A-Za-z0-9]{30,}|vapi-[A-Za-z0-9_-]{40,}|tn_[0-9]{11}[A-Za-z0-9]{30,})"  # Netlify, NVIDIA, Notion
    r"|sbp_[a-f0-9]{40}|fo1_[A-Za-z0-9_-]{40,}"  # Supabase, Fly.io
    r"|r8_[A-Za-z0-9]{30,}|gsk_[A-Za-z0-9]{40,}"  # Replicate, Groq
    r"|xai-[A-Za-z0-9]{60,}|pplx-[A-Za-z0-9]{40,}|api_org_[A-Za-z0-9]{30,}"  # xAI, Perplexity, HF org
    r"|secret_[A-Za-z0-9]{43}|v1\.0-[a-f0-9]{24}-[a-f0-9]{140,}"  # Notion (legacy), Cloudflare origin CA
    r"|1//0[A-Za-z0-9_-]{40,}"  # Google OAuth refresh token
    r"|pat[A-Za-z0-9]{14}\.[a-f0-9]{64}|bkua_[a-f0-9]{40}|pul-[a-f0-9]{40}"  # Airtable, Buildkite, Pulumi
    r"|shippo_(?:live|test)_[a-f0-9]{40}|sgp_[A-Za-z0-9_]{40,}|dapi[a-f0-9]{32}"  # Shippo, Sourcegraph, Databricks
    r"|rzp_(?:live|test)_[A-Za-z0-9]{14,}|sl\.[A-Za-z0-9_-]{100,}"  # Razorpay, Dropbox
    r"|sk\.eyJ[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{20,}"  # Mapbox secret token
    r"|access_token\$(?:production|sandbox)\$[a-z0-9]{16}\$[a-f0-9]{32}"  # Braintree
    r"|gl(?:ft|imt|agent|oas|wt)-[A-Za-z0-9_-]{20,}"  # GitLab feed, incoming mail, agent, OAuth, workspace
    r"|xoxe\.xox[bp]-[A-Za-z0-9-]{20,}"  # Slack refresh token
    r"|EAA[A-Z][A-Za-z0-9_-]{59,}"  # Square, Facebook access tokens
    r"|A{20,}[A-Za-z0-9%]{30,}"  # Twitter/X app bearer token
    r"|discord(?:app)?\.com/api/webhooks/[0-9]{5,}/[A-Za-z0-9_-]{40,}"  # Discord webhook
    r"|IncomingWebhook/[0-9a-f]{32}"  # Microsoft Teams webhook
    r"|sha256~[A-Za-z0-9_-]{40,}|rubygems_[a-f0-9]{48}|syt_[A-Za-z0-9_]{30,}"  # OpenShift, RubyGems, Matrix
    r"|sq[pua]_[a-f0-9]{40}|00D[A-Za-z0-9]{12,15}![A-Za-z0-9._]{60,}"  # SonarQube, Salesforce session
)
_MORE_GATES = (
    "AGE-SECRET", "ATBB", "ATATT3", "AAAA", "GR1348941", "NRAK-", "NRII-", "NRJS-", "NRRA-", "PMAK-", "HRKU-",
    "dckr_pat_", "dp.", "hvs.", "hvb.", "hvr.", "atlasv1.", "sntry", "glsa_", "glc_", "lsv2_", "nfp_", "nvapi-",
    "ntn_", "sbp_", "fo1_", "r8_", "gsk_", "xai-", "pplx-", "api_org_", "secret_", "v1.0-", "1//0", "pat",
    "bkua_", "pul-", "shippo_", "sgp_", "dapi", "rzp_", "sl.", "sk.eyJ", "access_token$", "glft-", "glimt-",
    "glagent-", "gloas-", "glwt-", "xoxe.", "EAA", "discord", "IncomingWebhook/", "sha256~", "rubygems_", "syt_",
    "sqp_", "squ_", "sqa_", "00D",
)  # fmt: skip
_MORE_HEADS = {  # gates that common words hold (`path`, `display.`), with what follows in a token
    "pat": r"pat[A-Za-z0-9]{14}\.",
    "sl.": r"sl\.[A-Za-z0-9_-]{40}",
    "dp.": r"dp\.[a-z]{2,5}\.",
    "EAA": r"EAA[A-Z][A-Za-z0-9_-]{20}",
    "AAAA": r"AAAA[A-Za-z0-9_%:-]{7}",
    "dapi": r"dapi[a-f0-9]{32}",
    "secret_": r"secret_[A-Za-z0-9]{20}",
    "discord": r"discord(?:app)?\.com/api/webhooks/",
    "00D": r"00D[A-Za-z0-9]{12,15}!",
}


_MORE_GATE = first_letter_search((gate[0], _MORE_HEADS.get(gate, re.escape(gate))[1:]) for gate in _MORE_GATES)
# What every match of the two prefixed patterns holds -- a format's literal prefix, or its gate's head above
# (Discord's token: its first part) -- looked for first, each from a rare character in paths and identifiers
# (`_RUN_RARITY`, measured on the candidate runs of the real runs), shared between words where it can be:
# the patterns' first letters (`s`, `a`, `g`, `p`...) stand at every other position of a path, and most runs
# hold no prefix, so neither pattern nor the second's gate need run there.
_RUN_RARITY = "!$%+JQWXYZq~DHK4GLz79O256801=BFRMNSP3CAIVETU-:kjfwvxbuhgmcl_.dynoi/preast"
_PREFIXED_WORDS = (
    "AKIA", "ASIA", "ABIA", "ACCA", "A3T", "AIza", "ya29.", "GOCSPX-", *(f"gh{c}_" for c in "pousr"), "github_pat_",
    *(f"gl{kind}-" for kind in ("pat", "dt", "rt", "ptt", "cbt", "soat")), *(f"xox{c}-" for c in "abposre"), "xapp-",
    "sk-", "sk_live_", "sk_test_", "sq0atp-", "sq0csp-", *(f"shp{kind}_" for kind in ("at", "ca", "pa", "ss")),
    "rk_live_", "rk_test_", "pk_live_", "pk_test_", "whsec_", "npm_", "pypi-AgEIcHlwaS5vcmc", "hf_", "SG.", "SK",
    "EAAA", "doo_v1_", "dop_v1_", "dor_v1_", "lin_api_", ":AA", "eyJ", "hooks.slack.com/",
)  # fmt: skip
_PREFIX_HINT = first_letter_search(
    dict.fromkeys(
        sharing_heads(
            [*_PREFIXED_WORDS, *(gate for gate in _MORE_GATES if gate not in _MORE_HEADS)],
            [
                *((first, r"[A-Za-z0-9_-]{23,27}\.") for first in "MNO"),
                *((gate[0], head[1:]) for gate, head in _MORE_HEADS.items()),
            ],
            _RUN_RARITY,
        )
    )
)
_LONG_RUN = re.compile(r"[A-Za-z0-9_-]{32,}")
_WORD_SEPARATORS = re.compile(r"[-_]")
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")
_HEX_KEY = re.compile(r"key-[0-9a-f]{32}|[0-9a-f]{32}-us[0-9]{1,2}")
# A standalone base64 run of 40+ characters holding `/` or `+`, which _LONG_RUN misses: an AWS secret
# access key, a line of a key body listed on its own (a summary's "refs"). Paths have this shape too;
# they are told apart by the mix a random base64 string has (upper and lower case each a fifth or
# more, digits, entropy), so the key alone redacts as it does in place.
_B64_RUN = re.compile(r"[A-Za-z0-9+/]{40,}")
_B64_EDGE = frozenset("+/=.-_")
_EDGE = frozenset("/.-_+")  # a run after `+` is part of a base64 run (`_base64_like` judges it whole)
_ESCAPES = frozenset("nrt")


# Every character a match of the patterns above can hold (tests/test_redact_reference.py parses them to
# check): a match lies inside one run of these, as long as the shortest match or longer. Most prose and
# code has few such runs, so the patterns search the runs alone, not the text between (where their first
# letters, common ones, made `re` try a branch at almost every other position).
RUN_CHARS = frozenset(string.ascii_letters + string.digits + "_.:/+=%!~$-")
LEAST_RUN = 15
_RUN_MARKS = run_marks(RUN_CHARS)
_SHORTEST = {_PREFIXED: 15, _PREFIXED_MORE: 15, _LONG_RUN: 32, _B64_RUN: 40}  # a match's least length
Runs = list[tuple[int, int]]
Replace = Callable[[re.Match[str]], str]


def candidate_runs(text: str) -> Runs:
    """(start, end) of each maximal run of `RUN_CHARS` of `LEAST_RUN` or more in `text` (`re` took as
    long to find them as the passes after)."""
    return char_runs(text, _RUN_MARKS, LEAST_RUN)


def redact_shapes(text: str) -> str:
    """Prefixed formats, then long mixed runs, then base64 runs, each pass on the text the last left."""
    runs = candidate_runs(text)
    if not runs:
        return text
    joined = "\n".join([text[start:end] for start, end in runs])  # no match crosses a `\n`: one search
    prefixed = _PREFIX_HINT.search(joined) is not None  # else neither prefixed pattern finds anything
    for (gate, pattern, replace), hinted in zip(_PASSES, _HINTED, strict=True):
        if (prefixed or not hinted) and gate.search(joined):  # finds something in the runs where `pattern` would
            changed, runs = _in_runs(pattern, replace, text, runs)
            if changed is not text:
                text, joined = changed, "\n".join([changed[start:end] for start, end in runs])
    return text


def _in_runs(pattern: re.Pattern[str], replace: Replace, text: str, runs: Runs) -> tuple[str, Runs]:
    """`pattern.sub(replace, text)`, for a pattern whose matches lie in `runs` (the `candidate_runs`
    of `text`), and the runs of the result. A match's `string` is the whole text, so `replace` looks
    before and after the match as it does in `sub`."""
    parts: list[str] = []
    done = 0
    shortest = _SHORTEST[pattern]
    for start, end in runs:
        if end - start >= shortest:
            for match in pattern.finditer(text, start, end):
                new = replace(match)
                if new != match.group(0):
                    parts += (text[done : match.start()], new)
                    done = match.end()
    if not parts:
        return text, runs
    text = "".join(parts) + text[done:]
    return text, candidate_runs(text)


def _after_escape(text: str, start: int) -> bool:
    """Whether `start` is right after a JSON escape such as `\\n` (so the letter before is no word)."""
    return start >= 2 and text[start - 2] == "\\" and text[start - 1] in _ESCAPES


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
    if token.startswith("discord"):
        head, _, secret = token.rpartition("/")
        return f"{head}/{credential_ref(secret)}"
    for kept in (
        "atlasv1.",
        "1//0",
        "sha256~",
        "IncomingWebhook/",
    ):  # the part before the random tail is the format's name
        if token.startswith(kept):
            return kept + credential_ref(token[len(kept) :])
    if token.startswith("AAAA") and not (any(c.islower() for c in token) and any(c.isdigit() for c in token)):
        return token  # a run of base64 zero bytes, not a bearer token
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
    standalone = not (before.isalnum() or before in _EDGE or after.isalnum() or after in _EDGE)
    if run[:2] in ("0x", "0X") and all(c in _HEX_DIGITS for c in run[2:]):
        return match.group(0)  # a number written in hex (a curve's order, a constant)
    if standalone and _HEX_KEY.fullmatch(run):  # Mailgun's `key-<hex>`, Mailchimp's `<hex>-us12`
        return lead + credential_ref(run)
    if (
        standalone
        and not _worded(run)
        and any(c.isupper() for c in run)
        and any(c.islower() for c in run)
        and any(c.isdigit() for c in run)
        and not run.startswith(REF_PREFIX)
    ):
        return lead + credential_ref(run)
    return match.group(0)


def _worded(run: str) -> bool:
    """Words joined by `-` or `_` (`BSD-3-Clause-No-Nuclear-License-2014`, `test_Parse_HTTP2_headers`):
    an identifier, where a random token's separators leave random parts."""
    parts: list[str] = _WORD_SEPARATORS.split(run)
    if len(parts) < 3 or not all(p.islower() or p.isupper() or p.istitle() or p.isdigit() for p in parts if p):
        return False  # a part of random mixed case (`40nkuoYuGTAcjgRk`): a token
    return sum(p.isalpha() and len(p) >= 3 for p in parts) >= 2


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


_PASSES: tuple[tuple[re.Pattern[str], re.Pattern[str], Replace], ...] = (  # (gate, pattern, replacement), in order
    (_PREFIXED, _PREFIXED, _prefixed),
    (_MORE_GATE, _PREFIXED_MORE, _prefixed),  # every match of the pattern starts with one of the gate
    (_LONG_RUN, _LONG_RUN, _token_like),
    (_B64_RUN, _B64_RUN, _base64_like),  # `_base64_like` keeps a run without `/` or `+`
)
_HINTED = tuple(pattern is _PREFIXED or pattern is _PREFIXED_MORE for _, pattern, _ in _PASSES)
