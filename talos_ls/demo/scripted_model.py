"""A real local HTTP server speaking the OpenAI chat.completions API, playing a script.

It drives `talos demo` (a complete session with no API key and no network) and the agent and
host tests.

Streamed responses are Server-Sent Events shaped exactly as the API sends them: a role chunk,
content deltas, tool-call deltas (id and name first, arguments in pieces, by index), a finish
chunk, a usage chunk with empty `choices`, then `data: [DONE]`. Error responses carry the API's
JSON error body and any headers (Retry-After). Every request is recorded for assertions.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def _chunk(model: str, delta: dict | None, finish: str | None = None, usage=None) -> dict:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    out = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0,
           "model": model, "choices": choices}  # fmt: skip
    if usage is not None:
        out["usage"] = usage
    return out


def reply(
    text: str | None = None,
    tool_calls: list[tuple[str, str, str]] | None = None,
    usage: tuple[int, int, int] = (10, 5, 0),
    model: str = "fake-model",
    delay: float = 0.0,
) -> dict:
    """One streamed model turn: some text and/or tool calls (id, name, arguments JSON)."""
    chunks = [_chunk(model, {"role": "assistant", "content": ""})]
    if text:
        for i in range(0, len(text), 7):
            chunks.append(_chunk(model, {"content": text[i : i + 7]}))
    for index, (call_id, name, arguments) in enumerate(tool_calls or []):
        first = {"index": index, "id": call_id, "type": "function",
                 "function": {"name": name, "arguments": ""}}  # fmt: skip
        chunks.append(_chunk(model, {"tool_calls": [first]}))
        half = len(arguments) // 2
        for piece in (arguments[:half], arguments[half:]):
            more = {"index": index, "function": {"arguments": piece}}
            chunks.append(_chunk(model, {"tool_calls": [more]}))
    chunks.append(_chunk(model, {}, "tool_calls" if tool_calls else "stop"))
    prompt, completion, cached = usage
    chunks.append(_chunk(model, None, usage={
        "prompt_tokens": prompt, "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
    }))  # fmt: skip
    return {"stream": chunks, "delay": delay}


def error(status: int, message: str, code: str | None = None, headers: dict | None = None) -> dict:
    body = {"error": {"message": message, "type": "invalid_request_error", "code": code}}
    return {"status": status, "json": body, "headers": headers or {}}


def hang() -> dict:
    """Send the first chunk, then nothing until the client goes away."""
    return {"stream": [_chunk("fake-model", {"role": "assistant", "content": "Thinking"})],
            "hang": True}  # fmt: skip


class ScriptedModelServer:
    def __init__(self) -> None:
        self.script: list[dict] = []
        self.requests: list[dict[str, Any]] = []
        self.disconnected = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_GET(self) -> None:  # the model list: what `talos doctor` asks
                if self.path.rstrip("/").endswith("/models"):
                    model = {"id": "fake-model", "object": "model", "created": 0, "owned_by": "t"}
                    self._json(200, {"object": "list", "data": [model]})
                else:
                    self._json(404, {"error": {"message": "not found"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                server.requests.append(
                    {"path": self.path, "headers": dict(self.headers), "body": body}
                )
                if not server.script:
                    self._json(500, {"error": {"message": "no scripted response left"}})
                    return
                step = server.script.pop(0)
                if "status" in step:
                    self._json(step["status"], step["json"], step.get("headers", {}))
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                try:
                    for chunk in step["stream"]:
                        self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                        self.wfile.flush()
                        time.sleep(step.get("delay", 0.0))
                    if step.get("hang"):
                        while True:  # until the client closes the stream
                            time.sleep(0.05)
                            self.wfile.write(b": keep-alive\n\n")
                            self.wfile.flush()
                    self.wfile.write(b"data: [DONE]\n\n")
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    server.disconnected.set()

            def _json(self, status: int, payload: dict, headers: dict | None = None) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
