"""The scripted model and the small workspace of the language-server tests."""

import pytest

from ..conftest import process_backends
from ..lsp.conftest import model, ws

__all__ = ["model", "ws"]


@pytest.fixture(params=process_backends())
def backend(request) -> str:
    """SQLite on every run, the Redis family with --full (tests/conftest.py)."""
    return request.param
