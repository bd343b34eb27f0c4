"""A write the store refuses by a rule of the data (a fact's key already there: two processes
adding the same fact) is the caller's business, not a storage fault: the daemon's store
health stays available, and no 'unavailable' message is sent."""

from __future__ import annotations

import pytest

from talos_ls.lsp.health import GuardedStore, StoreHealth
from talos_ls.memory.facts import FactStore
from talos_ls.store import StoreError, faults


async def _nothing() -> None:
    return None


def test_a_key_already_there_is_refused_not_a_fault(store, store_url):
    said: list[str] = []
    health = StoreHealth(store_url, said.append, lambda: None, _nothing, _nothing)
    guarded = GuardedStore(store, health)
    key = FactStore(store).add("a1", "deploys use fly", key="fact:fixed")
    with pytest.raises(StoreError) as raised:
        guarded.fact_insert(store.fact_get(key))
    assert raised.value.reason == faults.REFUSED
    assert health.available and said == []
    assert guarded.fact_get(key)["statement"] == "deploys use fly"  # still served
