"""The model client: any OpenAI-compatible chat.completions endpoint, streamed.

OpenAI, Ollama, vLLM, LM Studio, OpenRouter: anything that speaks `/v1/chat/completions` with
tools. Tool calls arrive as deltas and are assembled by index; usage comes from the final chunk
(`stream_options.include_usage`). Rate limits and server errors are retried with backoff,
honouring Retry-After, a bounded number of times, and only before any output arrived (a retry
after partial output would repeat it). A bad key, an unknown model or an unreachable endpoint
is a `ModelError` that says what to fix. Cancelling the task closes the HTTP stream.

The API key is read from an environment variable and never appears in a log, an error message
or a transcript (it is registered with `redact`); a password in the base URL is shown as `***`.
A local server without a key works. Usage the endpoint reports is checked (`Usage.checked`):
impossible counts fail the step rather than corrupt the cost; when an endpoint reports none,
it is estimated from the text (about four characters a token), so caps still bite.

The `openai` package costs most of a second to import (more on a busy machine) and its client
some more: `prepare` does both in a thread of its own, started when a host starts (the language
server's `initialized`, `talos run` before the turn's preparation), so no event loop waits for
them, and rehearses one call in memory (the SDK's first-request work). A request is sent
through the SDK's client as `chat.completions.create` sends it, retries, errors and streaming
included, but with the body as it is: `create` first walks the whole conversation through the
SDK's type transform, which costs more at every step of a task (the conversation grows), for
a body that is plain JSON already.

No model call waits for ever (see `ModelConfig`): the first chunk must come within `timeout`,
each next one within `idle_timeout`, and the whole call end within `deadline`. A stream that
ends without a finish reason (the connection dropped), a body that is not a stream, and a
chunk that is not JSON or not a chunk are each a `ModelError` that says so.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import email.utils
import json
import logging
import os
import random
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ..errors import TalosError
from ..redact import add_secret, redact, redact_url
from .context import known_window
from .cost import Usage

logger = logging.getLogger(__name__)
DEFAULT_BASE_URL = "https://api.openai.com/v1"

IDLE_TIMEOUT = 60.0
"""Seconds a stream may go without a chunk once it has begun, before the call is abandoned.

Why it exists: the HTTP client's read timeout restarts at every byte, and an endpoint (or a
proxy in front of it) that is stuck mid-stream may keep sending SSE keep-alive comments, or
hold the socket open sending nothing at all; without this a task would run for ever. A model
that is generating sends a chunk every few tokens, so a minute of silence mid-stream means it
is stuck. Not retried after output began (a retry would repeat it)."""

CALL_DEADLINE = 900.0
"""Seconds one model call may take from request to last chunk, however steadily it streams:
an endpoint that trickles output for ever (a model looping on itself with no token limit)
still ends. Generous: a long answer at a slow local model's pace fits in it."""

if TYPE_CHECKING:
    import openai


def _sdk() -> Any:
    """The `openai` package. On the event loop only once `ModelClient.prepare` has imported it:
    an import under way in another thread would hold the loop until it ends."""
    import openai

    return openai


class ModelError(TalosError):
    """The model could not be used; the message says what to fix (never the key)."""


class ContextTooLong(ModelError):
    """The endpoint refused the request as longer than the model's context (a 400,
    `context_length_exceeded`): the conversation must be compacted before it is sent again."""


def _too_long(exc: openai.APIStatusError) -> bool:
    body = exc.body if isinstance(exc.body, dict) else {}
    code = getattr(exc, "code", None) or body.get("code")
    said = str(exc.message or "")
    return exc.status_code == 400 and (
        code == "context_length_exceeded" or "maximum context length" in said
    )


@dataclass(frozen=True)
class ModelConfig:
    model: str
    base_url: str | None = None  # default: $OPENAI_BASE_URL, else OpenAI
    api_key_env: str = "OPENAI_API_KEY"
    max_retries: int = 3
    max_backoff: float = 30.0
    # Seconds from sending the request to the first chunk: connecting, and the model reading
    # the prompt and thinking (a reasoning model, or a local one on a CPU with a long
    # transcript, may be silent for a while). Not retried: the endpoint may still be working
    # on it (and billing it).
    timeout: float = 120.0
    idle_timeout: float = IDLE_TIMEOUT
    deadline: float = CALL_DEADLINE
    # Tokens the model's context holds (the `contextWindow` setting); None: the known default
    # for the model's name (`context.known_window`).
    context_window: int | None = None
    # Tokens an answer may take (the `maxOutputTokens` setting): sent as
    # `max_completion_tokens`, and kept free in the window. None: not sent (the endpoint's own
    # limit), and a quarter of the window, at most 4,096, kept free.
    max_output_tokens: int | None = None

    @property
    def window(self) -> int:
        return self.context_window or known_window(self.model)

    @property
    def endpoint(self) -> str:
        return self.base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL

    @property
    def shown_endpoint(self) -> str:
        """The endpoint as messages show it: without a password."""
        return redact_url(self.endpoint)

    @property
    def local(self) -> bool:
        """A server on this machine (Ollama, LM Studio, llama.cpp): it needs no key."""
        host = urlsplit(self.endpoint).hostname or ""
        return host == "localhost" or host.startswith("127.") or host == "::1"

    def missing_key(self) -> str | None:
        """'no API key in $VAR' when the variable is empty and the endpoint is not local, so
        nothing is sent that could only fail (or be retried as "no connection"); else None."""
        if self.local or os.environ.get(self.api_key_env):
            return None
        return f"no API key in ${self.api_key_env}"


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: str


@dataclass
class Completion:
    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None

    def message(self) -> dict[str, Any]:
        """The assistant message to append to the conversation."""
        msg: dict[str, Any] = {"role": "assistant", "content": self.text or None}
        if self.tool_calls:
            msg["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in self.tool_calls
            ]
        return msg


def _retry_after(exc: openai.APIStatusError) -> float | None:
    """The wait the endpoint asked for, in seconds: `retry-after-ms` (OpenAI's), else
    `Retry-After` as seconds or an HTTP date. None when absent or unreadable (the endpoint's
    word is advice: a garbled header must not fail the call)."""
    headers = exc.response.headers if exc.response is not None else {}
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = (headers.get(name) or "").strip()
        if not value:
            continue
        try:
            seconds = float(value) * scale
        except ValueError:
            try:
                parsed = email.utils.parsedate_to_datetime(value)
            except (TypeError, ValueError, IndexError, OverflowError):
                continue
            seconds = parsed.timestamp() - time.time() if parsed else float("nan")
        if seconds == seconds:  # not NaN; infinity is capped by the caller
            return max(0.0, seconds)
    return None


class ModelClient:
    def __init__(self, config: ModelConfig) -> None:
        self.config = config
        self._key = os.environ.get(config.api_key_env) or ""
        add_secret(self._key)
        self._lock = threading.Lock()
        self._preparing: concurrent.futures.Future[_Sdk] | None = None

    def prepare(self) -> concurrent.futures.Future[_Sdk]:
        """Import `openai` and build the SDK's client, in a thread of their own, once (again
        only after a failure); the future of both. Returns at once."""
        with self._lock:
            future = self._preparing
            if future is None or (future.done() and future.exception() is not None):
                future = self._preparing = concurrent.futures.Future()
                future.set_running_or_notify_cancel()  # nothing that waits can cancel it
                threading.Thread(
                    target=self._build, args=(future,), name="talos-model-client", daemon=True
                ).start()
                with contextlib.suppress(RuntimeError):  # no event loop: nothing to ready
                    # The SDK's first request runs a call in the loop's default executor: a
                    # thread is started there now, not then.
                    asyncio.get_running_loop().run_in_executor(None, int)
            return future

    def _build(self, future: concurrent.futures.Future[_Sdk]) -> None:
        try:
            openai = _sdk()
            import httpx2
            from openai.types.chat import ChatCompletion, ChatCompletionChunk

            # The rehearsal's host is answered in memory (`.invalid` never resolves): our
            # client's own first-request work is done by its call there (`_rehearse`).
            rehearsal = {f"all://{REHEARSAL_HOST}": httpx2.MockTransport(_rehearsal_answer)}
            client = openai.AsyncOpenAI(
                api_key=self._key or "no-key",  # local servers need none; the SDK wants one
                base_url=self.config.endpoint,
                max_retries=0,  # retries are ours: bounded, honouring Retry-After, not mid-stream
                # A backstop only: `_stream` enforces the config's timeouts itself, with
                # messages that say which, and a read timeout restarts at every keep-alive.
                timeout=openai.Timeout(
                    max(self.config.timeout, self.config.idle_timeout) + 30,
                    connect=self.config.timeout,
                ),
                http_client=openai.DefaultAsyncHttpxClient(mounts=rehearsal),
            )
            sdk = _Sdk(client, ChatCompletion, openai.AsyncStream[ChatCompletionChunk])
            try:
                asyncio.run(_rehearse(sdk))
            except Exception:  # only ever a head start: the first call does it otherwise
                logger.debug("the model client's rehearsal failed", exc_info=True)
            future.set_result(sdk)
        except BaseException as exc:  # the caller of the first model call hears it
            future.set_exception(exc)

    async def _ready(self) -> _Sdk:
        """The SDK's client, once `prepare` has it (started now if nothing started it)."""
        return await asyncio.wrap_future(self.prepare())

    async def probe(self) -> None:
        """One cheap request (the model list) to see that the endpoint answers and takes the
        key. Raises ModelError saying what is wrong."""
        endpoint = self.config.shown_endpoint
        self._require_key()
        client = (await self._ready()).client
        openai = _sdk()
        try:
            await client.models.list()
        except openai.AuthenticationError:
            raise ModelError(f"{endpoint} rejected the API key (401)") from None
        except openai.APIConnectionError:
            raise ModelError(f"no connection to {endpoint}") from None
        except openai.APIStatusError as exc:
            raise ModelError(f"{endpoint} answered {exc.status_code}") from None
        except (openai.APIError, ValueError, TypeError, AttributeError) as exc:  # not a list
            raise ModelError(
                f"{endpoint} answered the model list with something that is not "
                f"one ({type(exc).__name__}): is it an OpenAI-compatible "
                "endpoint?"
            ) from None

    def _require_key(self) -> None:
        missing = self.config.missing_key()
        if missing is not None and not self._key:
            raise ModelError(
                f"{missing}: export it (any value, for a server that needs none), "
                "or set the base URL to a local server"
            )

    def _scrub(self, text: str) -> str:
        return redact(text.replace(self._key, "***") if self._key else text)

    async def complete(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]] = (),
        on_text: Callable[[str], None] | None = None,
        on_retry: Callable[[str], None] | None = None,
        on_unfinished: Callable[[Usage], object] | None = None,
    ) -> Completion:
        """One model turn, streamed; `on_text` gets each piece of text as it arrives, `on_retry`
        a line saying why the call is tried again and when. An attempt that ends after output
        began but before it finished (cancelled, cut, silent, refused) spent tokens all the
        same: `on_unfinished` gets them (the endpoint's count if it sent one, else estimated)."""
        cfg = self.config
        endpoint = cfg.shown_endpoint
        self._require_key()  # at once: not four attempts reported as "no connection"
        sdk = await self._ready()
        openai = _sdk()
        attempts = cfg.max_retries + 1
        for attempt in range(attempts):
            heard = _Heard()
            try:
                return await self._stream(sdk, messages, tools, on_text, heard)
            except (openai.RateLimitError, openai.InternalServerError) as exc:
                wait = _retry_after(exc)
                what = f"{exc.status_code} from {endpoint}"
                said = re.sub(r"^Error code: \d+( - )?", "", str(exc.message or ""))
                said = " ".join(self._scrub(said).split())[:200]
                last = f"{what} ({said})" if said else what
            except openai.APIConnectionError:
                wait, what = None, f"no connection to {endpoint}"
                last = what
            except _Cut:  # the stream ended before any output: nothing to repeat
                wait, what = None, f"the stream from {endpoint} ended before any output"
                last = what
            except _PartialOutput as exc:
                raise ModelError(
                    f"the stream from {endpoint} broke after output began: {exc}"
                ) from None
            except _CutAfterOutput:
                raise ModelError(
                    f"the stream from {endpoint} ended before the model finished "
                    "(no finish reason: the connection closed after output "
                    "began)"
                ) from None
            except _Silence as exc:
                raise ModelError(exc.describe(endpoint, cfg)) from None
            except _Garbage as exc:
                raise ModelError(
                    f"{endpoint} sent {exc}: is it an OpenAI-compatible endpoint?"
                ) from None
            except _BadUsage as exc:
                raise ModelError(
                    f"{endpoint} reported impossible usage ({exc}); the step is "
                    "counted from its length and the task stops"
                ) from None
            except openai.AuthenticationError:
                raise ModelError(
                    f"{endpoint} rejected the API key (401): check ${cfg.api_key_env}"
                ) from None
            except openai.PermissionDeniedError:
                raise ModelError(
                    f"{endpoint} refused access to model {cfg.model!r} (403)"
                ) from None
            except openai.NotFoundError:
                raise ModelError(
                    f"{endpoint} does not know model {cfg.model!r} (404): check the name"
                ) from None
            except openai.APIStatusError as exc:
                if _too_long(exc):
                    raise ContextTooLong(
                        f"{endpoint} answered 400: {self._scrub(exc.message)}"
                    ) from None
                raise ModelError(
                    f"{endpoint} answered {exc.status_code}: {self._scrub(exc.message)}"
                ) from None
            except openai.APIError as exc:  # an error event in the stream
                raise ModelError(
                    f"{endpoint} reported an error mid-stream: {self._scrub(exc.message)}"
                ) from None
            finally:
                if on_unfinished is not None and (spent := heard.spent(messages)) is not None:
                    on_unfinished(spent)
            if attempt == cfg.max_retries:
                raise ModelError(f"{last}, {attempt + 1} attempts; giving up")
            backoff = min(cfg.max_backoff, 0.5 * 2**attempt) * (0.5 + random.random() / 2)
            delay = min(cfg.max_backoff, wait if wait is not None else backoff)
            logger.info("model: %s; retrying in %.1f s", what, delay)
            if on_retry is not None:
                on_retry(f"{what}; retrying in {delay:.1f} s (attempt {attempt + 2} of {attempts})")
            await asyncio.sleep(delay)
        raise AssertionError("unreachable")

    async def _stream(
        self,
        sdk: _Sdk,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]],
        on_text: Callable[[str], None] | None,
        heard: _Heard,
    ) -> Completion:
        """One request, read to its end under the three limits: `timeout` to the first chunk,
        `idle_timeout` between chunks, `deadline` for all of it. What it receives is kept in
        `heard` as it comes."""
        openai = _sdk()
        cfg = self.config
        # What `chat.completions.create(model=, messages=, stream=True, stream_options=,
        # tools=, max_completion_tokens=)` sends, in its order, without its transform (see the
        # module's docstring).
        body: dict[str, Any] = {"model": cfg.model, "stream": True, "messages": list(messages)}
        if cfg.max_output_tokens is not None:
            body["max_completion_tokens"] = cfg.max_output_tokens
        body["stream_options"] = {"include_usage": True}
        if tools:
            body["tools"] = list(tools)
        loop = asyncio.get_running_loop()
        end = loop.time() + cfg.deadline
        limit = "deadline" if cfg.timeout >= cfg.deadline else "first"
        result = Completion()
        calls, texts = heard.calls, heard.texts
        started = reported = False
        chunks = 0
        try:
            async with asyncio.timeout_at(min(loop.time() + cfg.timeout, end)) as timer:
                stream = await sdk.client.post(
                    "/chat/completions",
                    body=body,
                    options={"security": {"bearer_auth": True}},  # as `create` asks
                    cast_to=sdk.completion,
                    stream=True,
                    stream_cls=sdk.chunks,
                )
                try:
                    while True:
                        try:
                            chunk = await stream.__anext__()
                        except StopAsyncIteration:
                            break
                        except (ValueError, TypeError) as exc:  # json.JSONDecodeError
                            raise _Garbage(f"a stream event that is not JSON ({exc})") from None
                        chunks += 1
                        idle = loop.time() + cfg.idle_timeout
                        limit = "idle" if idle < end else "deadline"
                        timer.reschedule(min(idle, end))
                        piece = _read_chunk(chunk)
                        if piece.usage is not None:
                            result.usage = heard.usage = piece.usage
                            reported = True
                        if piece.texts or piece.calls:
                            started = True
                        for text in piece.texts:
                            texts.append(text)
                            if on_text:
                                on_text(text)
                        for index, call_id, name, arguments in piece.calls:
                            call = calls.setdefault(index, ToolCall(call_id or "", "", ""))
                            if call_id:
                                call.id = call_id
                            if name:
                                call.name = name
                            if arguments:
                                call.arguments += arguments
                        if piece.finish_reason:
                            result.finish_reason = piece.finish_reason
                except (openai.APIConnectionError, openai.APIStatusError) as exc:
                    if started:
                        raise _PartialOutput(_connection_words(exc)) from None
                    raise
                finally:
                    await stream.close()  # also on cancellation: the server sees the stream end
        except TimeoutError:
            if not timer.expired():
                raise
            raise _Silence(limit, chunks, started) from None
        if result.finish_reason is None:
            if chunks == 0:
                kind = stream.response.headers.get("content-type", "")
                if not kind.lower().startswith("text/event-stream"):
                    status = stream.response.status_code
                    raise _Garbage(
                        f"a {status} answer that is not a stream ({kind or 'no content type'})"
                    )
            raise _CutAfterOutput() if started else _Cut()
        result.text = "".join(texts)
        result.tool_calls = [calls[i] for i in sorted(calls)]
        # No usage, or none for a call that sent and got text: counted from the text instead, so
        # an endpoint that reports zeros cannot switch the caps off.
        said = result.text or result.tool_calls
        if (
            not reported
            or result.usage.prompt_tokens == 0
            or (said and result.usage.completion_tokens == 0)
        ):
            result.usage = _estimate(messages, result)
        heard.finished = True
        return result


REHEARSAL_HOST = "rehearsal.invalid"
_REHEARSAL = {
    "id": "rehearsal",
    "object": "chat.completion.chunk",
    "created": 0,
    "model": "rehearsal",
    "choices": [
        {
            "index": 0,
            "delta": {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "c",
                        "type": "function",
                        "function": {"name": "n", "arguments": "{}"},
                    }
                ],
            },
            "finish_reason": "stop",
        }
    ],
    "usage": {
        "prompt_tokens": 1,
        "completion_tokens": 1,
        "total_tokens": 2,
        "prompt_tokens_details": {"cached_tokens": 0},
    },
}


def _rehearsal_answer(request: Any) -> Any:
    import httpx2

    data = f"data: {json.dumps(_REHEARSAL)}\n\ndata: [DONE]\n\n".encode()
    return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=data)


async def _rehearse(sdk: _Sdk) -> None:
    """One streamed call as `_stream` makes it, through our own client, to a host its HTTP
    client answers in memory (no socket, no endpoint): what the SDK does at a process's and a
    client's first request (the platform read from the interpreter's binary, in a thread;
    anyio's event loop backend imported; the chunk types' validators built: some 30 ms) is
    done in the preparing thread, not in a task."""
    import anyio

    stream = await sdk.client.post(
        f"http://{REHEARSAL_HOST}/v1/chat/completions",
        body={"model": "rehearsal", "stream": True, "messages": []},
        options={"security": {"bearer_auth": True}},
        cast_to=sdk.completion,
        stream=True,
        stream_cls=sdk.chunks,
    )
    async for chunk in stream:
        _read_chunk(chunk)
    await anyio.sleep(0)  # the backend the HTTP client's connections use


@dataclass(frozen=True)
class _Sdk:
    """What a model call needs of the SDK: the client, and the types `create` passes along."""

    client: openai.AsyncOpenAI
    completion: type[Any]
    chunks: type[openai.AsyncStream[Any]]


@dataclass
class _Piece:
    """What one chunk carried, its types checked."""

    texts: list[str] = field(default_factory=list)
    calls: list[tuple[int, str | None, str | None, str | None]] = field(default_factory=list)
    finish_reason: str | None = None
    usage: Usage | None = None


def _read_chunk(chunk: Any) -> _Piece:
    """A chunk as `_Piece`. The SDK builds chunks without validating them, so a garbled one
    (a JSON number, a string where a list belongs) is refused here, as `_Garbage`, rather than
    failing somewhere later as an AttributeError."""
    piece = _Piece()
    try:
        usage = getattr(chunk, "usage", None)
        choices = getattr(chunk, "choices", None) or []
        if not isinstance(choices, list) or isinstance(chunk, list | str | int | float):
            raise TypeError("not a chunk")
        if usage is not None:
            details = usage.prompt_tokens_details
            cached = details.cached_tokens if details else 0
            try:
                piece.usage = Usage.checked(
                    usage.prompt_tokens, usage.completion_tokens, cached or 0
                )
            except ValueError as exc:
                raise _BadUsage(str(exc)) from None
        for choice in choices:  # empty on the usage chunk
            delta = choice.delta
            if delta is not None:
                if delta.content:
                    piece.texts.append(_string(delta.content))
                for tc in delta.tool_calls or []:
                    function = tc.function
                    index = tc.index
                    if isinstance(index, bool) or not isinstance(index, int):
                        raise TypeError("a tool call without an index")
                    piece.calls.append(
                        (
                            index,
                            _string(tc.id),
                            _string(function.name) if function else None,
                            _string(function.arguments) if function else None,
                        )
                    )
            if choice.finish_reason:
                piece.finish_reason = _string(choice.finish_reason)
    except (AttributeError, TypeError) as exc:
        raise _Garbage(f"a chunk that is not a chat completion chunk ({exc})") from None
    return piece


def _string(value: Any) -> Any:
    if value is not None and not isinstance(value, str):
        raise TypeError(f"{type(value).__name__} where text belongs")
    return value


def _connection_words(exc: Exception) -> str:
    """What the HTTP client saw under the SDK's error: "connection lost (ReadError)"."""
    cause = exc.__cause__ or exc.__context__
    if cause is None:
        return f"connection lost ({type(exc).__name__})"
    detail = f": {cause}" if str(cause) else ""
    return f"connection lost ({type(cause).__name__}{detail})"


@dataclass
class _Heard:
    """What one attempt has received so far: what it spent, if it ends unfinished."""

    texts: list[str] = field(default_factory=list)
    calls: dict[int, ToolCall] = field(default_factory=dict)
    usage: Usage | None = None  # the endpoint's own count
    finished: bool = False

    def spent(self, messages: Sequence[dict[str, Any]]) -> Usage | None:
        """None when it finished (the caller meters the result) or had no output."""
        if self.finished or not (self.texts or self.calls):
            return None
        if self.usage is not None:
            return self.usage
        partial = Completion("".join(self.texts), [self.calls[i] for i in sorted(self.calls)])
        return _estimate(messages, partial)


def _estimate(messages: Sequence[dict[str, Any]], result: Completion) -> Usage:
    """About four characters a token: enough for a cap to bite when an endpoint reports no
    usage, and marked as estimated."""
    sent = len(json.dumps(list(messages), ensure_ascii=False))
    got = len(result.text) + sum(len(c.name) + len(c.arguments) for c in result.tool_calls)
    return Usage(-(-sent // 4), -(-got // 4), 0, estimated=True)


class _PartialOutput(Exception):
    pass


class _Cut(Exception):
    """The stream ended (no error, no finish reason) before any output: safe to retry."""


class _CutAfterOutput(Exception):
    """The stream ended without a finish reason after output began: the connection dropped."""


class _Garbage(Exception):
    """The endpoint answered 200 with something that is not a chat completion stream."""


class _Silence(Exception):
    """A limit of `_stream` passed: `limit` is "first", "idle" or "deadline"."""

    def __init__(self, limit: str, chunks: int, started: bool) -> None:
        super().__init__(limit)
        self.limit, self.chunks, self.started = limit, chunks, started

    def describe(self, endpoint: str, cfg: ModelConfig) -> str:
        if self.limit == "first":
            return (
                f"no answer from {endpoint} within {cfg.timeout:g} s (modelTimeout); the "
                "request was abandoned"
            )
        if self.limit == "idle":
            began = "after output began" if self.started else "before any output"
            return (
                f"the stream from {endpoint} stalled: nothing for {cfg.idle_timeout:g} s "
                f"{began} (modelIdleTimeout); the request was abandoned"
            )
        return (
            f"the model call to {endpoint} was still going after {cfg.deadline:g} s, the "
            "most one call may take; the request was abandoned"
        )


class _BadUsage(Exception):
    pass
