"""The command line: each command, its formats, and errors as one line with exit code 2."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import sympy as sp
from helpers import GRAPHS, NOT_DIAGONALIZABLE, run_cli

run = run_cli


def test_paths(capsys) -> None:
    code, out, _ = run(["paths", str(GRAPHS / "xor.yaml")], capsys)
    assert code == 0 and "4 input-output paths" in out and "x->h0->y" in out


def test_stats_json(capsys) -> None:
    code, out, _ = run(["stats", str(GRAPHS / "xor.yaml"), "--format", "json"], capsys)
    data = json.loads(out)
    assert code == 0 and data["exact"] and data["Sigma_yx"]["x->h0->y"] == [["1/4", "1/4"]]


def test_derive_json_is_parsable(capsys) -> None:
    code, out, _ = run(
        [
            "derive",
            str(GRAPHS / "routing.yaml"),
            "--lump",
            "symmetry",
            "--param",
            "M=5",
            "--format",
            "json",
        ],
        capsys,
    )
    assert code == 0
    (system,) = json.loads(out)["systems"]
    names = {v["name"]: v for v in system["variables"]}
    B1, B2, B3, s, d = sp.symbols("B1 B2 B3 s d")
    got = sp.parse_expr(
        names["B1"]["rhs"], local_dict={"B1": B1, "B2": B2, "B3": B3, "s": s, "d": d}
    )
    assert sp.simplify(got - B3 * B2 * (s - B1 * B2 * B3 * d) / 5) == 0
    assert names["B1"]["orbit"] == 5 and len(system["symbols"]["s"]) == 4


def test_derive_latex(capsys) -> None:
    code, out, _ = run(
        ["derive", str(GRAPHS / "routing.yaml"), "--lump", "full", "--format", "latex"], capsys
    )
    assert code == 0 and r"\tau \frac{d B_{2}}{dt}" in out


def test_solve_writes_and_refuses_to_overwrite(tmp_path, capsys) -> None:
    out_file = tmp_path / "xor.json"
    args = ["solve", str(GRAPHS / "xor.yaml"), "--t-max", "5", "--points", "6", "-o", str(out_file)]
    code, _, _ = run(args, capsys)
    data = json.loads(out_file.read_text())
    assert code == 0 and len(data["t"]) == 6 and data["loss"][-1] < data["loss"][0]
    code, _, err = run(args, capsys)
    assert code == 2 and err == f"gdln: error: {out_file} exists; pass --force to replace it\n"
    assert len(json.loads(out_file.read_text())["t"]) == 6  # untouched
    code, _, _ = run([*args[:-4], "--points", "4", "-o", str(out_file), "--force"], capsys)
    assert code == 0 and len(json.loads(out_file.read_text())["t"]) == 4


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (["derive", "missing.yaml"], "missing.yaml: no such file"),
        (["derive", str(GRAPHS / "routing.yaml"), "--param", "M=0"], "need 1 <= K <= M"),
        (["derive", str(GRAPHS / "routing.yaml"), "--param", "oops"], "expected NAME=VALUE"),
    ],
)
def test_errors_are_one_line_with_exit_code_2(args, match, capsys) -> None:
    code, _out, err = run(args, capsys)
    assert code == 2 and match in err and len(err.strip().splitlines()) == 1


def test_console_script_help() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "gdln.cli", "derive", "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "Example:" in result.stdout and "--lump" in result.stdout


BAD = {
    "malformed YAML": ("nodes: [{id: x, size: 2}\n", "malformed YAML"),
    "unknown node": (
        "nodes: [{id: x, size: 1}, {id: y, size: 1}]\nedges: [{source: x, target: q}]\n",
        "unknown node 'q'",
    ),
    "cycle": (
        "nodes: [{id: a, size: 1}, {id: b, size: 1}]\nedges: [{source: a, target: b}, {source: b, target: a}]\n",
        "cycle",
    ),
    "size <= 0": (
        "nodes: [{id: x, size: 0}, {id: y, size: 1}]\nedges: [{source: x, target: y}]\n",
        "got 0",
    ),
    "missing gate": (
        "nodes: [{id: x, size: 1}, {id: y, size: 1}]\nedges: [{source: x, target: y, gated: true}]\n"
        "task: {examples: [{inputs: {x: [1]}, targets: {y: [1]}, gates: {}}]}\n",
        "missing gate value for 'x->y'",
    ),
    "probability": (
        "nodes: [{id: x, size: 1}, {id: y, size: 1}]\nedges: [{source: x, target: y}]\n"
        "datasets: {d: {examples: {a: [[1]], b: [[1]]}}}\n"
        "task: {contexts: [{probability: 2, dataset: d, inputs: {x: a}, targets: {y: b}}]}\n",
        "outside [0, 1]",
    ),
    "not diagonalizable": (NOT_DIAGONALIZABLE, "no common bases"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_each_bad_input_is_one_line_naming_the_file(case, tmp_path, capsys) -> None:
    text, match = BAD[case]
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    code, _, err = run(["derive", str(path)], capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and match in lines[0]
    assert "bad.yaml" in lines[0]


def _nan_npz(folder) -> None:
    import numpy as np

    x = np.array([[1.0, np.nan], [0.0, 1.0]])
    np.savez(folder / "data.npz", **{"inputs/x": x, "targets/y": np.ones((2, 1))})


def _truncated_graphml(folder) -> None:
    import networkx as nx

    graph = nx.DiGraph([("a", "b")])
    nx.set_node_attributes(graph, 1, "size")
    nx.write_graphml(graph, folder / "full.graphml")
    text = (folder / "full.graphml").read_text()
    (folder / "bad.graphml").write_text(text[: len(text) // 2])


TWO_NODES = "nodes: [{id: x, size: 2}, {id: y, size: 1}]\nedges: [{source: x, target: y}]\n"
# Bad command lines and bad data files: (file text or None for routing, setup, args, match).
BAD_RUNS = {
    "init not a number": (
        None,
        None,
        ["solve", "--b0", "abc"],
        r"routing\.yaml: b0 \(--b0\): expected a real number, got 'abc'$",
    ),
    "gd map overflows": (
        None,
        None,
        ["solve", "--dynamics", "gd-map", "--lr", "100", "--t-max", "1000"],
        r"gradient-descent map diverged at step \d+ \(t = [\d.]+ tau, lr=100.0\), where B\d",
    ),
    "ode overflows": (
        None,
        None,
        ["solve", "--b0", "1e200"],
        r"the ODE overflowed at t = 0 tau, where B\d = 1e\+200",
    ),
    "ode solver stalls": (
        None,
        None,
        ["solve", "--b0", "1e40", "--t-max", "100"],
        r"the ODE solver made no progress in \d+ right-hand-side calls at t = [\d.e+-]+ tau",
    ),
    "huge parameter": (None, None, ["derive", "--param", "hidden=9**9**9"], "is too large"),
    "huge repeat": (
        None,
        None,
        ["derive", "--param", "M=10**9"],
        r"nodes\[0\]\.repeat\.i: repeat count 1000000000 is above the limit",
    ),
    "nan in npz": (
        TWO_NODES + "task: {npz: data.npz}\n",
        _nan_npz,
        ["derive"],
        r"task\.npz\['inputs/x'\]: data\.npz: array 'inputs/x' has the non-finite value nan",
    ),
    "nan in examples": (
        TWO_NODES + "task: {examples: [{inputs: {x: [1, .nan]}, targets: {y: [1]}}]}\n",
        None,
        ["derive"],
        r"task\.examples\[0\]\.inputs\.x: number nan is not finite",
    ),
    "truncated graphml": (None, _truncated_graphml, ["derive"], "cannot read graph"),
    "unbound symbol": (
        "symbols: [a]\n"
        + TWO_NODES
        + "task: {examples: [{inputs: {x: [1, 0]}, targets: {y: [a]}}]}\n",
        None,
        ["solve"],
        r"symbol 'a' \(from 'symbols:'\) has no value; .* --param a=VALUE",
    ),
    "bad symbol value": (
        "symbols: [a]\n"
        + TWO_NODES
        + "task: {examples: [{inputs: {x: [1, 0]}, targets: {y: [a]}}]}\n",
        None,
        ["solve", "--param", "a=b"],
        r"symbols\[0\] \(a\): unknown name 'b'",
    ),
    "repeated context": (
        TWO_NODES.replace("size: 2", "size: 1")
        + "datasets: {d: {examples: {a: [[1]], b: [[1]]}}}\ntask:\n  contexts:\n"
        "    - {probability: 1/4, dataset: d, inputs: {x: a}, targets: {y: b}}\n"
        "    - {repeat: {i: 1, k: 3}, probability: 1/4 + k, dataset: d, inputs: {x: a}, "
        "targets: {y: b}}\n",
        None,
        ["derive"],
        r"task\.contexts\[1\] \(i=0, k=1\)\.probability: probability 5/4",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_RUNS))
def test_each_bad_run_is_one_line_naming_the_file(case, tmp_path, capsys) -> None:
    import re

    text, setup, args, match = BAD_RUNS[case]
    if setup is not None:
        setup(tmp_path)
    if case == "truncated graphml":
        path = tmp_path / "bad.graphml"
    elif text is None:
        path = GRAPHS / "routing.yaml"
    else:
        path = tmp_path / "bad.yaml"
        path.write_text(text)
    code, _, err = run([args[0], str(path), *args[1:]], capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and re.search(match, lines[0]), err
    assert path.name in lines[0]


@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_solve_output_has_the_loss_of_each_context(fmt, tmp_path, capsys) -> None:
    # Routing with a seeded random choice of routes: outputs are trained different numbers
    # of times, so the contexts' losses differ. Each context's loss in the output must be
    # the full network's loss on that context's examples, with the weights rebuilt from
    # the reduced variables (Eq. 9), and the losses must average to the total.
    import csv
    import io

    import numpy as np
    from helpers import full_context_losses

    import gdln

    params = ["--param", "M=4", "--param", "K=2", "--param", "seed=1", "--param", "hidden=6"]
    args = ["solve", str(GRAPHS / "routing.yaml"), *params, "--lump", "none", "--init", "0.2"]
    code, out, _ = run([*args, "--t-max", "6", "--points", "4", "--format", fmt], capsys)
    assert code == 0
    problem = gdln.load(
        GRAPHS / "routing.yaml", params={"M": "4", "K": "2", "seed": "1", "hidden": "6"}
    )
    labels = [c.label for c in problem.task.contexts]
    if fmt == "json":
        data = json.loads(out)
        t, loss = np.array(data["t"]), np.array(data["loss"])
        per_context = np.array([data["context_loss"][label] for label in labels]).T
        variables = {k: np.array(v).T for k, v in data["variables"].items()}
    else:
        rows = list(csv.reader(io.StringIO(out.partition("\n")[2])))  # after variable_edges
        table = np.array(rows[1:], dtype=float)
        column = {name: table[:, i] for i, name in enumerate(rows[0])}
        t, loss = column["t"], column["loss"]
        per_context = np.column_stack([column[f"loss in context {label}"] for label in labels])
        variables = {}
        for name, values in column.items():
            if " (mode " in name:
                variables.setdefault(name.split(" (mode ")[0], []).append(values)
        variables = {k: np.column_stack(v) for k, v in variables.items()}
    p = np.array([float(c.probability) for c in problem.task.contexts])
    digits = 1e-12 if fmt == "json" else 1e-10  # the CSV prints 12 significant digits
    np.testing.assert_allclose(per_context @ p, loss, rtol=digits)
    assert np.ptp(per_context[-1]) > 1e-3  # the contexts really differ
    reduction = gdln.reduce(problem, lump="none", b0=0.2)
    edges = {str(v): s.edges[v][0] for s in reduction.systems for v in s.variables}
    modes = {str(v): s.modes for s in reduction.systems for v in s.variables}
    for k in range(len(t)):
        weights = {}
        for edge in problem.graph.edges:
            left, right, slots = reduction.edge_bases(edge, seed=0)
            b = np.zeros(len(slots))
            for name in edges:
                if edges[name] == edge:
                    for j, alpha in enumerate(modes[name]):
                        b[slots.index(alpha)] = variables[name][k, j]
            weights[edge] = left @ np.diag(b) @ right.T
        expected = full_context_losses(problem, weights)
        np.testing.assert_allclose(per_context[k], expected, rtol=1e-8)


def test_symbolic_data_through_stats_derive_and_solve(tmp_path, capsys) -> None:
    path = tmp_path / "sym.yaml"
    path.write_text(
        "symbols: [a]\n" + TWO_NODES + "task: {examples: [{inputs: {x: [1, 0]}, targets: {y: [a]}},"
        " {inputs: {x: [0, 1]}, targets: {y: [0]}}]}\n"
    )
    code, out, _ = run(["stats", str(path), "--format", "json"], capsys)
    a = sp.Symbol("a", positive=True)
    values = json.loads(out)["mode_values"]
    assert code == 0 and sp.simplify(sp.sympify(values["S(x->y)"][0], {"a": a}) - a / 2) == 0
    code, out, _ = run(["derive", str(path), "--format", "json"], capsys)
    (system,) = json.loads(out)["systems"]
    assert code == 0 and system["symbols"]["s"] == ["a/2"]
    code, out, _ = run(
        ["solve", str(path), "--param", "a=2", "--t-max", "1", "--format", "json"], capsys
    )
    assert code == 0 and json.loads(out)["loss"][0] == pytest.approx(1.0, rel=1e-2)  # <y^2>/2 = 1


# ------------------------------------------------------------------ startup cost of --help

HEAVY = ("torch", "sympy", "scipy")

HELP_PROBE = """\
import json, sys
from gdln.cli import main
try:
    main(sys.argv[1:])
except SystemExit as exc:
    assert not exc.code, exc.code
print(json.dumps(sorted(m for m in {heavy!r} if m in sys.modules)), file=sys.stderr)
"""


@pytest.mark.parametrize(
    "command",
    ["", "paths", "stats", "derive", "solve", "simulate", "compare", "kernel", "sd", "schema"],
)
def test_help_imports_nothing_heavy(command: str) -> None:
    # Its time is measured in benchmarks/bench_startup.py, not asserted here.
    argv = [command, "--help"] if command else ["--help"]
    result = subprocess.run(
        [sys.executable, "-c", HELP_PROBE.format(heavy=HEAVY), *argv],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "Usage: gdln" in result.stdout
    imported = json.loads(result.stderr.strip().splitlines()[-1])
    assert imported == [], f"gdln {command} --help imported {imported}"


THEORY_PROBE = """\
import sys
from gdln.cli import main
graph = sys.argv[1]
for argv in (["paths", graph], ["stats", graph], ["derive", graph], ["solve", graph, "--t-max", "1", "--format", "json"]):
    main(argv)
print("torch" in sys.modules, file=sys.stderr)
"""


def test_theory_commands_never_import_torch() -> None:
    result = subprocess.run(
        [sys.executable, "-c", THEORY_PROBE, str(GRAPHS / "xor.yaml")],
        capture_output=True,
        text=True,
        check=True,
    )
    assert '"loss"' in result.stdout and "x->h0->y" in result.stdout
    assert result.stderr.strip().splitlines()[-1] == "False"


def test_group_help_lists_each_command_with_its_own_one_line_help(capsys) -> None:
    from gdln.cli._main import COMMANDS, cli

    code, out, _ = run(["--help"], capsys)
    assert code == 0
    for name, entry in COMMANDS.items():
        command = cli.get_command(None, name)  # type: ignore[arg-type]
        assert command is not None and command.get_short_help_str(limit=200) == entry.help
        assert name in out and " ".join(entry.help.split()[:4]) in " ".join(out.split())


def test_version(capsys) -> None:
    import gdln

    code, out, _ = run(["--version"], capsys)
    assert code == 0 and out.strip() == f"gdln, version {gdln.__version__}"


# ------------------------------------------------------------------ outputs

XOR = str(GRAPHS / "xor.yaml")


@pytest.mark.parametrize(
    ("command", "extension", "fmt"),
    [
        ("paths", ".txt", "text"),
        ("paths", ".json", "json"),
        ("stats", ".tex", "latex"),
        ("derive", ".json", "json"),
        ("derive", ".tex", "latex"),
        ("solve", ".csv", "csv"),
        ("solve", ".json", "json"),
        ("solve", ".txt", "text"),
    ],
)
def test_the_format_follows_the_extension(command, extension, fmt, tmp_path, capsys) -> None:
    out_file = tmp_path / f"out{extension}"
    extra = ["--t-max", "1", "--points", "3"] if command == "solve" else []
    code, _, err = run([command, XOR, *extra, "-o", str(out_file)], capsys)
    assert code == 0 and err == f"wrote {out_file}\n"
    code, printed, _ = run([command, XOR, *extra, "--format", fmt], capsys)
    assert code == 0 and out_file.read_text() == printed
    code, _, err = run(
        [command, XOR, *extra, "--format", fmt, "-o", str(out_file), "--force"], capsys
    )
    assert code == 0 and out_file.read_text() == printed  # an agreeing --format is fine


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["solve", XOR, "--format", "csv", "-o", "out.json"],
            "--format csv conflicts with -o out.json, a json file; drop --format or change "
            "the extension to .csv",
        ),
        (
            ["derive", XOR, "--format", "text", "-o", "out.tex"],
            "--format text conflicts with -o out.tex",
        ),
        (
            ["solve", XOR, "-o", "out.tex"],
            "-o out.tex: expected a file ending in .txt or .json or .csv",
        ),
        (["paths", XOR, "-o", "out.tex"], "-o out.tex: expected a file ending in .txt or .json"),
        (
            ["solve", XOR, "-o", "missing/out.json"],
            "-o missing/out.json: the folder missing does not exist",
        ),
        (["solve", XOR, "-o", "folder.json"], "-o folder.json: is a folder; expected a file"),
        (
            ["solve", XOR, "--route", "matrix", "--lump", "full"],
            "--lump full and --route matrix: the full matrices are not lumped",
        ),
    ],
)
def test_output_refusals_are_one_line_and_write_nothing(
    args, message, tmp_path, capsys, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "folder.json").mkdir()
    code, out, err = run(args, capsys)
    assert code == 2 and out == "" and len(err.splitlines()) == 1
    assert err.startswith(f"gdln: error: {message}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder.json"]


def test_refusal_comes_before_any_computation(tmp_path, capsys) -> None:
    # The graph file does not exist: had the command read it first, the error would name it.
    (tmp_path / "out.json").write_text("keep")
    code, _, err = run(
        ["solve", str(tmp_path / "nope.yaml"), "-o", str(tmp_path / "out.json")], capsys
    )
    assert code == 2 and "exists; pass --force" in err and "nope.yaml" not in err
    assert (tmp_path / "out.json").read_text() == "keep"


def test_an_error_leaves_no_partial_output(tmp_path, capsys) -> None:
    out_file = tmp_path / "out.json"
    diverging = ["solve", str(GRAPHS / "routing.yaml"), "--dynamics", "gd-map", "--lr", "100"]
    diverging += ["--t-max", "1000"]
    code, _, err = run([*diverging, "-o", str(out_file)], capsys)
    assert code == 2 and "diverged" in err
    assert list(tmp_path.iterdir()) == []  # no output and no temporary file
    out_file.write_text("old")
    code, _, _ = run([*diverging, "-o", str(out_file), "--force"], capsys)
    assert code == 2 and out_file.read_text() == "old" and list(tmp_path.iterdir()) == [out_file]


def test_written_files_get_the_usual_permissions(tmp_path, capsys) -> None:
    import os
    import stat

    out_file = tmp_path / "p.txt"
    assert run(["paths", XOR, "-o", str(out_file)], capsys)[0] == 0
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(out_file.stat().st_mode) == 0o666 & ~umask


# ------------------------------------------------------------------ file defaults

XOR_SETTINGS = "solve: {b0: 0.01, t_max: 10}"


def _xor_with(tmp_path, settings: str):
    """xor.yaml with its ``solve:`` section replaced by ``settings``."""
    text = (GRAPHS / "xor.yaml").read_text()
    assert XOR_SETTINGS in text
    path = tmp_path / "xor_settings.yaml"
    path.write_text(text.replace(XOR_SETTINGS, f"solve: {{{settings}}}"))
    return path


def test_solve_without_out_prints_a_short_summary_that_agrees_with_the_trajectory(
    capsys,
) -> None:
    import re

    import numpy as np

    args = ["solve", str(GRAPHS / "routing.yaml"), "--t-max", "30", "--points", "61"]
    code, summary, _ = run(args, capsys)
    assert code == 0 and len(summary) < 1000 and '"loss"' not in summary
    code, out, _ = run([*args, "--format", "json"], capsys)
    data = json.loads(out)
    t, loss = np.array(data["t"]), np.array(data["loss"])
    # the half-loss time by its definition, L(t) = L(0)/2, interpolated between records
    i = int(np.argmax(loss <= loss[0] / 2))
    half = t[i - 1] + (loss[i - 1] - loss[0] / 2) / (loss[i - 1] - loss[i]) * (t[i] - t[i - 1])
    shown = re.search(r"loss ([\d.e+-]+) at t = 0, ([\d.e+-]+) at t = 30", summary)
    assert shown is not None, summary
    assert float(shown[1]) == pytest.approx(loss[0], rel=1e-5)
    assert float(shown[2]) == pytest.approx(loss[-1], rel=1e-5)
    reached = re.search(r"half the initial loss: ([\d.e+-]+) tau", summary)
    assert reached is not None and float(reached[1]) == pytest.approx(half, rel=1e-3)
    assert "-o FILE.json" in summary  # says how to get the whole trajectory
    code, early, _ = run(["solve", str(GRAPHS / "routing.yaml"), "--t-max", "1"], capsys)
    assert code == 0 and "half the initial loss: never (before t = 1 tau)" in early


def test_solve_honours_the_files_lr_and_the_command_line_overrides_it(tmp_path, capsys) -> None:
    import numpy as np

    import gdln

    path = _xor_with(tmp_path, "b0: 0.01, t_max: 10, lr: 0.5, dynamics: gd-map")
    problem = gdln.load(path)
    reduction = gdln.reduce(problem, lump="symmetry", b0=0.01)

    def loss(*extra: str) -> np.ndarray:
        code, out, err = run(
            ["solve", str(path), "--points", "11", "--format", "json", *extra], capsys
        )
        assert code == 0, err
        return np.array(json.loads(out)["loss"])

    expected = {
        lr: gdln.solve(
            reduction, t_max=10, dynamics="flow" if lr is None else "gd-map", lr=lr, points=11
        ).loss
        for lr in (0.5, 0.25, None)
    }
    np.testing.assert_allclose(loss(), expected[0.5], rtol=1e-12)
    np.testing.assert_allclose(loss("--lr", "0.25"), expected[0.25], rtol=1e-12)
    np.testing.assert_allclose(loss("--dynamics", "flow"), expected[None], rtol=1e-10)
    assert np.max(np.abs(expected[0.5] - expected[None])) > 1e-3  # the file's lr matters


def test_derive_and_solve_honour_the_files_lump_and_init(tmp_path, capsys) -> None:
    path = _xor_with(tmp_path, "b0: 0.25, t_max: 2, lump: none")
    code, out, _ = run(["derive", str(path), "--format", "json"], capsys)
    names = [v["name"] for system in json.loads(out)["systems"] for v in system["variables"]]
    assert code == 0 and len(names) == 8 and all(name.startswith("b_") for name in names)
    code, out, _ = run(["derive", str(path), "--format", "json", "--lump", "full"], capsys)
    assert code == 0 and len([v for s in json.loads(out)["systems"] for v in s["variables"]]) < 8
    code, out, _ = run(["solve", str(path), "--points", "3", "--format", "json"], capsys)
    data = json.loads(out)
    assert code == 0 and data["t"][-1] == pytest.approx(2.0)
    starts = [series[0] for modes in data["variables"].values() for series in modes]
    assert starts == pytest.approx([0.25] * len(starts))  # b(0) from the file's init


def test_lump_defaults_to_symmetry(capsys) -> None:
    code, default, _ = run(["derive", str(GRAPHS / "routing.yaml"), "--format", "json"], capsys)
    code2, symmetry, _ = run(
        ["derive", str(GRAPHS / "routing.yaml"), "--format", "json", "--lump", "symmetry"], capsys
    )
    assert code == code2 == 0 and json.loads(default) == json.loads(symmetry)
    assert json.loads(default)["lump"] == "symmetry"


# ------------------------------------------------------------------ errors


def test_os_errors_are_one_line(tmp_path, capsys) -> None:
    (tmp_path / "dir.yaml").mkdir()
    code, _, err = run(["derive", str(tmp_path / "dir.yaml")], capsys)
    assert (
        code == 2
        and err == f"gdln: error: {tmp_path / 'dir.yaml'}: is a directory; expected a file\n"
    )


def test_debug_shows_the_traceback(monkeypatch, capsys) -> None:
    import gdln
    from gdln.cli import main

    with pytest.raises(gdln.GraphSpecError, match=r"missing\.yaml: no such file"):
        main(["--debug", "derive", "missing.yaml"])
    monkeypatch.setenv("GDLN_DEBUG", "1")
    with pytest.raises(gdln.GraphSpecError, match=r"missing\.yaml: no such file"):
        main(["derive", "missing.yaml"])
    monkeypatch.setenv("GDLN_DEBUG", "0")
    code, _, err = run(["derive", "missing.yaml"], capsys)
    assert code == 2 and err.startswith("gdln: error: missing.yaml")


def test_the_command_line_imports_only_the_public_api() -> None:
    import ast
    from pathlib import Path

    import gdln.cli

    for module in sorted(Path(gdln.cli.__file__).parent.glob("*.py")):
        tree = ast.parse(module.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                assert not any(part.startswith("_") for part in node.module.split(".")[1:]), (
                    f"{module.name} imports {node.module}"
                )
            if isinstance(node, ast.ImportFrom) and node.level > 0:
                assert node.level == 1, f"{module.name} imports from outside gdln.cli"
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute):
                base = node.value
                if isinstance(base.value, ast.Name) and base.value.id == "gdln":
                    assert not base.attr.startswith("_") or base.attr == "__version__"
                    assert not node.attr.startswith("_"), (
                        f"{module.name}: gdln.{base.attr}.{node.attr}"
                    )
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "gdln"
            ):
                assert not node.attr.startswith("_") or node.attr == "__version__", node.attr


# ------------------------------------------------------------------ stats: width, numbers

WIDE_Y = np.random.default_rng(0).normal(size=(8, 8)).round(9)  # example i: x = e_i, y = row i


def _wide_graph(tmp_path: Path) -> Path:
    examples = "\n".join(
        f"    - {{inputs: {{x: {[int(i == j) for j in range(8)]}}}, targets: {{y: {list(y)}}}}}"
        for i, y in enumerate(WIDE_Y.tolist())
    )
    path = tmp_path / "wide.yaml"
    path.write_text(
        "name: wide\nnodes:\n  - {id: x, size: 8}\n  - {id: y, size: 8}\n"
        "edges:\n  - {source: x, target: y}\ntask:\n  examples:\n" + examples + "\n"
    )
    return path


def _sigma_yx_rows(text: str) -> list[str]:
    lines = text.splitlines()
    start = lines.index("Sigma_yx(x->y) =") + 1
    return lines[start : start + 8]


def test_stats_numeric_shows_exact_values_as_decimals(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setattr("shutil.get_terminal_size", lambda *a, **k: os.terminal_size((250, 40)))
    path = _wide_graph(tmp_path)
    code, exact, _ = run(["stats", str(path)], capsys)
    assert code == 0 and "-----" in exact  # fractions, drawn as such
    code, out, _ = run(["stats", str(path), "--numeric"], capsys)
    assert code == 0 and "-----" not in out
    rows = _sigma_yx_rows(out)
    shown = np.array([[float(v) for v in re.findall(r"-?[\d.]+(?:e[+-]?\d+)?", r)] for r in rows])
    # Eq. (5) by hand: one path x->y, Sigma_yx = <y x^T> = Y^T / 8 for one-hot inputs
    np.testing.assert_allclose(shown, WIDE_Y.T / 8, rtol=0, atol=6e-7)  # 6 decimals


def test_stats_wraps_at_the_terminals_width(tmp_path, capsys, monkeypatch) -> None:
    path = _wide_graph(tmp_path)
    for columns in (60, 250):
        size = os.terminal_size((columns, 40))
        monkeypatch.setattr("shutil.get_terminal_size", lambda *a, s=size, **k: s)
        code, out, _ = run(["stats", str(path), "--numeric"], capsys)
        widths = [len(line) for line in out.splitlines() if line.startswith("  [")]
        assert code == 0 and max(widths) <= columns
        if columns == 250:  # a wide terminal: each row of the 8 x 8 matrix on one line
            assert len(_sigma_yx_rows(out)[-1].strip()) > 80
            assert _sigma_yx_rows(out)[-1].rstrip().endswith("]]")


def test_the_program_flushes_everything_before_it_ends_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The program skips the interpreter's teardown after its output is flushed: a pipe
    gets every line the command prints in this process, and the exit status is kept."""
    argv = ["derive", str(GRAPHS / "routing.yaml"), "--param", "M=3", "--param", "K=2"]
    code, out, _ = run_cli(argv, capsys)
    program = subprocess.run(
        [sys.executable, "-m", "gdln", *argv], capture_output=True, text=True, timeout=120
    )
    assert (program.returncode, program.stdout) == (code, out) and code == 0 and out
    missing = subprocess.run(
        [sys.executable, "-m", "gdln", "derive", str(tmp_path / "none.yaml")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1
