"""Settings shared by every test."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch


@pytest.fixture(autouse=True, scope="session")
def _one_thread():
    """Small networks: one torch thread (on a busy 2-core machine, 2 threads spin ~500x slower)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


SLOW_CASES = Path(__file__).with_name("slow_cases.txt")
"""Test cases measured slow (node ids, one per line, ``#`` comments): the default run leaves
them to ``pytest -m slow`` like the tests marked ``@pytest.mark.slow`` in their modules."""


def slow_cases() -> frozenset[str]:
    """The node ids listed in :data:`SLOW_CASES`, without comments and blank lines."""
    lines = SLOW_CASES.read_text(encoding="utf-8").splitlines()
    return frozenset(s for line in lines if (s := line.split("  #", 1)[0].strip()) and s[0] != "#")


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the listed cases slow."""
    listed = slow_cases()
    for item in items:
        if item.nodeid in listed:
            item.add_marker(pytest.mark.slow)
