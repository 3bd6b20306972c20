"""Notebook reprs: LaTeX that MathJax can read and that shows the objects' expressions,
HTML tables whose numbers are the objects' values with a PNG that decodes, and the
routing walkthrough notebook run headless."""

from __future__ import annotations

import base64
import io
import re
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
import sympy as sp
from helpers import ROOT, load

import gdln

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


# -- LaTeX ---------------------------------------------------------------------------------


def check_display_math(latex: str) -> list[str]:
    r"""Assert ``latex`` is one balanced ``$$\begin{aligned}...\end{aligned}$$``; its rows."""
    assert latex.startswith("$$\\begin{aligned}\n") and latex.endswith("\n\\end{aligned}$$")
    body = latex[len("$$\\begin{aligned}\n") : -len("\n\\end{aligned}$$")]
    unescaped = re.sub(r"\\[{}%$]", "", body)
    depth = 0
    for c in unescaped:
        depth += {"{": 1, "}": -1}.get(c, 0)
        assert depth >= 0, body
    assert depth == 0, body
    assert "%" not in unescaped and "$" not in unescaped  # MathJax: no comments, no nesting
    stack = []
    for kind, name in re.findall(r"\\(begin|end)\{(\w+)\}", body):
        if kind == "begin":
            stack.append(name)
        else:
            assert stack.pop() == name
    assert not stack
    assert body.count("\\left") == body.count("\\right")
    rows = body.split(" \\\\\n")
    assert all(r.count("&") == 1 for r in rows if "matrix" not in r)  # one alignment point
    return rows


def equations(rows: list[str]) -> dict[str, list[str]]:
    """``left &= right`` rows as left -> the right-hand sides shown for it."""
    out: dict[str, list[str]] = {}
    for row in rows:
        if " &= " in row:
            left, right = row.split(" &= ", 1)
            out.setdefault(left, []).append(right)
    return out


def test_routing_reduction_shows_eqs_44_to_46_and_its_conserved_quantities() -> None:
    M = 5
    reduction = gdln.reduce(load("routing", M=M, K=3), lump="symmetry")
    shown = equations(check_display_math(reduction._repr_latex_()))
    B1, B2, B3, s, d = sp.symbols("B1 B2 B3 s d")
    error = s - B1 * B2 * B3 * d
    paper = {B1: B2 * B3 * error / M, B2: B1 * B3 * error, B3: B1 * B2 * error / M}
    for v, rhs in paper.items():  # Eqs. (44)-(46) of Saxe et al. 2022
        assert shown[rf"\tau \frac{{d {sp.latex(v)}}}{{dt}}"] == [sp.latex(rhs)]
    conserved = [q.removeprefix(r"\frac{d}{dt}\left(").removesuffix(r"\right)") for q in shown]
    assert sp.latex(M * B1**2 - B2**2) in conserved
    assert shown[r"\mathcal{L}"] == [r"\frac{61}{2} + \sum_\alpha \mathcal{L}_\alpha"]


@pytest.mark.parametrize(
    ("name", "params", "lump"),
    [
        ("xor", {}, "symmetry"),
        ("crosspath", {}, "none"),
        ("routing", {"M": 4, "K": 2}, "balanced"),
        ("routing", {"M": 4, "K": 2}, "full"),
    ],
)
def test_reduction_latex_shows_every_expression_of_every_system(
    name: str, params: dict[str, int], lump: str
) -> None:
    reduction = gdln.reduce(load(name, **params), lump=lump, b0=0.1)
    rows = check_display_math(reduction._repr_latex_())
    shown = equations(rows)
    expected: dict[str, list[str]] = {}
    for system in reduction.systems:
        sub = equations(check_display_math(system._repr_latex_()))
        want: dict[str, list[str]] = {}
        for v in system.variables:
            want.setdefault(rf"\tau \frac{{d {sp.latex(v)}}}{{dt}}", []).append(
                sp.latex(system.rhs[v])
            )
        for v, e in {**system.eliminated, **system.constants}.items():
            want.setdefault(sp.latex(v), []).append(sp.latex(sp.sympify(e)))
        want.setdefault(r"\mathcal{L}_\alpha", []).append(sp.latex(system.loss))
        for s, values in system.symbols.items():
            entries = r",\ ".join(sp.latex(sp.sympify(x)) for x in values)
            want.setdefault(sp.latex(s), []).append(rf"\left({entries}\right)\ \text{{per mode}}")
        for left, rights in want.items():
            assert sub[left] == rights  # the system's own repr shows the same
            expected.setdefault(left, []).extend(rights)
        for form in system.closed_form.values():  # each under the label of what it is
            want = CLOSED_FORM_LABELS[form.kind].format(B=sp.latex(form.variable))
            assert sub[want] == [sp.latex(form.expr)]
    for left, rights in expected.items():
        assert shown[left] == rights


# What each closed form is, by kind: t(B) and B(t) solve tau dB/dt = f(B); theta(B) is the
# angle of B = sqrt(k) sinh(theta), tau dtheta/dt its ODE and t(theta) that ODE's solution.
CLOSED_FORM_LABELS = {
    "separable": "t({B})",
    "explicit": "{B}(t)",
    "theta": r"\theta({B})",
    "theta_rhs": r"\tau \frac{{d\theta}}{{dt}}",
    "t_theta": r"t(\theta)",
}


@pytest.mark.parametrize(
    ("name", "params", "lump", "kinds"),
    [
        ("routing", {"M": 4, "K": 2}, "full", ["separable", "theta", "theta_rhs", "t_theta"]),
        ("xor", {}, "full", ["separable", "explicit"]),
    ],
)
def test_closed_forms_are_labelled_by_what_they_are_in_both_latex_printouts(
    name: str, params: dict[str, int], lump: str, kinds: list[str]
) -> None:
    """The notebook display and ``derive --format latex`` print the same equations, and
    a closed form is labelled as what it is: never theta_{rhs}(t), t_{theta}(t) or
    theta(t) for tau dtheta/dt, t(theta) and theta(B) (issue 23)."""
    reduction = gdln.reduce(load(name, **params), lump=lump, b0=0.1)
    derived = gdln.format_derivation(reduction, "latex").split("\n% system ")[1:]
    assert len(derived) == len(reduction.systems)
    for system, printed in zip(reduction.systems, derived, strict=True):
        (B,) = system.variables
        assert sorted(f.kind for f in system.closed_form.values()) == sorted(kinds)
        rows = check_display_math(system._repr_latex_())
        notebook = [r.replace(" &= ", " = ") for r in rows if " &= " in r and "per mode" not in r]
        lines = [line for line in printed.splitlines()[1:] if line and not line.startswith("%")]
        assert lines == notebook
        for kind in kinds:
            label = CLOSED_FORM_LABELS[kind].format(B=sp.latex(B))
            (expr,) = [f.expr for f in system.closed_form.values() if f.kind == kind]
            assert f"{label} = {sp.latex(expr)}" in lines
        for wrong in (r"\theta_{rhs}", r"t_{\theta}", r"\theta(t)"):
            assert wrong not in reduction._repr_latex_() + "".join(lines)


def test_statistics_latex_shows_each_matrix_and_counts_the_rest() -> None:
    problem = load("routing", M=3, K=2)
    stats = gdln.path_statistics(problem.graph, problem.require_task())
    rows = check_display_math(stats._repr_latex_())
    matrices = [r.split(" &= ", 1)[1] for r in rows if " &= " in r]
    shown = gdln.paths._latex.SHOWN
    want = list(stats.input_output.values())[:shown] + list(stats.input.values())[:shown]
    assert matrices == [sp.latex(m, mat_delim="[", mat_str="matrix") for m in want]
    assert f"{len(stats.paths)} active paths" in rows[0]
    left_out = len(stats.input_output) - shown
    assert (f"and {left_out} more" in " ".join(rows)) == (left_out > 0)
    assert left_out > 0 and "gdln stats FILE --format latex" in rows[-1]  # how to see all
    assert len(matrices) <= 2 * shown  # a summary, not a wall of matrices


# MathJax's rules: inside \text{...} every character shows as it stands (no macros);
# in math mode these escapes show one character each.
MATHJAX_MATH = {
    r"\_": "_",
    r"\{": "{",
    r"\}": "}",
    r"\#": "#",
    r"\%": "%",
    r"\&": "&",
    r"\$": "$",
    r"\backslash ": "\\",
    r"\hat{}": "^",
    r"\sim ": "~",
}


def shown_by_mathjax(latex: str) -> str:
    """What MathJax displays for a sequence of \text{...} pieces and escapes."""
    shown, i = "", 0
    while i < len(latex):
        if latex.startswith(r"\text{", i):
            end = latex.index("}", i)
            shown += latex[i + len(r"\text{") : end]
            i = end + 1
            continue
        escape = next(e for e in MATHJAX_MATH if latex.startswith(e, i))
        shown += MATHJAX_MATH[escape]
        i += len(escape)
    return shown


@pytest.mark.parametrize(
    "text", ["gated_skip: lump=symmetry", "a{b}#c%d&e$f", "back\\slash ^ and ~", "", "plain"]
)
def test_names_in_latex_show_as_written_in_mathjax(text: str) -> None:
    from gdln.paths._latex import latex_text

    latex = latex_text(text)
    assert shown_by_mathjax(latex) == text
    for body in re.findall(r"\\text\{([^}]*)\}", latex):
        assert "\\" not in body  # MathJax would show the backslash


def test_a_reductions_heading_shows_an_underscored_name_without_a_backslash(
    tmp_path: Path,
) -> None:
    source = (ROOT / "graphs" / "chain.yaml").read_text().replace("name: chain", "name: gated_skip")
    (tmp_path / "gated_skip.yaml").write_text(source)
    reduction = gdln.reduce(gdln.load(tmp_path / "gated_skip.yaml"))
    rows = check_display_math(reduction._repr_latex_())
    assert rows[0].startswith(r"&\text{gated}\_\text{skip: lump=")
    orbit = [r for r in rows if "orbit" in r]
    assert orbit and all(r"\to" not in r for r in orbit)  # the edges go on the next row


def latex_floats(matrix: str) -> np.ndarray:
    r"""The numbers of a ``\left[\begin{matrix}...`` of floats (``a \cdot 10^{b}`` too)."""
    inner = matrix.removeprefix(r"\left[\begin{matrix}").removesuffix(r"\end{matrix}\right]")
    number = re.compile(r"^(-?[\d.]+)(?: \\cdot 10\^\{(-?\d+)\})?$")
    rows = []
    for row in inner.split(r"\\"):
        values = []
        for entry in row.split(" & "):
            match = number.match(entry.strip())
            assert match, entry
            values.append(float(match[1]) * 10.0 ** int(match[2] or 0))
        rows.append(values)
    return np.array(rows)


def test_float_statistics_show_their_values_to_six_digits() -> None:
    path = gdln.Path(("x", "h", "y"))
    yx = np.array([[0.5, 1 / 3, -2e-9]])
    xx = np.array([[1.25, np.pi, 0], [np.pi, 2, 0], [0, 0, 1e5 / 7]])
    stats = gdln.PathStatistics((path,), {path: yx}, {(path, path): xx}, exact=False)
    rows = check_display_math(stats._repr_latex_())
    assert "(float)" in rows[0]
    shown = [latex_floats(r.split(" &= ", 1)[1]) for r in rows[1:]]
    assert shown[0] == pytest.approx(yx, rel=1e-5)
    assert shown[1] == pytest.approx(xx, rel=1e-5)


# -- HTML ----------------------------------------------------------------------------------


class Tables(HTMLParser):
    """Collects ``<th>name</th><td>value</td>`` rows, captions and image sources."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, str] = {}
        self.captions: list[str] = []
        self.images: list[str] = []
        self._cell: str | None = None
        self._key = ""
        self._open: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "img":  # a void element: never closed
            self.images.append(dict(attrs)["src"] or "")
            return
        self._open.append(tag)
        if tag in ("th", "td", "caption"):
            self._cell = ""

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)

    def handle_endtag(self, tag: str) -> None:
        assert self._open.pop() == tag  # well nested
        if tag == "th":
            self._key = self._cell or ""
        elif tag == "td":
            self.rows[self._key] = self._cell or ""
        elif tag == "caption":
            self.captions.append(self._cell or "")
        self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell += data


def parse(html: str) -> Tables:
    tables = Tables()
    tables.feed(html)
    tables.close()
    assert not tables._open
    return tables


def decode_png(src: str) -> np.ndarray:
    """The image of a ``data:image/png;base64`` URI, decoded by matplotlib."""
    import matplotlib.image

    prefix = "data:image/png;base64,"
    assert src.startswith(prefix)
    png = base64.b64decode(src[len(prefix) :], validate=True)
    assert png.startswith(PNG_SIGNATURE)
    image = matplotlib.image.imread(io.BytesIO(png), format="png")
    assert image.ndim == 3 and image.shape[0] > 50 and image.shape[1] > 50
    assert image.std() > 0  # something is drawn
    return image


def close(text: str, value: float) -> bool:
    return float(text) == pytest.approx(value, rel=1e-5)


def test_trajectory_html_table_holds_its_values_and_a_loss_plot() -> None:
    reduction = gdln.reduce(load("routing", M=4, K=2), lump="symmetry", b0=0.1)
    trajectory = gdln.solve(reduction, t_max=5, points=11)
    tables = parse(trajectory._repr_html_())
    rows = tables.rows
    assert tables.captions == ["Trajectory"]
    assert rows["records"] == "11"
    assert rows["time span (t / tau)"] == "0 to 5"
    assert close(rows["initial loss"], trajectory.loss[0])
    assert close(rows["final loss"], trajectory.loss[-1])
    assert rows["series"].split(", ") == sorted(trajectory.series)
    assert rows["method"] == "ode"
    (src,) = tables.images
    decode_png(src)


def test_trajectory_html_with_seeds_shows_the_mean_and_each_seed() -> None:
    t = np.linspace(0, 2, 5)
    loss = np.column_stack([np.exp(-t), 2 * np.exp(-t), 3 * np.exp(-2 * t)])
    rows = parse(gdln.Trajectory(t, loss)._repr_html_()).rows
    assert rows["seeds"] == "3"
    assert close(rows["final loss"], loss[-1].mean())
    per_seed = [float(x) for x in rows["final loss per seed"].split(", ")]
    assert per_seed == pytest.approx(loss[-1], rel=1e-5)
    assert rows["series"] == "none"


def _runs() -> dict[str, gdln.Trajectory]:
    t = np.linspace(0, 4, 9)
    return {
        "ode": gdln.Trajectory(t, 3 * np.exp(-t)),
        "gd_map": gdln.Trajectory(t, 3 * np.exp(-1.01 * t)),
        "decoupled": gdln.Trajectory(t, 3 * np.exp(-1.01 * t)),
        "random": gdln.Trajectory(t, np.column_stack([3 * np.exp(-0.9 * t), 3 * np.exp(-t)])),
    }


METRICS = {
    "graph": "routing",
    "lr": 0.05,
    "t_max": 4.0,
    "steps": 80,
    "initial_loss": 3.0,
    "decoupled_vs_map": 5.8e-16,
    "decoupled_vs_ode": 2.4e-05,
    "map_vs_ode": 2.4e-05,
    "random_vs_ode": {"seeds": 2, "median": 0.0125, "q1": 0.01, "q3": 0.015, "min": 0.01},
    "random_mean_vs_ode": 1.8e-04,
    "time_to_half_loss": {
        "ode": 0.693,
        "gd_map": None,
        "decoupled": 0.686,
        "random": {"seeds": 2, "censored": 0, "median": 0.73},
    },
}


def test_compare_html_table_holds_the_metrics_and_draws_the_runs() -> None:
    result = gdln.CompareResult(METRICS, **_runs())
    tables = parse(result._repr_html_())
    rows = tables.rows
    assert rows["graph"] == "routing"
    assert rows["lr, t_max, steps"] == "0.05, 4, 80"
    for key, label in [
        ("decoupled_vs_map", "decoupled vs GD map"),
        ("decoupled_vs_ode", "decoupled vs ODE"),
        ("map_vs_ode", "GD map vs ODE"),
        ("random_mean_vs_ode", "random (seed mean) vs ODE"),
    ]:
        assert close(rows[f"{label} (max |gap| / L(0))"], METRICS[key])  # type: ignore[arg-type]
    spread = rows["random vs ODE over 2 seeds (median [q1, q3])"]
    assert [float(x) for x in re.findall(r"[\d.e+-]+", spread)] == [0.0125, 0.01, 0.015]
    assert close(rows["t at L(0)/2, reduced ODE"], 0.693)
    assert rows["t at L(0)/2, reduced GD map"] == "never"
    assert close(rows["t at L(0)/2, full network, random init (median)"], 0.73)
    (src,) = tables.images
    decode_png(src)


def test_compare_html_embeds_the_loss_figure_that_compare_wrote(tmp_path: Path) -> None:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(2, 2))
    fig.add_subplot().plot([0, 1], [1, 0])
    fig.savefig(tmp_path / "loss.png")
    written = (tmp_path / "loss.png").read_bytes()
    result = gdln.CompareResult(METRICS, **_runs(), files=(tmp_path / "loss.png",))
    (src,) = parse(result._repr_html_()).images
    assert base64.b64decode(src.split(",", 1)[1]) == written
    (tmp_path / "loss.png").unlink()  # moved away: the repr draws the runs instead
    (src,) = parse(result._repr_html_()).images
    assert base64.b64decode(src.split(",", 1)[1]) != written
    decode_png(src)


# -- the walkthrough notebook --------------------------------------------------------------


@pytest.mark.slow
def test_routing_walkthrough_notebook_runs_and_renders() -> None:
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    folder = ROOT / "examples"  # Jupyter runs a notebook in its own folder
    notebook = nbformat.read(folder / "routing_walkthrough.ipynb", as_version=4)
    assert all(not cell.get("outputs") for cell in notebook.cells)  # shipped without outputs
    client = nbclient.NotebookClient(
        notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": folder}}
    )
    client.execute()
    kinds: dict[str, list[str]] = {"text/latex": [], "text/html": []}
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            assert output["output_type"] != "error", output
            for kind in kinds:
                if kind in output.get("data", {}):
                    kinds[kind].append(output["data"][kind])
    assert len(kinds["text/latex"]) >= 2  # the reduction and the statistics
    for latex in kinds["text/latex"]:
        check_display_math(latex)
    # the problem shows a table; the trajectory and the comparison each show one figure
    figures = [parse(html).images for html in kinds["text/html"]]
    assert sum(len(images) == 1 for images in figures) >= 2, [len(i) for i in figures]
    for images in figures:
        assert len(images) <= 1
        for src in images:
            decode_png(src)
    assert any(r"\tau \frac{d B_{1}}{dt}" in latex for latex in kinds["text/latex"])
    printed = "".join(
        output.get("text", "") for cell in notebook.cells for output in cell.get("outputs", [])
    )
    assert re.search(r"time to half the loss: ODE \d+\.\d+, GD map \d+\.\d+", printed)
    assert "IProgress" not in printed


# ------------------------------------------------------------------ progress bars in a kernel

KERNEL_WITHOUT_WIDGETS = """\
import sys, types, warnings
import IPython  # a Jupyter kernel: IPython and its shell module are loaded
sys.modules["ipykernel.zmqshell"] = types.ModuleType("ipykernel.zmqshell")
sys.modules["ipywidgets"] = None  # not installed
with warnings.catch_warnings(record=True) as caught:  # (an error would be swallowed)
    warnings.simplefilter("always")
    import gdln
    from gdln.simulation._training import train
assert not caught, [str(w.message) for w in caught]
from gdln.simulation._progress import bar_class
import tqdm.std
assert bar_class() is tqdm.std.tqdm, bar_class()
sys.modules["ipywidgets"] = types.ModuleType("ipywidgets")  # now installed
import tqdm.notebook
assert bar_class() is tqdm.notebook.tqdm, bar_class()
print("ok")
"""


def test_a_notebook_without_widgets_gets_a_text_progress_bar_and_no_warning() -> None:
    """``TqdmWarning: IProgress not found`` was printed in every notebook that imported
    the simulation (tqdm.auto); a subprocess stands in for a kernel without ipywidgets."""
    import subprocess
    import sys

    pytest.importorskip("IPython")
    result = subprocess.run(
        [sys.executable, "-c", KERNEL_WITHOUT_WIDGETS],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert result.returncode == 0 and result.stdout == "ok\n", result.stderr
    assert "IProgress" not in result.stderr
