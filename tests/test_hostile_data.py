"""Hostile data files (issue 22, section 3): each gets one short error naming file and array.

Every case is built here in ``tmp_path`` (zip bombs as raw deflate streams of zeros, written
in milliseconds) and thrown at :func:`gdln.load` and at ``gdln paths`` in-process: the load
must raise a :class:`gdln.GraphSpecError` whose one-line message names the ``.npz`` file,
the array and what was expected, within 10 s. The slow test repeats the command line in a
subprocess capped at 1 GiB of address space and 10 s. Legitimate data files keep working:
an npz task equals the same examples written in YAML, and every new limit can be raised.
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import resource
import struct
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from helpers import ROOT, run_cli

import gdln
from gdln.graphfile import Limits

SECONDS = 10.0
MESSAGE = 300
GRAPH = (
    "nodes: [{id: x, size: 2}, {id: y, size: 1}]\nedges: [{source: x, target: y, gated: true}]\n"
)
CONTEXT = (
    "task:\n  contexts:\n"
    "    - {probability: 1, dataset: d, active: [x->y], inputs: {x: a}, targets: {y: b}}\n"
)
GOOD = {"a": np.eye(2), "b": np.array([[1.0], [0.0]])}  # a valid dataset
GOOD_TASK = {"inputs/x": np.eye(2), "targets/y": np.ones((2, 1)), "gates/x->y": np.ones(2)}
GiB = 2**30


# ----------------------------------------------------------------------------- building files


def _npy_header(shape: tuple[int, ...], descr: str = "<f8") -> bytes:
    out = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        out, {"descr": descr, "fortran_order": False, "shape": shape}
    )
    return out.getvalue()


@functools.cache
def _deflated_zeros(prefix: bytes, zeros: int) -> tuple[bytes, int]:
    """A raw deflate stream of ``prefix`` and ``zeros`` zero bytes, and its CRC-32.

    A full flush resets the compressor, so every MiB of zeros after one compresses to the
    same ~1 KB: the stream is that block repeated (2 GiB of zeros in 2 MB).
    """
    chunk = 2**20
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    head = packer.compress(prefix) + packer.flush(zlib.Z_FULL_FLUSH)
    block = packer.compress(bytes(chunk)) + packer.flush(zlib.Z_FULL_FLUSH)
    stream = head + block * (zeros // chunk) + packer.flush()
    crc, zero = zlib.crc32(prefix), bytes(chunk)
    for _ in range(zeros // chunk):
        crc = zlib.crc32(zero, crc)
    return stream, crc


def _zip(members: list[tuple[str, bytes, int, int]]) -> bytes:
    """A zip archive written field by field: (name, deflated data, size it claims, CRC-32)."""
    local, central = b"", b""
    for name, data, size, crc in members:
        raw = name.encode()
        fields = (20, 0, 8, 0, 33, crc, len(data), size, len(raw))
        central += struct.pack(
            "<4sHHHHHHIIIHHHHHII", b"PK\x01\x02", 20, *fields, 0, 0, 0, 0, 0, len(local)
        )
        central += raw
        local += struct.pack("<4sHHHHHIIIHH", b"PK\x03\x04", *fields, 0) + raw + data
    end = struct.pack(
        "<4sHHHHIIH", b"PK\x05\x06", 0, 0, len(members), len(members), len(central), len(local), 0
    )
    return local + central + end


def _bomb(member: str, zeros: int, header: bytes = b"") -> bytes:
    stream, crc = _deflated_zeros(header, zeros)
    return _zip([(member, stream, len(header) + zeros, crc)])


Case = tuple[Path, Path | None]  # the graph file and the --task file (or None)


def _dataset(tmp_path: Path, data: bytes | dict[str, np.ndarray], name: str = "d.npz") -> Case:
    """A graph whose one context draws from the npz dataset ``data``."""
    if isinstance(data, dict):
        np.savez(tmp_path / name, **data)
    else:
        (tmp_path / name).write_bytes(data)
    graph = tmp_path / "g.yaml"
    graph.write_text(GRAPH + f"datasets: {{d: {{npz: {name}}}}}\n" + CONTEXT)
    return graph, None


def _task(tmp_path: Path, data: dict[str, np.ndarray], compressed: bool = False) -> Case:
    """A graph whose task is the npz of examples ``data``."""
    (np.savez_compressed if compressed else np.savez)(tmp_path / "t.npz", **data)
    graph = tmp_path / "g.yaml"
    graph.write_text(GRAPH + "task: {npz: t.npz}\n")
    return graph, None


def _yaml(tmp_path: Path, text: str) -> Case:
    graph = tmp_path / "g.yaml"
    graph.write_text(GRAPH + text)
    return graph, None


def _fifo(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    os.mkfifo(path)
    return path


def _lying_directory(tmp_path: Path) -> Case:
    """The directory gives the size of a 2-value array; the stream inflates to 256 MiB more."""
    header = _npy_header((2,))
    stream, crc = _deflated_zeros(header, 2**28)
    return _dataset(tmp_path, _zip([("a.npy", stream, len(header) + 16, crc)]))


def _directory_beyond_header(tmp_path: Path) -> Case:
    """The directory claims 1 MiB for an array whose header and data take 144 bytes."""
    content = _npy_header((2, 1)) + np.zeros(2).tobytes()
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    stream = packer.compress(content) + packer.flush()
    return _dataset(tmp_path, _zip([("a.npy", stream, 2**20, zlib.crc32(content))]))


def _huge_header(tmp_path: Path) -> Case:
    content = _npy_header((10**12, 2)) + bytes(16)
    return _dataset(
        tmp_path, _zip([("a.npy", zlib.compress(content)[2:-4], len(content), zlib.crc32(content))])
    )


def _many_rows(tmp_path: Path) -> Case:
    """3 million examples (of bytes, 12 MB in all) in a 30 KB compressed npz task."""
    n = 3_000_000
    data = {
        "inputs/x": np.zeros((n, 2), dtype=np.int8),
        "targets/y": np.zeros((n, 1), dtype=np.int8),
        "gates/x->y": np.ones(n, dtype=bool),
    }
    return _task(tmp_path, data, compressed=True)


def _graph_fifo(tmp_path: Path) -> Case:
    return _fifo(tmp_path, "g.yaml"), None


def _task_fifo(tmp_path: Path) -> Case:
    graph = tmp_path / "g.yaml"
    graph.write_text(GRAPH)
    return graph, _fifo(tmp_path, "t.yaml")


def _npz_fifo(tmp_path: Path) -> Case:
    _fifo(tmp_path, "d.npz")
    graph = tmp_path / "g.yaml"
    graph.write_text(GRAPH + "datasets: {d: {npz: d.npz}}\n" + CONTEXT)
    return graph, None


def _npy_file(tmp_path: Path) -> Case:
    out = io.BytesIO()
    np.save(out, np.eye(2))
    return _dataset(tmp_path, out.getvalue())


def _whitened(size: int) -> Callable[[Path], Case]:
    def build(tmp_path: Path) -> Case:
        return _yaml(
            tmp_path,
            f"datasets: {{d: {{builtin: whitened, size: {size}}}}}\n"
            + CONTEXT.replace(
                "active: [x->y], inputs: {x: a}, targets: {y: b}", "active: [], inputs: {}"
            ),
        )

    return build


def _with(data: dict[str, object]) -> dict[str, np.ndarray]:
    return {**GOOD, **{k: np.asarray(v) for k, v in data.items()}}


def _task_with(data: dict[str, object]) -> dict[str, np.ndarray]:
    return {**GOOD_TASK, **{k: np.asarray(v) for k, v in data.items()}}


YAML_WEIGHTS = "datasets: {d: {examples: {a: [[1, 0], [0, 1]], b: [[1], [0]]}, weights: %s}}\n"

# name -> (builder, what the message must say)
CASES: dict[str, tuple[Callable[[Path], Case], str]] = {
    "zip_bomb_npy": (
        lambda p: _dataset(p, _bomb("a.npy", 2 * GiB, _npy_header((2**28,)))),
        r"d\.npz: arrays of 2147483776 bytes once decompressed exceeds the limit "
        r"data_bytes=67108864 \(raise it: GDLN_MAX_DATA_BYTES",
    ),
    "zip_bomb_member": (
        lambda p: _dataset(p, _bomb("notes.bin", 2 * GiB)),
        r"d\.npz: holds the member 'notes\.bin', which is not an \.npy array",
    ),
    "huge_header": (
        _huge_header,
        r"npz\['a'\]: d\.npz: array 'a' of shape \(1000000000000, 2\): 2000000000000 values "
        r"exceeds the limit data_values=1048576 \(raise it: GDLN_MAX_DATA_VALUES",
    ),
    "lying_directory": (_lying_directory, r"d\.npz: cannot read it as an \.npz archive: Bad CRC"),
    "directory_beyond_header": (
        _directory_beyond_header,
        r"d\.npz: array 'a': the zip directory gives 1048576 bytes, but its header .* implies 144",
    ),
    "npy_not_npz": (_npy_file, r"d\.npz: is a single \.npy array, not an \.npz archive"),
    "text_not_npz": (
        lambda p: _dataset(p, b"a,b\n1,2\n"),
        r"d\.npz: is not an \.npz archive \(a zip file of \.npy arrays",
    ),
    "no_arrays": (lambda p: _dataset(p, {}), r"d\.npz: holds no arrays; expected one"),
    "task_no_arrays": (lambda p: _task(p, {}), r"t\.npz: holds no arrays; expected inputs/"),
    "object_array": (
        lambda p: _dataset(p, _with({"a": np.array([[1, None], [0, 1]], dtype=object)})),
        r"npz\['a'\]: d\.npz: array 'a' holds object values; expected numbers",
    ),
    "mismatched_rows": (
        lambda p: _dataset(p, _with({"b": np.ones((3, 1))})),
        r"npz\['b'\]: d\.npz: array 'b' has 3 rows but 'a' has 2; expected one row per example",
    ),
    "zero_rows": (
        lambda p: _dataset(p, {"a": np.zeros((0, 2)), "b": np.zeros((0, 1))}),
        r"d\.npz: array 'a' has shape \(0, 2\); expected \(examples, dimension\), at least one",
    ),
    "zero_weights": (
        lambda p: _dataset(p, _with({"weights": [0.0, 0.0]})),
        r"npz\['weights'\]: d\.npz: the weights sum to 0; expected a positive total",
    ),
    "weights_2d": (
        lambda p: _dataset(p, _with({"weights": np.ones((2, 2))})),
        r"d\.npz: array 'weights' has shape \(2, 2\); expected one weight per example, "
        r"shape \(2,\)",
    ),
    "weights_wrong_length": (
        lambda p: _dataset(p, _with({"weights": np.ones(3)})),
        r"d\.npz: array 'weights' has shape \(3,\); expected one weight per example",
    ),
    "negative_weights": (
        lambda p: _dataset(p, _with({"weights": [2.0, -1.0]})),
        r"d\.npz: weights must be non-negative, one per example; weights\[1\] is -1\.0",
    ),
    "negative_task_weights": (
        lambda p: _task(p, _task_with({"weights": [2.0, -1.0]})),
        r"npz\['weights'\]: t\.npz: weights must be non-negative, one per example; weights\[1\]",
    ),
    "task_weights_2d": (
        lambda p: _task(p, _task_with({"weights": np.ones((2, 1))})),
        r"t\.npz: array 'weights' has shape \(2, 1\); expected one weight per example",
    ),
    "task_zero_rows": (
        lambda p: _task(p, {k: v[:0] for k, v in GOOD_TASK.items()}),
        r"t\.npz: its arrays have no rows; expected at least one example",
    ),
    "task_gates_wrong_rank": (
        lambda p: _task(p, _task_with({"gates/x->y": np.ones((2, 2))})),
        r"npz\['gates/x->y'\]: t\.npz: array 'gates/x->y' has shape \(2, 2\); expected one gate "
        r"value per example, shape \(2,\)",
    ),
    "task_many_rows": (
        _many_rows,
        r"t\.npz: array 'inputs/x' of shape \(3000000, 2\): 6000000 values exceeds the limit "
        r"data_values=1048576",
    ),
    "value_1e300": (
        lambda p: _dataset(p, _with({"a": [[1.0, 0.0], [0.0, 1e300]]})),
        r"d\.npz: array 'a' has the value 1e\+300 at index \[1, 1\], beyond ±1e\+100: its "
        r"square would overflow the second moments",
    ),
    "yaml_value_1e300": (
        lambda p: _yaml(p, YAML_WEIGHTS.replace("[0, 1]]", "[0, 1e300]]") % "[1, 1]" + CONTEXT),
        r"datasets\.d\.examples\.a: value 10{27}\.\.\.0{28} \(301 digits\) is beyond ±1e\+100",
    ),
    "yaml_zero_weights": (
        lambda p: _yaml(p, YAML_WEIGHTS % "[0, 0]" + CONTEXT),
        r"datasets\.d\.weights: the weights sum to 0; expected a positive total",
    ),
    "yaml_weights_2d": (
        lambda p: _yaml(p, YAML_WEIGHTS % "[[1, 1]]" + CONTEXT),
        r"datasets\.d\.weights: expected a list of numbers, one per example, got \[\[1, 1\]\]",
    ),
    "yaml_negative_weights": (
        lambda p: _yaml(p, YAML_WEIGHTS % "[2, -1]" + CONTEXT),
        r"datasets\.d\.weights: weights must be non-negative, one per example; weights\[1\] is -1",
    ),
    "yaml_weights_wrong_length": (
        lambda p: _yaml(p, YAML_WEIGHTS % "[1, 1, 1]" + CONTEXT),
        r"datasets\.d\.weights: 3 weights; expected one weight per example \(2\)",
    ),
    "whitened_million": (
        _whitened(10**6),
        r"datasets\.d: builtin 'whitened' with \{'size': 1000000\}: 2000000000000 exact values "
        r"exceeds the limit exact_values=1000000 \(raise it: GDLN_MAX_EXACT_VALUES",
    ),
    "whitened_2000": (_whitened(2000), r"8000000 exact values exceeds the limit exact_values"),
    "graph_fifo": (_graph_fifo, r"g\.yaml: is a named pipe \(FIFO\), not a regular file"),
    "task_fifo": (_task_fifo, r"t\.yaml: is a named pipe \(FIFO\), not a regular file; expected"),
    "npz_fifo": (
        _npz_fifo,
        r"d\.npz: is a named pipe \(FIFO\), not a regular file; expected a data",
    ),
}


# ----------------------------------------------------------------------------- running them


def _unblock(case: Case) -> None:
    """Open every pipe of ``case`` for writing and close it: a reader blocked on it returns."""
    graph, task = case
    for path in (graph, task, graph.parent / "d.npz"):
        if path is not None and path.is_fifo():
            with contextlib.suppress(OSError):
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))


def _within(case: Case, call: Callable[[], object]) -> BaseException | None:
    """Run ``call`` in a thread; fail if it takes over 10 s (a reader blocked on a pipe is
    released first). Returns what it raised, or None."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as err:  # handed to the test
            raised.append(err)

    start = time.perf_counter()
    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(SECONDS)
    if worker.is_alive():
        _unblock(case)
        worker.join(SECONDS)
        pytest.fail(f"still running after {time.perf_counter() - start:.0f} s")
    return raised[0] if raised else None


def _names_files(message: str, case: Case) -> None:
    """One line, short, naming the file read (and the npz file, where there is one)."""
    assert "\n" not in message and len(message) <= MESSAGE, message
    graph, task = case
    names = [(task if task is not None else graph).name]
    names += [p.name for p in graph.parent.glob("*.npz")]
    assert all(name in message for name in names), (names, message)


@pytest.mark.parametrize("kind", sorted(CASES))
def test_load_refuses_hostile_data(kind: str, tmp_path: Path) -> None:
    build, match = CASES[kind]
    case = build(tmp_path)
    err = _within(case, lambda: gdln.load(case[0], task=case[1]))
    assert isinstance(err, gdln.GraphSpecError), repr(err)
    with pytest.raises(gdln.GraphSpecError, match=match):
        raise err
    _names_files(str(err), case)


@pytest.mark.parametrize("kind", sorted(CASES))
def test_cli_refuses_hostile_data(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    build, _ = CASES[kind]
    case = build(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    args = ["paths", str(case[0])] + (["--task", str(case[1])] if case[1] else [])
    result: list[tuple[int, str, str]] = []
    err = _within(case, lambda: result.append(run_cli(args, capsys)))
    assert err is None, repr(err)
    code, out, stderr = result[0]
    assert (code, out) == (2, ""), stderr
    assert stderr.startswith("gdln: error: ") and stderr.count("\n") == 1, stderr
    assert len(stderr.strip()) <= MESSAGE, stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing left behind


# ----------------------------------------------------------------------------- legitimate data


def test_npz_task_equals_the_same_examples_in_yaml(tmp_path: Path) -> None:
    """Rows grouped on whole arrays give the contexts that YAML examples give (exact route):
    three gate patterns met in the order 1, 0, 1, 2, 0, with weights."""
    graph = (
        "nodes: [{id: x, size: 2}, {id: h0, size: 1, gated: true}, {id: h1, size: 1, "
        "gated: true}, {id: y, size: 1}]\n"
        "edges: [{source: x, target: h0}, {source: x, target: h1}, {source: h0, target: y}, "
        "{source: h1, target: y}]\n"
    )
    x = [[1, 0], [0, 1], [1, 1], [2, -1], [-1, 3]]
    y = [[1], [2], [-1], [0], [3]]
    gates = [(0, 1), (1, 0), (0, 1), (1, 1), (1, 0)]
    weights = [1, 2, 3, 4, 5]
    examples = "".join(
        f"    - {{inputs: {{x: {xi}}}, targets: {{y: {yi}}}, gates: {{h0: {g0}, h1: {g1}}}, "
        f"weight: {w}}}\n"
        for xi, yi, (g0, g1), w in zip(x, y, gates, weights, strict=True)
    )
    (tmp_path / "yaml.yaml").write_text(graph + "task:\n  examples:\n" + examples)
    np.savez(
        tmp_path / "t.npz",
        **{
            "inputs/x": np.array(x, dtype=float),
            "targets/y": np.array(y, dtype=np.int16),
            "gates/h0": np.array([g[0] for g in gates], dtype=bool),
            "gates/h1": np.array([g[1] for g in gates], dtype=float),
            "weights": np.array(weights, dtype=np.int64),
        },
    )
    (tmp_path / "npz.yaml").write_text(graph + "task: {npz: t.npz}\n")
    exact, ours = gdln.load(tmp_path / "yaml.yaml"), gdln.load(tmp_path / "npz.yaml")
    assert [c.label for c in ours.task.contexts] == ["context0", "context1", "context2"]
    for mine, theirs in zip(ours.task.contexts, exact.task.contexts, strict=True):
        assert mine.gates == {k: float(v) for k, v in theirs.gates.items() if v != 0}
        assert mine.probability == pytest.approx(float(theirs.probability), rel=1e-15)
    reference = gdln.path_statistics(exact.graph, exact.task)
    stats = gdln.path_statistics(ours.graph, ours.task)
    for path, value in reference.input_output.items():
        np.testing.assert_allclose(stats.input_output[path], np.array(value, float), rtol=1e-12)
    for key, value in reference.input.items():
        np.testing.assert_allclose(stats.input[key], np.array(value, float), rtol=1e-12)


GATED_PAIR = (
    "nodes: [{id: x, size: 2}, {id: h0, size: 1, gated: true}, {id: h1, size: 1, "
    "gated: true}, {id: y, size: 1}]\n"
    "edges: [{source: x, target: h0}, {source: x, target: h1}, {source: h0, target: y}, "
    "{source: h1, target: y}]\n"
)


@pytest.mark.parametrize("form", ["npz", "yaml"])
def test_a_gate_pattern_of_weight_zero_is_a_context_of_probability_zero(
    form: str, tmp_path: Path
) -> None:
    """Its statistics and example weights are finite: those of the task without it."""
    example = "    - {inputs: {x: [1, 0]}, targets: {y: [1]}, active: [h0]}\n"
    dropped = "    - {inputs: {x: [0, 1]}, targets: {y: [1]}, active: [h1], weight: 0}\n"
    (tmp_path / "ref.yaml").write_text(GATED_PAIR + "task:\n  examples:\n" + example)
    if form == "yaml":
        text = GATED_PAIR + "task:\n  examples:\n" + example + dropped
    else:
        gates = {"gates/h0": np.array([1.0, 0.0]), "gates/h1": np.array([0.0, 1.0])}
        arrays = {"inputs/x": np.eye(2), "targets/y": np.ones((2, 1)), **gates}
        np.savez(tmp_path / "t.npz", **arrays, weights=np.array([1.0, 0.0]))
        text = GATED_PAIR + "task: {npz: t.npz}\n"
    (tmp_path / "g.yaml").write_text(text)
    problem, reference = gdln.load(tmp_path / "g.yaml"), gdln.load(tmp_path / "ref.yaml")
    stats = gdln.path_statistics(problem.graph, problem.task)
    expected = gdln.path_statistics(reference.graph, reference.task)
    for path, value in stats.input_output.items():
        want = expected.input_output.get(path, np.zeros((1, 2)))
        np.testing.assert_array_equal(np.array(value, float), np.array(want, float))
    weights = problem.examples().weights
    assert np.isfinite(weights).all() and weights.tolist() == [1.0, 0.0]


def test_npz_dataset_weights_are_those_of_yaml(tmp_path: Path) -> None:
    """Weights 1 and 3 (as integers in the npz): the moments of the YAML dataset."""
    graph, _ = _dataset(tmp_path, _with({"weights": np.array([1, 3])}))
    problem = gdln.load(graph)
    stats = gdln.path_statistics(problem.graph, problem.task)
    ((value),) = stats.input_output.values()
    np.testing.assert_allclose(value, [[0.25, 0.0]], rtol=1e-15)  # <y x^T> = (1*[1, 0]) / 4


def test_fortran_ordered_and_big_endian_arrays_read_as_numpy_reads_them(tmp_path: Path) -> None:
    a = np.asfortranarray(np.arange(6, dtype=">f8").reshape(3, 2))
    b = np.arange(3, dtype="<i4").reshape(3, 1)
    _dataset(tmp_path, {"a": a, "b": b})
    data = gdln.load(tmp_path / "g.yaml").task.datasets["d"]
    np.testing.assert_array_equal(data.examples["a"], a)
    np.testing.assert_array_equal(data.examples["b"], b)


def test_new_limits_can_be_raised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each limit refuses just past it, by keyword and by environment variable."""
    graph, _ = _whitened(8)(tmp_path)
    assert gdln.load(graph, limits=Limits(exact_values=128)).task is not None  # 2 * 8**2
    with pytest.raises(gdln.TaskSpecError, match="128 exact values exceeds the limit exact"):
        gdln.load(graph, limits=Limits(exact_values=127))
    monkeypatch.setenv("GDLN_MAX_EXACT_VALUES", "127")
    with pytest.raises(gdln.TaskSpecError, match="limit exact_values=127 "):
        gdln.load(graph)
    monkeypatch.delenv("GDLN_MAX_EXACT_VALUES")

    graph, _ = _dataset(tmp_path, GOOD)
    gdln.load(graph, limits=Limits(data_values=15))  # 4 + 2 values, 3**2 moments
    with pytest.raises(
        gdln.TaskSpecError,
        match=r"d\.npz: the second moments of its 3 columns: 9 values \(15 with the data read "
        r"before\) exceeds the limit data_values=14",
    ):
        gdln.load(graph, limits=Limits(data_values=14))
    size = (tmp_path / "d.npz").stat().st_size
    with pytest.raises(gdln.TaskSpecError, match=f"{size} bytes exceeds the limit data_bytes"):
        gdln.load(graph, limits=Limits(data_bytes=size - 1))
    monkeypatch.setenv("GDLN_MAX_DATA_BYTES", str(size - 1))
    with pytest.raises(gdln.TaskSpecError, match=f"limit data_bytes={size - 1} "):
        gdln.load(graph)
    monkeypatch.delenv("GDLN_MAX_DATA_BYTES")
    monkeypatch.setenv("GDLN_MAX_DATA_VALUES", "5")
    with pytest.raises(
        gdln.TaskSpecError,
        match=r"array 'b' of shape \(2, 1\): 2 values \(6 with the data read before\) exceeds "
        r"the limit data_values=5",
    ):
        gdln.load(graph)


def test_exact_values_of_repeated_examples_are_counted(tmp_path: Path) -> None:
    """3 values an example, 2000 examples through ``repeat``: counted before they are built."""
    text = GRAPH.replace(", gated: true", "") + (
        "task:\n  examples:\n    - {inputs: {x: [1, i]}, targets: {y: [i]}, repeat: {i: 2000}}\n"
    )
    (tmp_path / "g.yaml").write_text(text)
    with pytest.raises(
        gdln.TaskSpecError,
        match=r"task\.examples\[0\]\.targets\.y: a matrix of 1 x 1 exact values \(5001 with the "
        r"data read before\) exceeds the limit exact_values=5000",
    ):
        gdln.load(tmp_path / "g.yaml", limits=Limits(exact_values=5000))


def test_npz_arrays_are_counted_before_the_zip_directory_is_read(tmp_path: Path) -> None:
    """An npz of 20 000 arrays (2 MB) is refused before numpy or zipfile sees an array;
    within a raised limit, the arrays of all files add up (both datasets read d.npz)."""
    graph, _ = _dataset(tmp_path, {**GOOD, **{f"e{k}": np.ones(1) for k in range(20_000)}})
    start = time.perf_counter()
    with pytest.raises(
        gdln.TaskSpecError,
        match=r"datasets\.d\.npz: d\.npz: a zip directory of \d+ bytes, room for \d+ arrays, "
        r"exceeds the limit data_arrays=10000 \(raise it: GDLN_MAX_DATA_ARRAYS",
    ):
        gdln.load(graph)
    assert time.perf_counter() - start < 1.0
    graph, _ = _dataset(tmp_path, GOOD)
    text = graph.read_text().replace("{d: {npz: d.npz}}", "{d: {npz: d.npz}, e: {npz: d.npz}}")
    graph.write_text(text)
    directory = struct.unpack("<I", (tmp_path / "d.npz").read_bytes()[-10:-6])[0]
    room = directory // 46  # 46 bytes at least per entry of the zip directory
    gdln.load(graph, limits=Limits(data_arrays=room + 2))  # room, settled to 2, then 2 more
    with pytest.raises(gdln.TaskSpecError, match=r"datasets\.e\.npz: d\.npz: .* room for"):
        gdln.load(graph, limits=Limits(data_arrays=room + 1))


# ----------------------------------------------------------------------------- memory and time


def _limit_memory() -> None:  # pragma: no cover - runs in the child process
    resource.setrlimit(resource.RLIMIT_AS, (GiB, GiB))


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(CASES))
def test_cli_subprocess_within_time_and_memory(kind: str, tmp_path: Path) -> None:
    """Each hostile case, in a fresh ``gdln paths`` under 1 GiB of address space and 10 s."""
    build, _ = CASES[kind]
    graph, task = build(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    args = [sys.executable, "-m", "gdln", "paths", str(graph)]
    try:
        done = subprocess.run(
            args + (["--task", str(task)] if task else []),
            capture_output=True,
            text=True,
            timeout=SECONDS,
            preexec_fn=_limit_memory,
            env=env,
            check=False,
        )
    finally:
        _unblock((graph, task))
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stdout == "" and done.stderr.count("\n") == 1, done.stderr[-2000:]
    assert len(done.stderr.strip()) <= MESSAGE
    assert sorted(p.name for p in tmp_path.iterdir()) == before
