"""One BLAS thread for small dense calls (gdln/_runtime/_blas.py; issue 38 part 3).

Properties, never timings: inside the rule threadpoolctl reports every loaded BLAS
library on one thread, and on leaving each is back at what it had; the pipelines' small
dense calls (hidden bases, the simulation's initial QR, the time scales) run inside it.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg  # noqa: F401  (scipy's own BLAS, loaded after numpy's)
from threadpoolctl import threadpool_info, threadpool_limits

from gdln._runtime._blas import SMALL_SIDE, blas_threads, one_blas_thread


def _blas_threads() -> list[int]:
    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


@pytest.fixture
def two_threads():
    """Every BLAS library on two threads (the machine's default here), whatever the host."""
    with threadpool_limits(limits=2, user_api="blas"):
        assert _blas_threads() and set(_blas_threads()) == {2}
        yield


def test_inside_the_rule_every_blas_has_one_thread_and_is_restored(two_threads):
    with one_blas_thread():
        assert set(_blas_threads()) == {1}
        with one_blas_thread():  # nested: still one, and the inner exit restores nothing
            assert set(_blas_threads()) == {1}
        assert set(_blas_threads()) == {1}
    assert set(_blas_threads()) == {2}


def test_restored_after_an_error(two_threads):
    with pytest.raises(ZeroDivisionError), one_blas_thread():
        1 / 0  # noqa: B018
    assert set(_blas_threads()) == {2}


def test_as_a_decorator(two_threads):
    @one_blas_thread()
    def inside() -> list[int]:
        return _blas_threads()

    assert set(inside()) == {1}
    assert set(_blas_threads()) == {2}


def test_large_matrices_keep_their_threads(two_threads):
    with blas_threads(SMALL_SIDE):
        assert set(_blas_threads()) == {1}
    with blas_threads(SMALL_SIDE + 1):
        assert set(_blas_threads()) == {2}


def test_a_library_loaded_later_is_limited_too(two_threads):
    """The libraries are found again when a module that brings a BLAS was imported since."""
    import torch  # noqa: F401  (may bring a BLAS of its own)

    with threadpool_limits(limits=2, user_api="blas"), one_blas_thread():
        assert set(_blas_threads()) == {1}


def _threads_seen_by(monkeypatch, name: str) -> list[list[int]]:
    """The BLAS thread counts in force at each call of ``numpy.linalg.<name>``."""
    seen: list[list[int]] = []
    inner = getattr(np.linalg, name)

    def spy(*args, **kwargs):
        seen.append(_blas_threads())
        return inner(*args, **kwargs)

    monkeypatch.setattr(np.linalg, name, spy)
    return seen


def test_hidden_bases_and_initial_weights_run_on_one_thread(two_threads, monkeypatch):
    import networkx as nx

    from gdln.reduction._decoupled import hidden_bases
    from gdln.simulation._init import DRAWS

    seen = _threads_seen_by(monkeypatch, "qr")
    graph = nx.DiGraph()
    graph.add_node("x", size=3)
    graph.add_node("h", size=16)
    graph.add_node("y", size=2)
    graph.add_edges_from([("x", "h"), ("h", "y")])
    bases = hidden_bases(graph, seed=0)
    np.testing.assert_allclose(bases["h"].T @ bases["h"], np.eye(16), atol=1e-12)
    rng = np.random.default_rng(0)
    for name in ("singular", "orthogonal"):
        draw = DRAWS[name]
        assert draw is not None
        draw(rng, 16, 5, 0.1)
    assert len(seen) == 4  # hidden_bases' one, singular's two, orthogonal's one
    assert all(set(threads) == {1} for threads in seen), seen
    assert set(_blas_threads()) == {2}


def test_time_scales_run_on_one_thread(two_threads, monkeypatch):
    import gdln

    seen = _threads_seen_by(monkeypatch, "svd")
    gdln.timescales(gdln.load("graphs/xor.yaml"), b0=1e-3)
    assert seen and all(set(threads) == {1} for threads in seen), seen
    assert set(_blas_threads()) == {2}
