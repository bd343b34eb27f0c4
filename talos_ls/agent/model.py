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
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import os
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..redact import add_secret, redact, redact_url
from .cost import Usage

logger = logging.getLogger(__name__)
DEFAULT_BASE_URL = "https://api.openai.com/v1"

if TYPE_CHECKING:
    import openai


def _sdk() -> Any:
    """The `openai` package, imported at the first model call: it costs 0.4 s and some 27 MB,
    which a language server should not pay to answer `initialize`."""
    import openai

    return openai


class ModelError(Exception):
    """The model could not be used; the message says what to fix (never the key)."""


@dataclass(frozen=True)
class ModelConfig:
    model: str
    base_url: str | None = None  # default: $OPENAI_BASE_URL, else OpenAI
    api_key_env: str = "OPENAI_API_KEY"
    max_retries: int = 3
    max_backoff: float = 30.0
    timeout: float = 120.0

    @property
    def endpoint(self) -> str:
        return self.base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL

    @property
    def shown_endpoint(self) -> str:
        """The endpoint as messages show it: without a password."""
        return redact_url(self.endpoint)


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
                {"id": c.id, "type": "function",
                 "function": {"name": c.name, "arguments": c.arguments}}
                for c in self.tool_calls
            ]  # fmt: skip
        return msg


def _retry_after(exc: openai.APIStatusError) -> float | None:
    value = exc.response.headers.get("retry-after") if exc.response is not None else None
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value)
        return max(0.0, parsed.timestamp() - time.time()) if parsed else None


class ModelClient:
    def __init__(self, config: ModelConfig) -> None:
        self.config = config
        self._key = os.environ.get(config.api_key_env) or ""
        add_secret(self._key)
        self._sdk_client: openai.AsyncOpenAI | None = None

    @property
    def _client(self) -> openai.AsyncOpenAI:
        if self._sdk_client is None:
            self._sdk_client = _sdk().AsyncOpenAI(
                api_key=self._key or "no-key",  # local servers need none; the SDK wants one
                base_url=self.config.endpoint,
                max_retries=0,  # retries are ours: bounded, honouring Retry-After, not mid-stream
                timeout=self.config.timeout,
            )
        return self._sdk_client

    async def probe(self) -> None:
        """One cheap request (the model list) to see that the endpoint answers and takes the
        key. Raises ModelError saying what is wrong."""
        endpoint = self.config.shown_endpoint
        openai = _sdk()
        try:
            await self._client.models.list()
        except openai.AuthenticationError:
            raise ModelError(f"{endpoint} rejected the API key (401)") from None
        except openai.APIConnectionError:
            raise ModelError(f"no connection to {endpoint}") from None
        except openai.APIStatusError as exc:
            raise ModelError(f"{endpoint} answered {exc.status_code}") from None

    def _scrub(self, text: str) -> str:
        return redact(text.replace(self._key, "***") if self._key else text)

    async def complete(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]] = (),
        on_text: Callable[[str], None] | None = None,
    ) -> Completion:
        """One model turn, streamed; `on_text` gets each piece of text as it arrives."""
        cfg = self.config
        endpoint = cfg.shown_endpoint
        openai = _sdk()
        for attempt in range(cfg.max_retries + 1):
            try:
                return await self._stream(messages, tools, on_text)
            except (openai.RateLimitError, openai.InternalServerError) as exc:
                wait = _retry_after(exc)
                what = f"{exc.status_code} from {endpoint}"
            except openai.APIConnectionError:
                wait, what = None, f"no connection to {endpoint}"
            except _PartialOutput as exc:
                raise ModelError(
                    f"the stream from {endpoint} broke after output began: {exc}"
                ) from None
            except _BadUsage as exc:
                raise ModelError(f"{endpoint} reported impossible usage ({exc}); the step is "
                                 "not counted and the task stops") from None  # fmt: skip
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
                raise ModelError(
                    f"{endpoint} answered {exc.status_code}: {self._scrub(exc.message)}"
                ) from None
            if attempt == cfg.max_retries:
                raise ModelError(f"{what}, {attempt + 1} attempts; giving up")
            backoff = min(cfg.max_backoff, 0.5 * 2**attempt) * (0.5 + random.random() / 2)
            delay = min(cfg.max_backoff, wait if wait is not None else backoff)
            logger.info("model: %s; retrying in %.1f s", what, delay)
            await asyncio.sleep(delay)
        raise AssertionError("unreachable")

    async def _stream(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]],
        on_text: Callable[[str], None] | None,
    ) -> Completion:
        openai = _sdk()
        kwargs: dict[str, Any] = {
            "model": self.config.model,
            "messages": list(messages),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if tools:
            kwargs["tools"] = list(tools)
        stream = await self._client.chat.completions.create(**kwargs)
        result = Completion()
        calls: dict[int, ToolCall] = {}
        texts: list[str] = []
        started = reported = False
        try:
            async for chunk in stream:
                if chunk.usage is not None:
                    details = chunk.usage.prompt_tokens_details
                    cached = details.cached_tokens if details else 0
                    try:
                        usage = Usage.checked(
                            chunk.usage.prompt_tokens, chunk.usage.completion_tokens, cached or 0
                        )
                    except ValueError as exc:
                        raise _BadUsage(str(exc)) from None
                    reported = True
                    result.usage = usage
                for choice in chunk.choices:  # empty on the usage chunk
                    delta = choice.delta
                    if delta.content:
                        started = True
                        texts.append(delta.content)
                        if on_text:
                            on_text(delta.content)
                    for tc in delta.tool_calls or []:
                        started = True
                        call = calls.setdefault(tc.index, ToolCall(tc.id or "", "", ""))
                        if tc.id:
                            call.id = tc.id
                        if tc.function and tc.function.name:
                            call.name = tc.function.name
                        if tc.function and tc.function.arguments:
                            call.arguments += tc.function.arguments
                    if choice.finish_reason:
                        result.finish_reason = choice.finish_reason
        except (openai.APIConnectionError, openai.APIStatusError) as exc:
            if started:
                raise _PartialOutput(type(exc).__name__) from None
            raise
        finally:
            await stream.close()  # also on cancellation: the server sees the stream end
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
        return result


def _estimate(messages: Sequence[dict[str, Any]], result: Completion) -> Usage:
    """About four characters a token: enough for a cap to bite when an endpoint reports no
    usage, and marked as estimated."""
    sent = len(json.dumps(list(messages), ensure_ascii=False))
    got = len(result.text) + sum(len(c.name) + len(c.arguments) for c in result.tool_calls)
    return Usage(-(-sent // 4), -(-got // 4), 0, estimated=True)


class _PartialOutput(Exception):
    pass


class _BadUsage(Exception):
    pass
