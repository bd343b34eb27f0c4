"""A real local HTTP server speaking the OpenAI chat.completions API, playing a script.

It drives `talos demo` (a complete session with no API key and no network) and the agent and
host tests.

Streamed responses are Server-Sent Events shaped exactly as the API sends them: a role chunk,
content deltas, tool-call deltas (id and name first, arguments in pieces, by index), a finish
chunk, a usage chunk with empty `choices`, then `data: [DONE]`. Error responses carry the API's
JSON error body and any headers (Retry-After). Every request is recorded for assertions.

A context window, for the tests of compaction (`context_window=N`): each request's size is
counted (its body's bytes, four a token), reported as the usage's `prompt_tokens`, and a request
over N tokens (its `max_completion_tokens` included) is answered as OpenAI answers it, 400
`context_length_exceeded`. A script entry may be a function of the request's body that returns
the step (a model that reads what it is sent).

Faults, for the tests that prove a task ends whatever the endpoint does: `hang` (output, then
keep-alives or silence), `silent` (not even the headers), `drop` (the connection closed or reset
mid-stream), `raw` (any status, content type and body: garbage), `trickle` (a chunk now and then,
for ever). Every fault that waits on the client counts its going away (`disconnects`).
"""

from __future__ import annotations

import json
import select
import socket
import struct
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def _chunk(model: str, delta: dict | None, finish: str | None = None, usage=None) -> dict:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    out = {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": model,
        "choices": choices,
    }
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
        first = {
            "index": index,
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": ""},
        }
        chunks.append(_chunk(model, {"tool_calls": [first]}))
        half = len(arguments) // 2
        for piece in (arguments[:half], arguments[half:]):
            more = {"index": index, "function": {"arguments": piece}}
            chunks.append(_chunk(model, {"tool_calls": [more]}))
    chunks.append(_chunk(model, {}, "tool_calls" if tool_calls else "stop"))
    prompt, completion, cached = usage
    chunks.append(
        _chunk(
            model,
            None,
            usage={
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
                "prompt_tokens_details": {"cached_tokens": cached},
            },
        )
    )
    return {"stream": chunks, "delay": delay}


def error(status: int, message: str, code: str | None = None, headers: dict | None = None) -> dict:
    body = {"error": {"message": message, "type": "invalid_request_error", "code": code}}
    return {"status": status, "json": body, "headers": headers or {}}


def too_long(window: int, tokens: int) -> dict:
    """OpenAI's answer to a request longer than the model's context, body and all."""
    message = (
        f"This model's maximum context length is {window} tokens. However, your messages "
        f"resulted in {tokens} tokens. Please reduce the length of the messages."
    )
    body = {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    }
    return {"status": 400, "json": body, "headers": {}}


def hang(text: str | None = "Thinking", keepalive: bool = True) -> dict:
    """Send the first chunk (with `text` as output, if any), then no more data until the client
    goes away: SSE keep-alive comments every 50 ms (a socket read timeout never fires), or with
    `keepalive=False` not a byte."""
    first = {"role": "assistant", "content": text} if text else {"role": "assistant"}
    return {"stream": [_chunk("fake-model", first)], "hang": True, "keepalive": keepalive}


def silent() -> dict:
    """Read the request, then send nothing, not even the status line, until the client goes
    away."""
    return {"silent": True}


def drop(step: dict, after: int, reset: bool = False) -> dict:
    """Send the first `after` chunks of a `reply`, then close the connection: cleanly (the
    body simply ends, as HTTP/1.0 allows) or, with `reset`, with a TCP reset."""
    return {"stream": step["stream"][:after], "drop": "reset" if reset else "close"}


def raw(body: bytes | str, content_type: str = "text/html", status: int = 200) -> dict:
    """Any status, content type and body, exactly as given: a proxy's error page, a JSON
    answer to a streamed request, SSE with garbage in it."""
    data = body.encode() if isinstance(body, str) else body
    return {"raw": data, "status_raw": status, "content_type": content_type}


def trickle(interval: float, text: str = "more ") -> dict:
    """A chunk of output every `interval` seconds, never finishing: never idle, never done."""
    return {
        "stream": [_chunk("fake-model", {"role": "assistant", "content": ""})],
        "trickle": interval,
        "text": text,
    }


def _counted(step: dict, tokens: int) -> dict:
    usage = step["stream"][-1]["usage"]
    done = usage["completion_tokens"]
    counted = {
        "prompt_tokens": tokens,
        "completion_tokens": done,
        "total_tokens": tokens + done,
        "prompt_tokens_details": {"cached_tokens": 0},
    }
    return dict(step["stream"][-1], usage=counted)


class ScriptedModelServer:
    def __init__(self, context_window: int | None = None) -> None:
        self.script: list[Any] = []  # steps, or functions of a request's body to a step
        self.context_window = context_window
        self.sizes: list[int] = []  # each request's tokens, counted (its bytes, four a token)
        self.refused = 0  # requests answered 400 context_length_exceeded
        self.requests: list[dict[str, Any]] = []
        self.disconnected = threading.Event()
        self.disconnects = 0  # how many times a client went away while a fault waited on it
        self._stopping = threading.Event()
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
                data = self.rfile.read(length)
                body = json.loads(data or b"{}")
                server.requests.append(
                    {"path": self.path, "headers": dict(self.headers), "body": body}
                )
                tokens = -(-len(data) // 4)
                server.sizes.append(tokens)
                window = server.context_window
                answer = body.get("max_completion_tokens") or 0  # OpenAI counts it too
                if window is not None and tokens + answer > window:
                    server.refused += 1
                    refusal = too_long(window, tokens)
                    self._json(400, refusal["json"])
                    return
                if not server.script:
                    self._json(500, {"error": {"message": "no scripted response left"}})
                    return
                step = server.script.pop(0)
                if callable(step):
                    step = step(body)
                if window is not None and "stream" in step:  # the usage: what was counted
                    usage = step["stream"][-1].get("usage")
                    if usage is not None:
                        step = dict(step, stream=[*step["stream"][:-1], _counted(step, tokens)])
                if "status" in step:
                    self._json(step["status"], step["json"], step.get("headers", {}))
                    return
                if step.get("silent"):
                    self._await_disconnect()
                    return
                if "raw" in step:
                    self.send_response(step["status_raw"])
                    self.send_header("Content-Type", step["content_type"])
                    self.end_headers()
                    self._send(step["raw"])
                    self.close_connection = True
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                try:
                    for chunk in step["stream"]:
                        self._send(f"data: {json.dumps(chunk)}\n\n".encode())
                        time.sleep(step.get("delay", 0.0))
                    if "drop" in step:
                        self._drop(reset=step["drop"] == "reset")
                        return
                    if step.get("hang") and not step.get("keepalive", True):
                        self._await_disconnect()
                        return
                    if step.get("hang"):
                        while not server._stopping.is_set():  # until the client closes it
                            time.sleep(0.05)
                            self._send(b": keep-alive\n\n")
                    if "trickle" in step:
                        piece = _chunk("fake-model", {"content": step["text"]})
                        while not server._stopping.is_set():
                            time.sleep(step["trickle"])
                            self._send(f"data: {json.dumps(piece)}\n\n".encode())
                    self._send(b"data: [DONE]\n\n")
                except (BrokenPipeError, ConnectionResetError):
                    server._went_away()

            def _await_disconnect(self) -> None:
                """Wait, sending nothing, until the client closes its end (or the server
                stops). The request is read, so the socket turns readable only at EOF."""
                sock = self.connection
                while not server._stopping.is_set():
                    readable, _, _ = select.select([sock], [], [], 0.05)
                    if not readable:
                        continue
                    try:
                        data = sock.recv(1, socket.MSG_PEEK)
                    except OSError:
                        data = b""
                    if not data:
                        server._went_away()
                        self.close_connection = True
                        return

            def _send(self, data: bytes) -> None:
                self.wfile.write(data)
                self.wfile.flush()

            def _drop(self, reset: bool) -> None:
                self.wfile.flush()
                if reset:  # SO_LINGER 0: close() sends RST instead of FIN
                    linger = struct.pack("ii", 1, 0)
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
                    self.connection.close()
                else:
                    self.connection.shutdown(socket.SHUT_RDWR)
                self.close_connection = True

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

    def _went_away(self) -> None:
        self.disconnects += 1
        self.disconnected.set()

    def close(self) -> None:
        self._stopping.set()  # a fault still waiting on a client stops
        self.httpd.shutdown()
        self.httpd.server_close()
