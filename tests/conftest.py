"""Settings shared by every test."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True, scope="session")
def _one_thread():
    """Small networks: one torch thread (on a busy 2-core machine, 2 threads spin ~500x slower)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
