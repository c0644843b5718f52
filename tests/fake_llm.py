"""A scripted OpenAI-compatible server on 127.0.0.1 for driving real Hermes Agent in tests.

The reply is chosen from the request itself (how many user messages, how many assistant steps
since the last one), never from a global counter, because Hermes also makes requests of its own
(title generation, summaries). Every request body is recorded for the test to inspect.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

SUMMARY_MARKERS = ("You are a summarization agent", "Create a structured checkpoint summary")

Reply = str | list[tuple[str, dict[str, Any]]]
"""Text, or tool calls as (name, arguments)."""


def is_summary_request(body: dict[str, Any]) -> bool:
    text = json.dumps(body.get("messages", []), ensure_ascii=False)
    return any(marker in text for marker in SUMMARY_MARKERS)


_TURN = re.compile(r"^Turn (\d+):")


def scripted_turn(body: dict[str, Any]) -> tuple[int, int]:
    """(k of the last user message "Turn k: ...", assistant messages since it) — robust to compaction."""
    messages = body.get("messages", [])
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        match = (
            _TURN.match(m.get("content") or "")
            if m.get("role") == "user" and isinstance(m.get("content"), str)
            else None
        )
        if match:
            steps = sum(1 for x in messages[i + 1 :] if x.get("role") == "assistant")
            return int(match.group(1)), steps
    return 0, 0


def turn_and_step(body: dict[str, Any]) -> tuple[int, int]:
    """(number of user messages, assistant messages since the last user message)."""
    messages = body.get("messages", [])
    users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    last = users[-1] if users else -1
    steps = sum(1 for m in messages[last + 1 :] if m.get("role") == "assistant")
    return len(users), steps


class FakeLLM:
    def __init__(
        self,
        script: Callable[[dict[str, Any]], Reply],
        decode_tps: float = 0.0,
        prefill_tps: float = 0.0,
        summary_chars: int = 60,
        time_scale: float = 1.0,
    ) -> None:
        self.script = script
        self.decode_tps = decode_tps  # simulate a local model's generation speed (0: instant)
        self.prefill_tps = prefill_tps  # and its prompt processing speed
        self.summary_chars = summary_chars  # length of the summaries it writes when asked
        self.simulated_s = 0.0  # model time a real local model would have spent (unscaled)
        self.time_scale = time_scale  # sleep this fraction of it, to keep benchmarks short
        self.requests: list[dict[str, Any]] = []
        self.replies: dict[int, Reply] = {}  # by the index of its request in `requests`
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                data = {"object": "list", "data": [{"id": "scripted-coder-1", "object": "model"}]}
                self._send_json(data)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with fake.lock:
                    fake.requests.append(body)
                    index = len(fake.requests) - 1
                reply: Reply = "OK." if not body.get("tools") else fake.script(body)
                if is_summary_request(body):
                    reply = ("## Summary\nEarlier turns ran tools and answered. " * 200)[: fake.summary_chars]
                with fake.lock:
                    fake.replies[index] = reply
                delay = 0.0
                if fake.prefill_tps:
                    delay += len(json.dumps(body.get("messages", []))) / 4 / fake.prefill_tps
                if fake.decode_tps:
                    delay += len(json.dumps(reply)) / 4 / fake.decode_tps
                if delay:
                    with fake.lock:
                        fake.simulated_s += delay
                    time.sleep(delay * fake.time_scale)
                if body.get("stream"):
                    self._stream(reply)
                else:
                    self._send_json(_completion(reply))

            def _send_json(self, data: dict[str, Any]) -> None:
                raw = json.dumps(data).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def _stream(self, reply: Reply) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                for chunk in _chunks(reply):
                    self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> FakeLLM:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def main_requests(self) -> list[dict[str, Any]]:
        with self.lock:
            return [r for r in self.requests if r.get("tools") and not is_summary_request(r)]

    def summary_requests(self) -> list[dict[str, Any]]:
        with self.lock:
            return [r for r in self.requests if is_summary_request(r)]


_USAGE = {"prompt_tokens": 0, "completion_tokens": 1, "total_tokens": 1}


def _tool_calls(reply: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    return [
        {
            "id": f"call_{abs(hash((name, json.dumps(args, sort_keys=True), k))) % 10**12:012d}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(args)},
        }
        for k, (name, args) in enumerate(reply)
    ]


def _completion(reply: Reply) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply if isinstance(reply, str) else None}
    if not isinstance(reply, str):
        message["tool_calls"] = _tool_calls(reply)
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": "scripted-coder-1",
        "choices": [
            {"index": 0, "message": message, "finish_reason": "stop" if isinstance(reply, str) else "tool_calls"}
        ],
        "usage": _USAGE,
    }


def _chunks(reply: Reply) -> list[dict[str, Any]]:
    base = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0, "model": "scripted-coder-1"}
    if isinstance(reply, str):
        deltas = [{"role": "assistant", "content": reply}]
        finish = "stop"
    else:
        deltas = [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"index": k, **call} for k, call in enumerate(_tool_calls(reply))],
            }
        ]
        finish = "tool_calls"
    chunks = [{**base, "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas]
    chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}], "usage": _USAGE})
    return chunks
