"""The scripted model and the small workspace of the language-server tests."""

from ..lsp.conftest import model, ws

__all__ = ["model", "ws"]
