"""The environment and the options (issue 34): one line and exit 2, never a traceback.

``GDLN_MAX_POINTS=²`` (a Unicode digit) and ``GDLN_MAX_FILE_BYTES=99999999999`` ended in
tracebacks (``int('²')``; a read that made room for 100 GB), a closed standard output in
an ``AttributeError``, a folder that cannot be used was reported as one that "does not
exist", and an output name of 300 characters made an error line of 338.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, run_cli

import gdln
from gdln.graphfile import Limits

LINE = 300
CHAIN = str(ROOT / "graphs" / "chain.yaml")


def _one_line(code: int, out: str, err: str) -> str:
    assert (code, out) == (2, ""), (code, out, err)
    assert err.startswith("gdln: error: ") and err.count("\n") == 1, err
    assert len(err) - 1 <= LINE, (len(err), err)
    return err


# ----------------------------------------------------------------------------- environment


@pytest.mark.parametrize("value", ["²", "٣", "１"])  # int() reads the last two
def test_a_limit_that_is_no_ascii_positive_integer_is_one_line(
    value: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(gdln.GraphSpecError, match="GDLN_MAX_POINTS: expected a positive integer"):
        Limits.from_environment({"GDLN_MAX_POINTS": value})
    monkeypatch.setenv("GDLN_MAX_POINTS", value)
    err = _one_line(*run_cli(["paths", CHAIN], capsys))
    assert "environment: GDLN_MAX_POINTS: expected a positive integer" in err


@pytest.mark.parametrize("value", ["99999999999", "9" * 18])
def test_a_large_file_limit_reads_a_small_file(
    value: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``read(limit + 1)`` made room for the limit first: 100 GB for a 700-byte file."""
    monkeypatch.setenv("GDLN_MAX_FILE_BYTES", value)
    assert gdln.load(CHAIN).graph.number_of_nodes() == 4
    code, out, err = run_cli(["paths", CHAIN], capsys)
    assert code == 0 and out.startswith("chain: 4 nodes"), err


def test_a_file_that_grows_past_the_limit_while_read_is_refused(tmp_path: Path) -> None:
    from gdln._bounded._read import _read_at_most

    path = tmp_path / "g.yaml"
    path.write_bytes(b"a" * 100)
    with path.open("rb") as handle:
        path.write_bytes(b"a" * 5000)  # grows after it was opened: fstat still sees it
        assert len(_read_at_most(handle, 1000)) == 1001
    with path.open("rb") as handle:
        assert _read_at_most(handle, 10**11) == b"a" * 5000


# ----------------------------------------------------------------------------- standard output


def _gdln_with_stdout_closed(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        ["sh", "-c", 'exec "$0" -m gdln "$@" >&-', sys.executable, *args],
        capture_output=False,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        env=env,
        timeout=60,
        check=False,
    )


def test_a_closed_standard_output_is_one_line(tmp_path: Path) -> None:
    run = _gdln_with_stdout_closed("paths", CHAIN, cwd=tmp_path)
    assert run.returncode == 2, run.stderr
    assert run.stderr == "gdln: error: standard output is closed; write to a file with -o FILE\n"
    run = _gdln_with_stdout_closed("paths", CHAIN, "-o", "p.txt", cwd=tmp_path)
    assert (run.returncode, run.stderr) == (0, "wrote p.txt\n")
    assert (tmp_path / "p.txt").read_text().startswith("chain: 4 nodes")


# ----------------------------------------------------------------------------- folders


def test_a_file_in_the_place_of_a_folder_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "afile").write_text("")
    for target in ("afile/x.txt", "afile/sub/x.txt"):
        err = _one_line(*run_cli(["paths", CHAIN, "-o", str(tmp_path / target)], capsys))
        assert err.endswith(f"{tmp_path / 'afile'} is a file, not a folder\n"), err
    err = _one_line(*run_cli(["compare", CHAIN, "-o", str(tmp_path / "afile/sub/c")], capsys))
    assert err.endswith(f"{tmp_path / 'afile'} is a file, not a folder\n"), err
    with pytest.raises(gdln.outputs.OutputError, match="afile is a file, not a folder"):
        gdln.outputs.check_file(tmp_path / "afile" / "x.npz")
    err = _one_line(*run_cli(["paths", CHAIN, "-o", str(tmp_path / "no/x.txt")], capsys))
    assert err.endswith(f"the folder {tmp_path / 'no'} does not exist\n"), err


def test_a_folder_that_cannot_be_reached_is_not_called_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No permission to search a folder above (as root, simulated: root may search all)."""
    locked = tmp_path / "locked" / "sub"
    locked.mkdir(parents=True)
    real_stat = os.stat

    def stat(path: object, *args: object, **kwargs: object) -> os.stat_result:
        if str(path).startswith(str(tmp_path / "locked") + os.sep):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_stat(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "stat", stat)
    assert (
        gdln.outputs.folder_problem(locked)
        == f"cannot reach the folder {locked}: Permission denied"
    )
    err = _one_line(*run_cli(["paths", CHAIN, "-o", str(locked / "x.txt")], capsys))
    assert "Permission denied" in err and "does not exist" not in err, err
    with pytest.raises(gdln.outputs.OutputError, match=r"cannot reach the folder .*Permission"):
        gdln.outputs.check_file(locked / "x.npz")


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root may search all")
def test_a_folder_without_search_permission_is_not_called_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    locked = tmp_path / "locked"
    (locked / "sub").mkdir(parents=True)
    locked.chmod(0)
    try:
        err = _one_line(*run_cli(["paths", CHAIN, "-o", str(locked / "sub" / "x.txt")], capsys))
    finally:
        locked.chmod(0o700)
    assert "Permission denied" in err and "does not exist" not in err, err


# ----------------------------------------------------------------------------- long names


def test_long_output_names_give_lines_of_at_most_300_characters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    long = "a" * 300
    (tmp_path / f"{long[:200]}.txt").write_text("")
    cases = {
        ("paths", CHAIN, "-o", str(tmp_path / "missing" / f"{long}.txt")): "does not exist",
        ("paths", CHAIN, "-o", str(tmp_path / f"{long}.txt")): "File name too long",
        ("paths", CHAIN, "-o", str(tmp_path / long / "x.txt")): "File name too long",
        ("paths", CHAIN, "-o", str(tmp_path / f"{long[:200]}.txt")): "exists; pass --force",
        ("paths", CHAIN, "-o", str(tmp_path / f"{long}.pdf")): "expected a file ending in .txt",
        ("paths", CHAIN, "--format", "json", "-o", f"{long}.txt"): "conflicts with -o",
        ("simulate", CHAIN, "-o", str(tmp_path / "missing" / f"{long}.npz")): "does not exist",
        ("compare", CHAIN, "-o", str(tmp_path / "missing" / long)): "does not exist",
        ("paths", str(tmp_path / f"{long}.yaml")): "File name too long",
        ("paths", str(tmp_path / f"{long[:200]}" / f"{long[:200]}.yaml")): "no such file",
    }
    for args, meaning in cases.items():
        err = _one_line(*run_cli(list(args), capsys))
        assert meaning in err, err
    for path in (tmp_path / "missing" / f"{long}.npz", tmp_path / f"{long[:200]}.txt"):
        with pytest.raises(gdln.outputs.OutputError) as info:
            gdln.outputs.check_file(path)
        assert len(str(info.value)) <= LINE - len("gdln: error: "), info.value
