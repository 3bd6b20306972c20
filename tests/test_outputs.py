"""Outputs appear whole or not at all, and nothing is replaced without --force (issue 22, §5).

Each property is checked on the files themselves (their bytes, the folder's listing, the
hidden temporary names beside them), under the failures that break it: a write that
fails half way, a full disk, an output that another run writes at the same moment, a
read-only folder, SIGKILL, SIGINT and SIGTERM. The races are made deterministic with a
barrier that holds every writer just before it moves its output into place.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from helpers import GRAPHS, run_cli

import gdln

CHAIN = str(GRAPHS / "chain.yaml")
COMPARE_FILES = (  # what gdln compare writes (docs/guide/simulate_compare.md)
    "loss.png",
    "loss.svg",
    "singular_values.png",
    "singular_values.svg",
    "metrics.json",
    "theory_ode.npz",
    "theory_map.npz",
    "sim_decoupled.npz",
    "sim_random.npz",
)
ROUTING = str(GRAPHS / "routing.yaml")
SMALL = ["--param", "M=2", "--param", "K=1", "--param", "hidden=4"]
LINUX = sys.platform.startswith("linux")


def hidden(folder: Path) -> list[str]:
    """The temporary names gdln leaves beside its outputs, if any."""
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def snapshot(folder: Path) -> dict[str, bytes | None]:
    """Every entry under ``folder`` with its bytes (``None`` for a folder)."""
    return {
        str(p.relative_to(folder)): None if p.is_dir() else p.read_bytes()
        for p in sorted(folder.rglob("*"))
    }


def unwritable_folder() -> Path:
    """A folder that this process cannot create files in, even as root (Linux: /sys)."""
    folder = Path("/sys")
    if not folder.is_dir():
        pytest.skip("no /sys")
    try:
        (folder / "gdln-probe").touch()
    except OSError:
        return folder
    pytest.skip("/sys is writable here")


# ----------------------------------------------------------------------------- files


def test_a_file_is_written_whole_and_never_replaced_without_force(tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    with gdln.outputs.atomic_file(out) as temporary:
        assert temporary.parent == tmp_path and temporary.name.startswith(".out.txt.gdln-tmp-")
        temporary.write_text("first")
        assert not out.exists()  # nothing at the final name until the block ends
    assert out.read_text() == "first"
    with (
        pytest.raises(FileExistsError, match=r"out\.txt exists; pass force=True"),
        gdln.outputs.atomic_file(out) as temporary,
    ):
        temporary.write_text("second")
    assert out.read_text() == "first"
    with gdln.outputs.atomic_file(out, force=True) as temporary:
        temporary.write_text("third")
    assert out.read_text() == "third"
    assert hidden(tmp_path) == []
    assert oct(out.stat().st_mode & 0o777) == oct(0o666 & ~_umask())


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_an_error_while_writing_leaves_the_old_file(tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    out.write_text("old")
    with pytest.raises(RuntimeError), gdln.outputs.atomic_file(out, force=True) as temporary:
        temporary.write_text("half")
        raise RuntimeError
    assert out.read_text() == "old" and hidden(tmp_path) == []


def test_a_full_disk_names_the_output(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    with pytest.raises(gdln.outputs.OutputError) as caught, gdln.outputs.atomic_file(out):
        raise full
    assert str(caught.value) == f"{out}: cannot write: No space left on device"
    assert list(tmp_path.iterdir()) == []
    folder = tmp_path / "result"
    with (
        pytest.raises(gdln.outputs.OutputError) as caught,
        gdln.outputs.atomic_folder(folder) as temporary,
    ):
        (temporary / "a.txt").write_text("1")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(temporary / "b.npz"))
    assert str(caught.value) == f"{folder / 'b.npz'}: cannot write: No space left on device"
    assert list(tmp_path.iterdir()) == []


def _race(write, n: int = 2) -> list[BaseException | None]:
    """Run ``write(k, wait)`` in ``n`` threads, each calling ``wait()`` just before its
    output is moved into place; return what each raised."""
    barrier = threading.Barrier(n, timeout=30)
    results: list[BaseException | None] = [None] * n

    def run(k: int) -> None:
        try:
            write(k, barrier.wait)
        except BaseException as err:  # collected for the test to look at
            results[k] = err

    threads = [threading.Thread(target=run, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def test_two_writers_of_one_file_never_both_succeed(tmp_path: Path) -> None:
    out = tmp_path / "out.txt"

    def write(k: int, wait) -> None:
        with gdln.outputs.atomic_file(out) as temporary:
            temporary.write_text(f"writer {k}")
            wait()  # both have checked and written; both now try to move into place

    results = _race(write)
    failed = [r for r in results if r is not None]
    assert len(failed) == 1 and isinstance(failed[0], gdln.outputs.OutputExistsError)
    winner = results.index(None)
    assert out.read_text() == f"writer {winner}" and hidden(tmp_path) == []


def test_two_writers_of_one_folder_never_both_succeed(tmp_path: Path) -> None:
    out = tmp_path / "result"

    def write(k: int, wait) -> None:
        with gdln.outputs.atomic_folder(out) as temporary:
            for name in ("a.txt", "b.txt"):
                (temporary / name).write_text(f"writer {k}")
            wait()

    results = _race(write)
    failed = [r for r in results if r is not None]
    assert len(failed) == 1 and isinstance(failed[0], gdln.outputs.OutputExistsError)
    winner = f"writer {results.index(None)}"
    assert snapshot(out) == {"a.txt": winner.encode(), "b.txt": winner.encode()}
    assert hidden(tmp_path) == []


# ----------------------------------------------------------------------------- folders


def _user_folder(folder: Path) -> None:
    folder.mkdir()
    (folder / "a.txt").write_text("old a")
    (folder / "notes.txt").write_text("the user's notes")
    (folder / "sub").mkdir()
    (folder / "sub" / "data.txt").write_text("the user's data")
    (folder / "link").symlink_to("notes.txt")
    folder.chmod(0o750)


def test_force_swaps_in_a_whole_folder_and_keeps_the_users_other_entries(tmp_path: Path) -> None:
    out = tmp_path / "result"
    _user_folder(out)
    with (
        pytest.raises(gdln.outputs.OutputExistsError, match=r"result exists"),
        gdln.outputs.atomic_folder(out) as temporary,
    ):
        (temporary / "a.txt").write_text("new a")
    with gdln.outputs.atomic_folder(out, force=True) as temporary:
        (temporary / "a.txt").write_text("new a")
        (temporary / "b.txt").write_text("new b")
    assert snapshot(out) == {
        "a.txt": b"new a",
        "b.txt": b"new b",
        "link": b"the user's notes",
        "notes.txt": b"the user's notes",
        "sub": None,
        "sub/data.txt": b"the user's data",
    }
    assert (out / "link").is_symlink() and os.readlink(out / "link") == "notes.txt"
    assert out.stat().st_mode & 0o777 == 0o750
    assert hidden(tmp_path) == []


def test_named_outputs_refuse_only_their_own_names(tmp_path: Path) -> None:
    out = tmp_path / "result"
    _user_folder(out)
    with gdln.outputs.atomic_folder(out, names=("b.txt",)) as temporary:
        (temporary / "b.txt").write_text("new b")  # nothing named b.txt there: allowed
    assert (out / "b.txt").read_text() == "new b" and (out / "a.txt").read_text() == "old a"
    with (
        pytest.raises(gdln.outputs.OutputExistsError, match=r"result/b\.txt exists"),
        gdln.outputs.atomic_folder(out, names=("b.txt",)) as temporary,
    ):
        (temporary / "b.txt").write_text("newer b")
    assert (out / "b.txt").read_text() == "new b" and hidden(tmp_path) == []


def test_a_failed_swap_leaves_the_old_folder(tmp_path: Path, monkeypatch) -> None:
    out = tmp_path / "result"
    _user_folder(out)
    before = snapshot(out)
    real_rename = os.rename

    def rename(source, target):
        if Path(target) == out and ".gdln-tmp-" in str(source):  # the new folder cannot move in
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return real_rename(source, target)

    monkeypatch.setattr(os, "rename", rename)
    with (
        pytest.raises(gdln.outputs.OutputError, match=r"result: cannot be replaced: .*nothing"),
        gdln.outputs.atomic_folder(out, force=True) as temporary,
    ):
        (temporary / "a.txt").write_text("new a")
    assert snapshot(out) == before and hidden(tmp_path) == []


def test_the_current_folder_is_never_replaced(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    for target in (".", str(tmp_path.parent)):
        with pytest.raises(gdln.outputs.OutputError, match="is the current folder or holds it"):
            gdln.outputs.check_folder(target, force=True)


# ----------------------------------------------------------------------------- stale temporaries

KILLED_WRITER = """\
import os, sys, time
from pathlib import Path
import gdln

real_rename = os.rename
def rename(source, target):
    real_rename(source, target)
    if ".gdln-old-" in str(target):  # killed between the two renames of a swap
        print("swapping", flush=True)
        time.sleep(60)
os.rename = rename

folder = Path(sys.argv[1])
with gdln.outputs.atomic_file(folder / "run.npz") as temporary:
    temporary.write_bytes(b"x" * 10**6)
    with gdln.outputs.atomic_folder(folder / "result", force=True) as inner:
        (inner / "a.txt").write_text("new a")
        if sys.argv[2] == "write":
            print("writing", flush=True)
            time.sleep(60)
"""


def _killed_while(stage: str, folder: Path) -> None:
    """Start a writer into ``folder``, SIGKILL it at ``stage``, wait for it to end."""
    writer = subprocess.Popen(
        [sys.executable, "-c", KILLED_WRITER, str(folder), stage],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert writer.stdout is not None
    assert writer.stdout.readline().strip() == ("writing" if stage == "write" else "swapping")
    writer.kill()
    writer.wait()


def test_temporaries_of_a_killed_run_are_removed_by_the_next_one(tmp_path: Path) -> None:
    (tmp_path / "result").mkdir()
    (tmp_path / "result" / "a.txt").write_text("old a")
    _killed_while("write", tmp_path)
    left = hidden(tmp_path)
    assert len(left) == 2 and all(".gdln-tmp-" in name for name in left)
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:  # a temporary name of a live process is left alone
        alive = tmp_path / f"{left[0].split('-tmp-')[0]}-tmp-{left[0].split('-')[2]}-{live.pid}-x1"
        alive.write_text("being written")
        gdln.outputs.check_file(tmp_path / "other.json")
        assert hidden(tmp_path) == [alive.name]
    finally:
        live.kill()
        live.wait()
    assert (tmp_path / "result" / "a.txt").read_text() == "old a"
    assert not (tmp_path / "run.npz").exists()


def test_a_folder_set_aside_by_a_killed_swap_is_put_back(tmp_path: Path) -> None:
    out = tmp_path / "result"
    out.mkdir()
    (out / "a.txt").write_text("old a")
    (out / "keep.txt").write_text("kept")
    _killed_while("swap", tmp_path)
    assert not out.exists()  # killed between the renames: the old folder is aside
    assert any(".gdln-old-" in name for name in hidden(tmp_path))
    gdln.outputs.remove_stale(tmp_path)
    assert snapshot(out) == {"a.txt": b"old a", "keep.txt": b"kept"}
    assert hidden(tmp_path) == []


SLOW_WRITE = """\
import sys, time
from pathlib import Path
real = Path.write_text
def write_text(self, *args, **kwargs):
    real(self, *args, **kwargs)
    print("written", flush=True)
    time.sleep(60)
Path.write_text = write_text
import runpy
sys.argv = ["gdln", *sys.argv[1:]]
runpy.run_module("gdln", run_name="__main__")  # the program itself
"""


def test_the_command_line_cleans_up_after_a_killed_run(tmp_path: Path) -> None:
    argv = ["solve", CHAIN, "--t-max", "1", "--points", "3"]
    run = subprocess.Popen(
        [sys.executable, "-c", SLOW_WRITE, *argv, "-o", str(tmp_path / "a.json")],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert run.stdout is not None and run.stdout.readline().strip() == "written"
    run.kill()
    run.wait()
    assert len(hidden(tmp_path)) == 1  # the killed run's temporary file
    again = subprocess.run(
        [sys.executable, "-m", "gdln", *argv, "-o", str(tmp_path / "b.json")],
        capture_output=True,
        text=True,
    )
    assert again.returncode == 0, again.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.json"]


# ----------------------------------------------------------------------------- command line


def test_compare_force_replaces_the_folder_whole(tmp_path: Path, capsys) -> None:
    out = tmp_path / "cmp"
    out.mkdir()
    for name in COMPARE_FILES:
        (out / name).write_text("old")
    (out / "metrics.json").unlink()
    (out / "metrics.json").mkdir()  # an entry that a file cannot replace in place
    (out / "metrics.json" / "x").write_text("old")
    (out / "notes.txt").write_text("the user's notes")
    argv = ["compare", ROUTING, *SMALL, "--t-max", "0.5", "--seeds", "2", "--no-progress"]
    code, _, err = run_cli([*argv, "-o", str(out), "--force"], capsys)
    assert code == 0, err
    assert sorted(p.name for p in out.iterdir()) == sorted([*COMPARE_FILES, "notes.txt"])
    assert all((out / name).read_bytes() != b"old" for name in COMPARE_FILES)
    assert json.loads((out / "metrics.json").read_text())["steps"] == 10
    assert (out / "notes.txt").read_text() == "the user's notes" and hidden(tmp_path) == []


RACING_SOLVE = """\
import os, sys, tempfile, time
gate, me = sys.argv[1], sys.argv[2]
real = tempfile.mkstemp
def mkstemp(*args, **kwargs):
    made = real(*args, **kwargs)
    if kwargs.get("suffix") == ".json":  # the output is written: wait for the other run
        open(os.path.join(gate, me), "w").close()
        deadline = time.time() + 60
        while len(os.listdir(gate)) < 2 and time.time() < deadline:
            time.sleep(0.01)
    return made
tempfile.mkstemp = mkstemp
import runpy
sys.argv = ["gdln", *sys.argv[3:]]
runpy.run_module("gdln", run_name="__main__")
"""


def test_two_commands_racing_for_one_output_never_both_succeed(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    gate.mkdir()
    out = tmp_path / "out.json"
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", RACING_SOLVE, str(gate), str(k), "solve", CHAIN,
             "--t-max", "1", "--points", "3", "--b0", f"0.{k + 1}", "-o", str(out)],
            stderr=subprocess.PIPE,
            text=True,
        )
        for k in range(2)
    ]  # fmt: skip
    results = [(run.wait(timeout=120), run.stderr.read()) for run in runs if run.stderr]
    codes = sorted(code for code, _ in results)
    assert codes == [0, 2], results
    loser = next(err for code, err in results if code == 2)
    assert loser == f"gdln: error: {out} exists; pass --force to replace it\n"
    winner = results.index(next(r for r in results if r[0] == 0))
    written = json.loads(out.read_text())
    assert written["variables"]["B1"][0][0] == pytest.approx(0.1 * (winner + 1))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gate", "out.json"]


WRITERS = {  # every command that writes, with its -o
    "graphs": ["graphs", "-o", "{folder}/out.json"],
    "paths": ["paths", CHAIN, "-o", "{folder}/out.json"],
    "stats": ["stats", CHAIN, "-o", "{folder}/out.tex"],
    "derive": ["derive", CHAIN, "-o", "{folder}/out.txt"],
    "solve": ["solve", CHAIN, "-o", "{folder}/out.json"],
    "timescales": ["timescales", CHAIN, "-o", "{folder}/out.json"],
    "schedule": ["schedule", CHAIN, "-o", "{folder}/out.json"],
    "simulate": ["simulate", CHAIN, "-o", "{folder}/out.npz"],
    "compare": ["compare", CHAIN, "-o", "{folder}/gdln-compare-out"],
    "extract": ["extract", "run.npz", "-o", "{folder}/out.yaml"],
    "plot": ["plot", "result.json", "-o", "{folder}/out.png"],
    "kernel": ["kernel", "-n", "10", "-o", "{folder}/gdln-kernel-out"],
    "sd": ["sd", "-o", "{folder}/out.json"],
    "schema": ["schema", "-o", "{folder}/out.json"],
}


def test_every_command_that_writes_is_listed() -> None:
    from gdln.cli._main import COMMANDS

    assert sorted(WRITERS) == sorted(COMMANDS)


@pytest.mark.parametrize("command", WRITERS.values(), ids=WRITERS.keys())
def test_an_unwritable_folder_is_refused_before_computing(command, monkeypatch, capsys) -> None:
    folder = unwritable_folder()

    def computed(*args, **kwargs):
        raise AssertionError("computed before checking the output folder")

    for name in ("load", "reduce", "simulate", "compare", "extract"):
        monkeypatch.setattr(gdln, name, computed)
    monkeypatch.setattr(gdln.kernels, "kernel_spectrum", computed)
    monkeypatch.setattr(gdln.sd, "chain_summary", computed)
    monkeypatch.setattr(gdln.graphfile, "schema", computed)
    argv = [part.format(folder=folder) for part in command]
    code, out, err = run_cli(argv, capsys)
    assert (code, out) == (2, "")
    assert (
        err.startswith(f"gdln: error: {folder}/") and f"cannot write in the folder {folder}" in err
    )
    assert err.count("\n") == 1


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root writes anywhere")
def test_a_read_only_folder_is_refused_before_computing(tmp_path: Path, capsys) -> None:
    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(0o555)
    code, _, err = run_cli(["solve", CHAIN, "-o", str(folder / "out.json")], capsys)
    assert code == 2 and "cannot write in the folder" in err and "Permission denied" in err


def test_a_full_disk_on_the_command_line_names_the_file(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    def full(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(Path, "write_text", full)
    out = tmp_path / "out.json"
    code, _, err = run_cli(["solve", CHAIN, "--t-max", "1", "-o", str(out)], capsys)
    assert code == 2
    assert err == f"gdln: error: {out}: cannot write: No space left on device\n"
    assert list(tmp_path.iterdir()) == []


def test_a_full_disk_in_compare_names_the_file(tmp_path: Path, monkeypatch, capsys) -> None:
    def full(file, *args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(np, "savez", full)
    out = tmp_path / "cmp"
    argv = ["compare", ROUTING, *SMALL, "--t-max", "0.5", "--seeds", "2", "--no-progress"]
    code, _, err = run_cli([*argv, "-o", str(out)], capsys)
    assert code == 2
    assert err.splitlines()[-1] == (
        f"gdln: error: {out}/theory_ode.npz: cannot write: No space left on device"
    )
    assert list(tmp_path.iterdir()) == []


# ----------------------------------------------------------------------------- signals


def _handling_signals(pid: int, timeout: float = 20.0) -> bool:
    """Wait until process ``pid`` catches SIGTERM (gdln's handler is in place)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            return False
        caught = next(line for line in status.splitlines() if line.startswith("SigCgt:"))
        if int(caught.split()[1], 16) >> (signal.SIGTERM - 1) & 1:
            return True
        time.sleep(0.002)
    return False


LONG_SOLVE = [
    "solve",
    CHAIN,
    "--dynamics",
    "gd-map",
    "--lr",
    "0.0001",
    "--t-max",
    "900",
    "--points",
    "3",
]


def _signalled(signum: int, delay: float, argv: list[str], folder: Path) -> tuple[int, str]:
    """Run ``gdln ARGV`` (with ``-o`` in ``folder``), send ``signum`` ``delay`` s after its
    handler is in place (``delay < 0``: right after the process starts)."""
    run = subprocess.Popen(
        [sys.executable, "-m", "gdln", *argv, "-o", str(folder / "out.json")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    if delay >= 0:
        _handling_signals(run.pid)
        time.sleep(delay)
    run.send_signal(signum)
    _, err = run.communicate(timeout=60)
    return run.returncode, err


@pytest.mark.skipif(not LINUX, reason="reads /proc to see when the handler is in place")
@pytest.mark.parametrize(
    ("signum", "line"), [(signal.SIGINT, "interrupted"), (signal.SIGTERM, "terminated")]
)
def test_a_signal_ends_the_run_with_one_line(signum, line, tmp_path: Path) -> None:
    # right after the handler is installed: gdln, click and sympy are still importing
    code, err = _signalled(signum, 0.0, LONG_SOLVE, tmp_path)
    assert (code, err) == (128 + signum, f"gdln: {line}\n")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
@pytest.mark.skipif(not LINUX, reason="reads /proc to see when the handler is in place")
@pytest.mark.parametrize("delay", [0.01, 0.1, 0.5, 2.0])
@pytest.mark.parametrize(
    ("signum", "line"), [(signal.SIGINT, "interrupted"), (signal.SIGTERM, "terminated")]
)
def test_a_signal_at_any_moment_ends_the_run_with_one_line(signum, line, delay, tmp_path) -> None:
    code, err = _signalled(signum, delay, LONG_SOLVE, tmp_path)
    assert (code, err) == (128 + signum, f"gdln: {line}\n")
    assert list(tmp_path.iterdir()) == []


def test_sigterm_right_after_start_leaves_nothing(tmp_path: Path) -> None:
    # before gdln's handler is in place the default action ends the process silently;
    # after, the handler does; either way there is no traceback and no file
    code, err = _signalled(signal.SIGTERM, -1, LONG_SOLVE, tmp_path)
    assert (code, err) in ((-signal.SIGTERM, ""), (128 + signal.SIGTERM, "gdln: terminated\n"))
    assert list(tmp_path.iterdir()) == []


INTERRUPTED_WRITE = textwrap.dedent(
    """\
    import os, signal, sys
    from pathlib import Path
    real, signum = Path.write_text, int(sys.argv[1])
    def write_text(self, *args, **kwargs):
        real(self, *args, **kwargs)
        os.kill(os.getpid(), signum)  # the signal arrives while the file is written
        return 0
    Path.write_text = write_text
    import runpy
    sys.argv = ["gdln", *sys.argv[2:]]
    runpy.run_module("gdln", run_name="__main__")  # the program itself
    """
)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_writing_leaves_no_file(signum, tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    out.write_text("old")
    run = subprocess.run(
        [sys.executable, "-c", INTERRUPTED_WRITE, str(int(signum)), "solve", CHAIN,
         "--t-max", "1", "-o", str(out), "--force"],
        capture_output=True,
        text=True,
    )  # fmt: skip
    word = "interrupted" if signum == signal.SIGINT else "terminated"
    assert (run.returncode, run.stderr) == (128 + signum, f"gdln: {word}\n")
    assert out.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]
