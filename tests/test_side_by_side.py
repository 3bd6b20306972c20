"""Figures drawn side by side in forked processes (``gdln/_runtime/_fork.py``, issue 25).

The reference is the same jobs run one after another in this process: the files, their
order and a failing job's error must not depend on where a job ran.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from gdln._runtime import _fork as figures
from gdln._runtime._fork import side_by_side as draw_side_by_side

LINUX_TWO_CORES = sys.platform.startswith("linux") and len(os.sched_getaffinity(0)) >= 2


# the suite may have left threads running; a child here only writes a file and exits
FORK_WITH_THREADS = pytest.mark.filterwarnings(
    "ignore:This process .* is multi-threaded:DeprecationWarning"
)


def _job(folder: Path, name: str):  # type: ignore[no-untyped-def]
    def write() -> list[Path]:
        path = folder / name
        path.write_text(str(os.getpid()))
        return [path]

    return write


CHILDREN = """
import os, sys
from pathlib import Path
from gdln._runtime._fork import side_by_side as draw_side_by_side
folder = Path(sys.argv[1])
def job(name):
    def write():
        path = folder / name
        path.write_text(str(os.getpid()))
        return [path]
    return write
written = draw_side_by_side([job(n) for n in ("a", "b", "c")])
print(os.getpid(), *[p.name for p in written])
"""


@pytest.mark.skipif(not LINUX_TWO_CORES, reason="forks only on Linux with two cores")
def test_all_but_the_last_job_run_in_children_and_the_files_keep_their_order(
    tmp_path: Path,
) -> None:
    """In a fresh interpreter (one thread, as ``gdln compare`` is when it draws)."""
    run = subprocess.run(
        [sys.executable, "-c", CHILDREN, str(tmp_path)], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    pid, *names = run.stdout.split()
    assert names == ["a", "b", "c"]
    pids = [(tmp_path / n).read_text() for n in names]
    assert pids[-1] == pid and len({*pids}) == 3


def test_with_another_thread_running_every_job_runs_here(tmp_path: Path) -> None:
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        written = draw_side_by_side([_job(tmp_path, n) for n in ("a", "b")])
    finally:
        stop.set()
        other.join()
    assert [int(p.read_text()) for p in written] == [os.getpid(), os.getpid()]


@FORK_WITH_THREADS
def test_a_job_that_fails_in_its_child_is_run_here_and_raises(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(figures, "can_fork", lambda: True)
    calls = []

    def failing() -> list[Path]:
        calls.append(os.getpid())
        raise ValueError("no figure")

    with pytest.raises(ValueError, match="no figure"):
        draw_side_by_side([failing, _job(tmp_path, "b")])
    assert calls == [os.getpid()]  # the child's attempt is not seen here; this one raised
    assert int((tmp_path / "b").read_text()) == os.getpid()


@FORK_WITH_THREADS
def test_compare_writes_the_same_figures_whether_drawn_side_by_side_or_in_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gdln

    problem = gdln.load(Path(__file__).parents[1] / "graphs" / "routing.yaml",
                        params={"M": 3, "K": 2, "hidden": 5})  # fmt: skip
    kw = dict(lr=0.05, t_max=2.0, seeds=2, points=11)
    monkeypatch.setattr(figures, "can_fork", lambda: True)
    side = gdln.compare(problem, tmp_path / "side", **kw)
    monkeypatch.setattr(figures, "can_fork", lambda: False)
    turn = gdln.compare(problem, tmp_path / "turn", **kw)
    assert [f.name for f in side.files] == [f.name for f in turn.files]
    for name in ("loss.png", "singular_values.png"):
        assert (tmp_path / "side" / name).read_bytes() == (tmp_path / "turn" / name).read_bytes()
