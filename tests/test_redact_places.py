"""Issue 32, item 7: every kind of the credential table (tests/credential_table.py), in every place a
session holds a string — tool output (also doubly encoded: JSON in a JSON string), tool-call arguments,
user and assistant text, `reasoning`, `reasoning_content`, `reasoning_details`, list-of-parts content,
the system prompt, `base_url` and any other field of the document — is gone from the export
(`conversations.jsonl`, `dpo_pairs.jsonl`) and from a view compacted with `redact_credentials: true`
(through the CLI, on real files), and from the ledger index."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from tests.credential_table import KINDS, Sample, leaked, sample
from tests.support import assistant, call, load_sample, padding_turns, terminal, tool, user, write_like_hermes
from timmy_compactor.cli import main
from timmy_compactor.core.fold.index import INDEX_HEADER
from timmy_compactor.core.pipeline import compact
from timmy_compactor.core.redact import REF_PREFIX, redact_text
from timmy_compactor.core.types import Settings

PLACES = (
    "tool output",
    "doubly encoded tool output",
    "tool arguments",
    "user",
    "assistant",
    "reasoning",
    "reasoning_content",
    "reasoning_details",
    "list of parts",
    "system prompt",
    "base_url",
    "any field",
)


def doubly_encoded(text: str) -> str:
    """A tool result whose output is a JSON document holding `text`: its quotes escaped twice."""
    return terminal(json.dumps({"content": text, "status": "ok"}))


def leaked_deep(item: Sample, output: str) -> list[str]:
    """`leaked`, and the secrets escaped two or three times (a doubly encoded output inside a JSON file)."""
    deeper = []
    for secret in item.secrets:
        twice = json.dumps(json.dumps(secret)[1:-1])[1:-1]
        if twice in output or json.dumps(twice)[1:-1] in output:
            deeper.append(secret)
    return leaked(item, output) + deeper


def kinds_in_every_place(base: dict[str, Any], item: Sample) -> dict[str, Any]:
    """The sample session with `item` in each of `PLACES` (the last user message too)."""
    doc = json.loads(json.dumps(base))
    doc["session_id"] = f"places_{item.kind}"
    messages = doc["messages"]
    users = [m for m in messages if m.get("role") == "user"]
    users[0]["content"] = f"{users[0]['content']}\n{item.text}"
    users[-1]["content"] = [{"type": "text", "text": f"{users[-1]['content']}\n{item.text}"}]
    first_call = next(m for m in messages if m.get("role") == "assistant" and m.get("tool_calls"))
    first_call["tool_calls"][0]["function"]["arguments"] = json.dumps({"command": item.text})
    result = next(m for m in messages if m.get("tool_call_id") == first_call["tool_calls"][0]["id"])
    result["content"] = terminal(f"config:\n{item.text}\nok")
    last_result = [m for m in messages if m.get("role") == "tool"][-1]
    assert last_result is not result
    last_result["content"] = doubly_encoded(f"config:\n{item.text}\nok")
    answers = [m for m in messages if m.get("role") == "assistant"]
    answers[0]["content"] = [{"type": "text", "text": f"I'll use {item.text}"}]
    answers[-1]["content"] = f"done with {item.text}"
    answers[-1]["reasoning"] = f"the user gave {item.text}"
    answers[1]["reasoning_content"] = f"think: {item.text}"
    answers[1]["reasoning_details"] = [{"type": "reasoning.text", "text": item.text}]
    doc["system_prompt"] = f"{doc.get('system_prompt') or ''}\nDeploy key:\n{item.text}"
    doc["base_url"] = f"https://gateway.example.com/v1?note={json.dumps(item.text)}"
    doc["title"] = item.text
    return doc


def test_export_leaves_no_kind_in_any_place(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    base = load_sample()
    table = [sample(kind, random.Random(f"{kind}:32")) for kind in sorted(KINDS)]  # no two share a secret
    for item in table:
        write_like_hermes(sessions / f"session_places_{item.kind}.json", kinds_in_every_place(base, item))
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"sessions": {"dir": str(sessions)}, "export": {"dir": str(tmp_path / "out")}}))
    assert main(["export", "--config", str(config)]) == 0
    conversations = (tmp_path / "out" / "conversations.jsonl").read_text(encoding="utf-8")
    records = [json.loads(line) for line in conversations.splitlines()]
    assert len(records) == len(table)
    assert all(r["messages"][-1].get("reasoning_content") for r in records)  # the reasoning was exported
    for name in ("conversations.jsonl", "dpo_pairs.jsonl"):
        output = (tmp_path / "out" / name).read_text(encoding="utf-8")
        leaks = sorted(item.kind for item in table if leaked_deep(item, output))
        assert not leaks, f"{name} leaks {leaks}"


def cold_places_session(item: Sample) -> dict[str, Any]:
    """A session whose cold middle holds `item` in every place of an assistant or tool message, and
    whose document holds it in the system prompt, `base_url` and another field. User messages and the
    hot tail hold none (a view keeps those as they are)."""
    messages = [user("deploy the service, see /srv/app/README.md")]
    for k in range(6):
        reply = assistant(
            [{"type": "text", "text": f"step {k}: {item.text}"}] if k % 2 else f"step {k}: {item.text}",
            call(f"c{k}", "terminal", command=f"run {k} {item.text}"),
            reasoning=f"plan {k}: {item.text}",
            reasoning_content=f"why {k}: {item.text}",
            reasoning_details=[{"type": "reasoning.text", "text": item.text}],
        )
        output = f"output {k}\n{item.text}\n" + "line\n" * 200
        messages += [reply, tool(f"c{k}", doubly_encoded(output) if k == 3 else terminal(output))]
    return {
        "session_id": f"view_{item.kind}",
        "model": "m",
        "base_url": f"https://gateway.example.com/v1?note={json.dumps(item.text)}",
        "system_prompt": f"You are helpful.\n{item.text}",
        "title": item.text,
        "messages": messages + padding_turns(4, size=400),
    }


def test_view_with_redact_credentials_leaves_no_kind_in_any_place(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"compaction": {"redact_credentials": True, "protect_last_n_turns": 2}}))
    leaks = []
    for kind in sorted(KINDS):
        item = sample(kind, random.Random(32))
        raw = tmp_path / f"session_view_{kind}.json"
        write_like_hermes(raw, cold_places_session(item))
        assert main(["compact", str(raw), "--force", "--config", str(config)]) == 0, kind
        view = (tmp_path / f"compacted_session_view_{kind}.json").read_text(encoding="utf-8")
        if leaked_deep(item, view):
            leaks.append(kind)
    assert not leaks


def test_ledger_index_keeps_no_mailgun_key() -> None:
    """The issue's one index leak: the eval-ledger strategy listed a Mailgun `key-…` as a value."""
    rng = random.Random(1)
    key = "key-" + "".join(rng.choice("0123456789abcdef") for _ in range(32))
    messages = [
        user(f"the mail API key is {key}"),
        assistant("noted"),
        user(f"use {key} for the newsletter"),
        assistant(f"sending with {key}"),
        *padding_turns(2, size=300),
    ]
    result = compact(messages, Settings(strategy="ledger", protect_last_n_turns=1, context_window=4_000), force=True)
    blocks = [m["content"] for m in result.messages if str(m.get("content")).startswith(INDEX_HEADER)]
    assert blocks and key[4:] not in blocks[0]


def test_ordinary_code_near_the_new_rules_is_kept() -> None:
    """The rules of issue 32 read a tool's password option, a line's format, a call's auth pair: the
    same tools, lines and calls without a secret are kept."""
    kept = [
        "docker login -u me --password-stdin registry.example.com",
        "docker run -p 8080:80 nginx && ssh -p 2222 host",
        "redis-cli -h cache ping",
        "fe80:1234:5678:abcd:ef01:2345:6789:abcd",
        "2026-11-26 15:48:36:123:456:789",
        "cd /srv && pwd && OLDPWD=/home/x PWD=/srv/app",
        "echo $1$2 and $apr1 costs",
        "/tmp/pytest-of-root/3f2b1c4e-9a8b-4c7d-8e6f-0123456789ab/test.py",
        "openssl rsa -in key.pem -passin env:KEY_PASS",
        "htpasswd -c /etc/nginx/.htpasswd admin",
        "<password>${DB_PASSWORD}</password>",
        "requests.get(url, auth=auth)",
        "see https://example.com/?signature=short",
        "key-value store, monkey-patching",
        "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA==",
        "smbclient -L //fs -U admin",
        "python -m pytest -p no:cacheprovider",
    ]
    for text in kept:
        assert redact_text(text) == text, text


def test_code_that_passes_a_secret_on_is_kept() -> None:
    """Measured on 8 packages of real Python (pip, aiohttp, click, anyio, Hermes' agent, cryptography,
    _pytest, hypothesis): 253 references before, mostly these shapes of code, none a secret; on the
    corpus, 10, all test fixtures (`SECRET_KEY='test-secret-key'`). A weak password stays a secret."""
    kept = [
        "client = OpenAI(api_key=runtime_api_key, base_url=base_url)",
        '"refresh_token": next_refresh_token,',
        "self.key_password = key_password",
        "if password is None:",
        'password = ""',
        "def sign(self, private_key: SSHPrivateKeyTypes) -> bytes:",
        "group_order = 0xD7C134AA264366862A18302575D0FB98D116BC4B6DDEBCA3A5A7939F",
        "return Decision(tool_name=tool_name, signature=signature)",
        'echo "$PASSWORD" | sudo -S true',
        '_HEX_PAT = "[0-9a-f]{1,4}"',
        "settings.configure(DEBUG=True, SECRET_KEY='test-secret-key')",  # the corpus' 10 references
        "SECRET_KEY = 'test'\n                self.password = password",
        '"Cryptography_HAS_PSK": cryptography_has_psk,',
        "define('WP_DEBUG', true); define('DB_NAME', 'wordpress');",
        '<add key="PageSize" value="50" />',
        "sqlplus /nolog && lftp -e 'ls' files.example.com",
    ]
    for text in kept:
        assert redact_text(text) == text, text


def folded_run(item: Sample, steps: int = 160) -> list[dict[str, Any]]:
    """An agent run long enough to fold, `item` in early assistant text, tool-call arguments, tool output
    and reasoning: the steps the anchor index lists."""
    messages = [user("fix the flaky billing job")]
    for i in range(steps):
        secret = item.text if i in (3, 5, 7) else ""
        output = f"step {i}\n{secret}\n" + "\n".join(f"line {k} of step {i}" for k in range(60))
        reply = assistant(
            f"Step {i}: trying v2.14.{i} {secret}",
            call(f"c{i}", "terminal", command=f"python scripts/repro_{i}.py {secret}"),
            reasoning=f"try {i} {secret}",
        )
        messages += [reply, tool(f"c{i}", doubly_encoded(output) if i == 5 else terminal(output))]
    return [*messages, assistant("done")]


def test_anchor_index_keeps_no_kind() -> None:
    leaks = []
    for kind in sorted(KINDS):
        item = sample(kind, random.Random(f"{kind}:index"))
        result = compact(folded_run(item), Settings(context_window=16_000, index_max_ratio=0.5), force=True)
        assert result.compacted, (kind, result.report.failure)
        index = next(m["content"] for m in result.messages if str(m.get("content")).startswith(INDEX_HEADER))
        if leaked_deep(item, index):
            leaks.append(kind)
    assert not leaks


def test_pgpass_and_netrc_lines_in_markdown_html_or_a_diff() -> None:
    """A `.pgpass` line in backticks, a tag or parentheses, a `.netrc` added in a diff."""
    for kind, wrap in (
        ("pgpass_line", "- `{}`"),
        ("pgpass_line", "<pre>{}</pre>"),
        ("pgpass_line", "({})"),
        ("netrc_password", "{}"),
    ):
        item = sample(kind, random.Random(4))
        text = wrap.format(item.text.strip())
        if kind == "netrc_password":
            text = "\n".join("+" + line for line in item.text.splitlines())
        assert not leaked(item, redact_text(text)), text


def test_weak_passwords_are_still_secrets() -> None:
    for text in ("DB_PASSWORD=changeme", "password: password123", "PGPASSWORD=postgres psql"):
        assert REF_PREFIX in redact_text(text), text


def test_every_kind_over_many_seeds() -> None:
    """A table's fixed seeds hide shapes a kind takes now and then: a docker `auth` whose base64 holds
    no digit, a key body whose `+` cuts a 32-character run. 150 seeds of every kind, as written."""
    leaks = {}
    for kind in sorted(KINDS):
        for seed in range(150):
            item = sample(kind, random.Random(seed * 7 + 1))
            if leaked(item, redact_text(item.text)):
                leaks[kind] = seed
    assert not leaks


def test_identifiers_that_look_random_are_kept() -> None:
    kept = [
        "'bsd-3-clause-no-nuclear-license-2014': {'id': 'BSD-3-Clause-No-Nuclear-License-2014'}",
        "self.auth: MultiDomainBasicAuth = MultiDomainBasicAuth()",
        "self, public_key: SSHCertPublicKeyTypes",
        "def test_Parse_HTTP2_headers_with_Continuation_frames(): ...",
    ]
    for text in kept:
        assert redact_text(text) == text, text
