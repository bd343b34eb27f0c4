"""The scripted model and the small workspace of the language-server tests."""

import pytest

from ..conftest import full_tier_backends
from ..lsp.conftest import model, ws

__all__ = ["model", "ws"]


@pytest.fixture(params=full_tier_backends())
def backend(request) -> str:
    """SQLite and Redis on every run, a Cluster and Valkey with --full (tests/conftest.py)."""
    return request.param
