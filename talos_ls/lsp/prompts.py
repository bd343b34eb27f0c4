"""Deferred prompts: a question or a permission prompt the person answers later, by command.

A client whose `window/showMessageRequest` handler must reply at once (Neovim 0.7: its handlers
are synchronous, so it cannot wait for a picker) says `initializationOptions.deferredPrompts:
true`. Its prompts then come as the notification `talos/prompt {prompt_id, kind, message,
actions, task_id}` (`task_id` null for a prompt of no task's) and are answered with the command
`talos.prompt.answer {prompt_id, choice}`, with the semantics of `window/showMessageRequest`:
the prompt waits at most `promptTimeout` seconds; a null choice, a choice that is none of the
actions, or no answer in time is a dismissal (never an answer: a question is cooled, a
permission is denied). A prompt is answered once: a second answer, an answer after the
timeout, or an id never sent is refused by name. A prompt that ends without an answer (timed
out, or its task cancelled) is closed with `talos/promptClosed {prompt_id, reason}` so the
client can drop its picker.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..agent import tasks
from .daemon import Params, ParamsError

PROMPT = "talos/prompt"
CLOSED = "talos/promptClosed"


@dataclass
class _Open:
    future: asyncio.Future[str | None]
    actions: tuple[str, ...]


class PromptBook:
    """The prompts sent and not yet answered, by id (random: an id is never guessed)."""

    def __init__(self, send: Callable[[str, Any], None]) -> None:
        self._send = send
        self._open: dict[str, _Open] = {}

    async def ask(
        self, kind: str, message: str, actions: Sequence[str], timeout: float
    ) -> str | None:
        """Send the prompt and wait for its answer: an action's title, or None (dismissed,
        unanswered within `timeout` seconds, or cancelled)."""
        prompt_id = "q" + secrets.token_hex(8)
        entry = _Open(asyncio.get_running_loop().create_future(), tuple(actions))
        self._open[prompt_id] = entry
        reason = "cancelled"
        try:
            self._send(
                PROMPT,
                {
                    "prompt_id": prompt_id,
                    "kind": kind,
                    "message": message,
                    "actions": list(actions),
                    "task_id": tasks.CURRENT.get(),  # None: no task's (trusting a folder)
                },
            )
            try:
                return await asyncio.wait_for(asyncio.shield(entry.future), timeout)
            except TimeoutError:
                reason = "timeout"
                return None
        finally:
            if self._open.pop(prompt_id, None) is not None:  # ended unanswered
                self._send(CLOSED, {"prompt_id": prompt_id, "reason": reason})

    def answer(self, p: Params) -> dict[str, Any]:
        """`talos.prompt.answer`: the person's choice for an open prompt. A choice that is no
        action dismisses it, as a null one does."""
        prompt_id = p.get("prompt_id", str, required=True)
        choice = p.get("choice", str)
        entry = self._open.pop(prompt_id, None)
        if entry is None or entry.future.done():
            raise ParamsError(
                f"{p.command}: the field 'prompt_id' names no open prompt (it was "
                "answered, timed out, or never asked)"
            )
        chosen = choice if choice in entry.actions else None
        entry.future.set_result(chosen)
        return {"prompt_id": prompt_id, "choice": chosen, "dismissed": chosen is None}
