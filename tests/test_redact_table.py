"""Issue 15, items 1 and 7: no credential of the table (tests/credential_table.py) survives redaction,
wherever it sits — `redact_text` alone, the real export (`conversations.jsonl`, `dpo_pairs.jsonl`),
the middle of a rules view made with `redact_credentials: true`, the ledger block — and redaction is
idempotent and local, so the verification of a redacted view can find `redact_text(fact)`."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from tests.credential_table import KINDS, Sample, leaked, sample, samples
from tests.support import assistant, call, load_sample, padding_turns, terminal, tool, user, write_like_hermes
from timmy_compactor.cli import main
from timmy_compactor.core.credential_refs import stands_in
from timmy_compactor.core.facts import paths_and_urls
from timmy_compactor.core.fold.index import INDEX_HEADER
from timmy_compactor.core.pipeline import compact
from timmy_compactor.core.redact import REF_PREFIX, credential_ref, redact_text
from timmy_compactor.core.types import Settings
from timmy_compactor.export import export_sessions

SEPARATORS = [" ", "\n", "\\n", "\t", "(", '"', "'", ", ", "; ", ": ", "\r\n", "` "]


def embeddings(text: str) -> dict[str, str]:
    """How a credential reaches a string of a session: as typed, JSON-encoded (tool output, tool-call
    arguments), inside a JSON object, right after an escaped newline inside a JSON string."""
    return {
        "plain": text,
        "json string": json.dumps(text),
        "json object": json.dumps({"command": text, "cwd": "/srv/app"}),
        "after escaped newline": "log:\\n" + json.dumps(text)[1:-1] + "\\nend",
        "in prose": f"Here it is: {text} (keep it safe).",
    }


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_redact_text_leaves_no_secret_of_any_kind_in_any_embedding(kind: str) -> None:
    for seed in range(8):
        item = sample(kind, random.Random(seed))
        for name, text in embeddings(item.text).items():
            out = redact_text(text)
            assert not leaked(item, out), (name, text, out)
            assert REF_PREFIX in out, (name, out)
            assert redact_text(out) == out, (name, out)  # idempotent
            if name in ("json string", "json object", "after escaped newline"):
                json.loads(out if name != "after escaped newline" else f'"{out}"')  # still valid JSON


def test_same_secret_gives_the_same_reference_in_every_format() -> None:
    key = "".join(random.Random(1).choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(24))
    ref = credential_ref(key)
    forms = [f"api_key={key}", f'"api_key": "{key}"', f"API_KEY: '{key}'", f"--api-key {key}", f"token={key}"]
    for form in forms:
        assert ref in redact_text(form), form
        assert ref in redact_text(json.dumps(form)), form


def test_credential_url_after_a_key_redacts_like_the_url_alone() -> None:
    """Item 7: `token=https://u:p@host/…` — the URL keeps its shape, only the password becomes a ref,
    so `redact_text(url)` is found in the redacted text (the verification's condition)."""
    url = "https://deploy:hunter2pass@git.example.com/team/repo.git"
    for text in (f"token={url}", f"TOKEN: {url}", f'{{"token": "{url}"}}', f"password={url}", f"see {url}"):
        out = redact_text(text)
        assert "hunter2pass" not in out
        assert redact_text(url) in out, text
        assert redact_text(url) == f"https://deploy:{credential_ref('hunter2pass')}@git.example.com/team/repo.git"


def test_code_and_prose_that_merely_name_secrets_are_kept() -> None:
    kept = [
        "def login(password: str, token: Optional[str] = None) -> bool:",
        "token = get_token(request)",
        "cache_key = make_key(user)",
        "max_tokens=4096 and secret: lost in the noise",
        "  ✓ PASS: Got copy of operand",
        "password=$DB_PASSWORD",
        "the password is stored in the keyring",
        "Authorization: Bearer",
        "bypass=True",
        "commit 3f2a9c1d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a39 and /srv/app/src/components/Header.tsx",
        # issue 21's rules (a name holding auth/token/secret/key, command passwords) keep these
        "AUTHENTICATION_BACKENDS: django.contrib.auth.backends.ModelBackend2",
        "the cache key is /var/cache/app/0123456789abcdef0123456789abcdef",
        "git push -u origin main && mysql -u root -p shop",
        "max_tokens_per_request: 4096, token_budget: 128000",
        "the auth token expired at 2026-11-25T13:36:12Z, refreshing",
        "sshpass -p",
        "keys: ssh-ed25519, ecdsa-sha2-nistp256",
    ]
    for text in kept:
        assert redact_text(text) == text, text


# ---------------------------------------------------------------- properties

table_samples = st.builds(
    lambda kind, seed: sample(kind, random.Random(seed)), st.sampled_from(sorted(KINDS)), st.integers(0, 10**6)
)
filler = st.text(alphabet="abcdefXYZ019 .,!?-_/:=\n", max_size=40)


@given(
    item=table_samples,
    prefix=filler,
    suffix=filler,
    before=st.sampled_from(SEPARATORS),
    after=st.sampled_from(SEPARATORS),
    wrap=st.sampled_from(["plain", "json string", "json object"]),
)
def test_no_secret_of_the_table_survives_wherever_it_is_embedded(
    *, item: Sample, prefix: str, suffix: str, before: str, after: str, wrap: str
) -> None:
    text = prefix + before + item.text + after + suffix
    text = embeddings(text)[wrap]
    out = redact_text(text)
    assert not leaked(item, out), (text, out)
    assert redact_text(out) == out


@given(text=st.text(max_size=200) | st.builds(lambda s, t: s.text + t, table_samples, st.text(max_size=60)))
def test_redaction_is_idempotent(text: str) -> None:
    once = redact_text(text)
    assert redact_text(once) == once


url_passwords = st.text(alphabet="abcXYZ0189~!$&*+,;=%-._", min_size=1, max_size=20)
hosts = st.sampled_from(["db.internal", "git.example.com:8443", "10.0.0.7", "localhost"])
paths = st.sampled_from(["", "/", "/app", "/team/repo.git", "/v1/x?token=abc123def456&y=1"])


@given(
    scheme=st.sampled_from(["https", "http", "postgres", "redis", "ftp"]),
    user_=st.text(alphabet="abcxyz019_-", max_size=8),
    password=url_passwords,
    host=hosts,
    path=paths,
    key=st.sampled_from(["", "token=", "TOKEN: ", "password=", "url=", '"token": "', "--token ", "DATABASE_URL="]),
    after=st.sampled_from(["", " ", "\n", '"', "\\n", " and more"]),
)
def test_a_redacted_url_is_found_in_the_redacted_text(
    *, scheme: str, user_: str, password: str, host: str, path: str, key: str, after: str
) -> None:
    url = f"{scheme}://{user_}:{password}@{host}{path}"
    text = f"use {key}{url}{after}"
    out = redact_text(text)
    assert redact_text(url) in out, (text, out)
    if len(password) >= 3 and password not in url.replace(f":{password}@", "") and not stands_in(password):
        assert f":{password}@" not in out


@given(item=table_samples, before=st.sampled_from(SEPARATORS), after=st.sampled_from(SEPARATORS))
@example(item=sample("az_login_password", random.Random(0)), before=" ", after=" ")  # `-u http://app`: a URL
def test_every_url_of_a_text_redacts_as_it_does_in_place(item: Sample, before: str, after: str) -> None:
    """The verification's condition for URL facts: `redact_text(url) in redact_text(text)`."""
    text = f"see{before}{item.text}{after}done"
    out = redact_text(text)
    for ref in paths_and_urls(text):
        if "://" in ref:
            assert redact_text(ref) in out, (ref, out)


# ---------------------------------------------------------------- the real export


def secret_session(base: dict[str, Any], item: Sample) -> dict[str, Any]:
    """The sample session with `item` in a cold user message, assistant text, tool-call arguments
    (JSON-encoded), a tool output (JSON-encoded) and the last user message; and in the system prompt."""
    doc = json.loads(json.dumps(base))
    doc["session_id"] = f"secret_{item.kind}"
    messages = doc["messages"]
    users = [m for m in messages if m.get("role") == "user"]
    users[0]["content"] = f"{users[0]['content']}\nMy credentials:\n{item.text}\n"
    users[-1]["content"] = f"{users[-1]['content']}\nagain: {item.text}"
    first_call = next(m for m in messages if m.get("role") == "assistant" and m.get("tool_calls"))
    first_call["content"] = f"I'll use {item.text} for this."
    first_call["tool_calls"][0]["function"]["arguments"] = json.dumps({"command": item.text, "timeout": 30})
    call_id = first_call["tool_calls"][0]["id"]
    result = next(m for m in messages if m.get("role") == "tool" and m.get("tool_call_id") == call_id)
    result["content"] = json.dumps({"output": f"config:\n{item.text}\nok", "exit_code": 0, "error": None})
    doc["system_prompt"] = f"{doc.get('system_prompt') or ''}\n{item.text}"
    return doc


def test_export_leaves_no_secret_of_any_kind(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    base = load_sample()
    table = samples(seed=15)
    for item in table:
        write_like_hermes(sessions / f"session_secret_{item.kind}.json", secret_session(base, item))
    summary = export_sessions(sessions, tmp_path / "out", progress=False)
    assert summary.exported == len(table) and not summary.failed
    assert summary.pairs_total >= len(table)  # the sample has a correction: every session gives a pair
    for name in ("conversations.jsonl", "dpo_pairs.jsonl"):
        output = (tmp_path / "out" / name).read_text(encoding="utf-8")
        leaks = {item.kind: leaked(item, output) for item in table if leaked(item, output)}
        assert not leaks, f"{name} leaks {sorted(leaks)}"
        for line in output.splitlines():
            json.loads(line)

    # The same through the CLI, as a user runs it.
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"sessions": {"dir": str(sessions)}, "export": {"dir": str(tmp_path / "cli")}}))
    assert main(["export", "--config", str(config)]) == 0
    for name in ("conversations.jsonl", "dpo_pairs.jsonl"):
        output = (tmp_path / "cli" / name).read_text(encoding="utf-8")
        assert not [item.kind for item in table if leaked(item, output)], name


# ---------------------------------------------------------------- views


def cold_secret_session(item: Sample) -> list[dict[str, Any]]:
    """A session whose cold middle holds `item` in tool-call arguments, a tool output and assistant
    text; user messages and the hot tail hold no secret."""
    messages = [user("deploy the service, see /srv/app/README.md")]
    for k in range(6):
        messages.append(assistant(f"step {k}: {item.text}", call(f"c{k}", "terminal", command=f"run {k} {item.text}")))
        messages.append(tool(f"c{k}", terminal(f"output {k}\n{item.text}\n" + "line\n" * 200)))
    return messages + padding_turns(4, size=400)


RULES_REDACTED = Settings(redact_credentials=True, protect_last_n_turns=2, context_window=8_000)


@pytest.mark.parametrize(
    "kind",
    sorted(KINDS),
)
def test_rules_view_with_redact_credentials_keeps_no_secret_in_the_middle(kind: str) -> None:
    """Also where a rule copies a call's paths into its summary (`(refs: …)`): a private-key body's
    lines look like paths to `paths_and_urls`, and each must redact on its own."""
    item = sample(kind, random.Random(7))
    messages = cold_secret_session(item)
    result = compact(messages, RULES_REDACTED, force=True)
    assert result.report.verified, result.report.failure
    view = json.dumps(result.messages, ensure_ascii=False)
    assert not leaked(item, view), kind


LEDGER = Settings(strategy="ledger", protect_last_n_turns=1, context_window=4_000)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_ledger_block_keeps_no_secret(kind: str) -> None:
    item = sample(kind, random.Random(3))
    messages = [
        user(f"here is what I have:\n{item.text}"),
        assistant("noted"),
        user(f"Let's use {item.text} from now on."),
        assistant(f"The credential is {item.text}"),
        user(f"the config is {item.text}\nwhich one is live?"),
        *padding_turns(2, size=300),
    ]
    result = compact(messages, LEDGER, force=True)
    assert result.report.verified, result.report.failure
    blocks = [m["content"] for m in result.messages if str(m.get("content")).startswith(INDEX_HEADER)]
    assert blocks
    assert not leaked(item, blocks[0]), blocks[0]


@pytest.mark.parametrize("in_arguments", [False, True])
def test_credential_url_after_a_key_passes_verification_and_leaves_no_password(in_arguments: bool) -> None:
    """Item 7 through the engine: with `redact_credentials: true`, `token=https://u:p@host/…` in the
    cold middle used to fail verification on every version, the reason quoting the password."""
    url = "https://deploy:S3cretPassw0rd@git.example.com/team/repo.git"
    messages = [user("clone the repo and build it")]
    for k in range(6):
        messages.append(
            assistant(
                f"step {k}: token={url}",
                call(f"c{k}", "terminal", command=f"git clone {url}" if in_arguments else "make"),
            )
        )
        messages.append(tool(f"c{k}", terminal(f"Cloning with token={url}\n" + "line\n" * 200)))
    messages += padding_turns(4, size=400)
    result = compact(messages, RULES_REDACTED, force=True)
    assert result.report.verified, result.report.failure
    assert "S3cretPassw0rd" not in json.dumps(result.messages)
    assert "S3cretPassw0rd" not in str(result.report)
