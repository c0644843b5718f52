"""Issue 29, item 6: recall's own traffic is no fact of the session, Hermes' masks are no credentials,
and a folded failing command keeps its exit code where the model can see and search it."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from tests.support import assistant, call, tool, user
from timmy_compactor.core.recall import lookup, search
from timmy_compactor.core.redact import REF_PREFIX, redact_text

ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

# ---------------------------------------------------------------- (b) Hermes' masks are no credentials


def hermes_mask(secret: str, head: int = 6, tail: int = 4, floor: int = 18) -> str:
    """What hermes-agent 0.19 shows instead of a secret (`agent/redact.py`: `_mask_token` is 6/4/18,
    `mask_secret` 4/4/12): `***` when short, else its first and last characters around `...`."""
    return "***" if len(secret) < floor else f"{secret[:head]}...{secret[-tail:]}"


CONTEXTS = [
    "OPENAI_API_KEY={m}",
    "export STRIPE_SECRET_KEY={m}",
    '"api_key": "{m}"',
    "api_key: {m}",
    "secret_key = '{m}'",
    "Authorization: Bearer {m}",
    "x-api-key: {m}",
    "--token {m}",
    "--password {m}",
    "the api secret is {m}",
    "auth_token: {m}",
    "Cookie: session={m}",
    "postgres://admin:{m}@db.example.com/shop",
    "curl -u admin:{m} https://ci.example.com",
    "sshpass -p {m} ssh deploy@host",
    "machine example.com login deploy password {m}",
]


@given(
    secret=st.text(alphabet=ALNUM, min_size=8, max_size=48),
    shape=st.sampled_from([(6, 4, 18), (4, 4, 12)]),
    context=st.sampled_from(CONTEXTS),
)
def test_a_value_hermes_masked_is_kept_as_it_is_where_the_secret_itself_is_redacted(
    secret: str, shape: tuple[int, int, int], context: str
) -> None:
    masked = context.format(m=hermes_mask("sk-" + secret, *shape))
    assert redact_text(masked) == masked
    assert REF_PREFIX in redact_text(context.format(m="sk-" + secret + "Q9z"))  # the same place, a secret


def test_hermes_other_masks_are_kept_too() -> None:
    for text in (
        "GITHUB_TOKEN=«redacted:ghp_…»",
        "api_key: «redacted-secret»",
        "TELEGRAM_BOT_TOKEN=123456789:***",
        "mysql -p*** shop",
        "Set-Cookie: sid=***; Path=/",
        "DATABASE_URL=postgres://app:***@db:5432/app",
        "password: [REDACTED]",
    ):
        assert redact_text(text) == text, text


def test_recall_counts_no_credential_in_a_message_hermes_already_masked() -> None:
    masked = "STRIPE_SECRET_KEY=sk_liv...3a2Z\nDB_PASSWORD=***\nAuthorization: Bearer sk-pro...7890"
    raw = [
        user("check the env"),
        assistant("", call("c1", "terminal", command="cat .env")),
        tool("c1", json.dumps({"output": masked, "exit_code": 0, "error": None})),
    ]
    for answer in (lookup(raw, "#1-#2"), search(raw, "KEY")):
        assert not any("credential" in note for note in answer.notes), answer.notes
        assert REF_PREFIX not in answer.to_json()
    assert "sk_liv...3a2Z" in lookup(raw, "#2").to_json()
