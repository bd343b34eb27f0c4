"""The real `talos-ls` against a scripted model that misbehaves (see tests/lsp/conftest.py for
the editor). A test's options make the timeout it is about small, so a hang ends in about a
second."""

from __future__ import annotations

from typing import Any

import pytest

from ..lsp.conftest import model, start_editor, ws

__all__ = ["model", "ws"]  # the scripted model and the small workspace

# Seconds. The timeout a test is about is the smallest the settings take (1 s); the others are
# long, so a loaded machine slow to answer is not taken for the fault under test.
PATIENT = {"modelTimeout": 60, "modelIdleTimeout": 60}
QUICK_IDLE = {**PATIENT, "modelIdleTimeout": 1}  # a stream that stalls after output began
QUICK_FIRST_BYTE = {**PATIENT, "modelTimeout": 1}  # an endpoint that never answers


@pytest.fixture
def base_options(tmp_path, model) -> dict[str, Any]:
    return {
        "model": "fake-model",
        "baseUrl": model.url,
        "storeUrl": "sqlite:///" + str(tmp_path / "talos.db"),
        "prices": {"fake-model": {"input": 1, "cached_input": 0.5, "output": 2}},
    }


@pytest.fixture
async def launch(tmp_path, ws):
    """Start talos-ls with the given options; each one is shut down at the end."""
    editors = []

    async def launch(options: dict[str, Any]):
        editor = await start_editor(tmp_path / f"home{len(editors)}", [ws], options)
        editors.append(editor)
        await editor.until(lambda: any(s.folders for s in editor.statuses), "the first status")
        return editor

    yield launch
    for editor in editors:
        await editor.stop()
