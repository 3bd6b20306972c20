"""Printable reports of paths, path statistics and reductions: text, LaTeX and JSON.

The JSON forms are for programs: expressions are sympy-parsable strings
(``sympy.parse_expr``), and every symbol's value is given per mode.
"""

from __future__ import annotations

import itertools
import json
import textwrap
from typing import Any

import numpy as np
import sympy as sp

from .._bounded._expressions import as_sympy
from .._bounded._limits import check_work
from .._edge import edge_name
from .._errors import GdlnError
from ..paths._latex import latex_name
from ..paths._paths import enumerate_paths, input_nodes, output_nodes, path_counts
from ..paths._statistics import path_statistics
from ..reduction._latex import equations
from ..reduction._system import Reduction
from ..task._problem import Problem

__all__ = ["format_derivation", "format_paths", "format_statistics"]

FORMATS = ("text", "latex", "json")
MAX_LISTED_PATHS = 10**5  # paths that `gdln paths --format json` writes out one by one


def _check(fmt: str, allowed: tuple[str, ...] = FORMATS) -> None:
    if fmt not in allowed:
        raise ValueError(f"format {fmt!r}: expected one of {', '.join(allowed)}")


def format_paths(problem: Problem, fmt: str = "text", *, limit: int = 200) -> str:
    r"""All input-to-output paths, $|\mathcal{P}(e)|$ per edge and $|\mathcal{T}(v)|$ per output.

    Parameters
    ----------
    problem
        The network (its task is not needed).
    fmt
        ``"text"`` or ``"json"``.
    limit
        Most paths the text form lists one by one; JSON lists them all.

    Returns
    -------
    str
        The report in that format.

    Raises
    ------
    ValueError
        ``fmt`` is not ``"text"`` or ``"json"``.
    GdlnError
        JSON is asked for a network with more than ``MAX_LISTED_PATHS`` paths.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eqs. (3)-(4): the path sets $\mathcal{P}(e)$ and
    $\mathcal{T}(v)$.
    """
    _check(fmt, ("text", "json"))
    graph = problem.graph
    counts = path_counts(graph)
    if fmt == "json":
        if counts.total > MAX_LISTED_PATHS:
            raise GdlnError(
                f"{problem.source}: {counts.total} paths are too many to list in JSON "
                f"(at most {MAX_LISTED_PATHS}); --format text gives their counts"
            )
        return json.dumps(
            {
                "graph": problem.name,
                "nodes": {
                    str(v): {
                        "size": graph.nodes[v]["size"],
                        "gated": bool(graph.nodes[v].get("gated")),
                    }
                    for v in graph.nodes
                },
                "inputs": [str(v) for v in input_nodes(graph)],
                "outputs": [str(v) for v in output_nodes(graph)],
                "paths": [str(p) for p in enumerate_paths(graph)],
                "paths_through_edge": {edge_name(e): n for e, n in counts.through.items()},
                "paths_ending_at": {str(v): n for v, n in counts.ending.items()},
            },
            indent=1,
        )
    lines = [
        f"{problem.name}: {graph.number_of_nodes()} nodes, {graph.number_of_edges()} edges, "
        f"{counts.total} input-output paths"
    ]
    lines.append("")
    lines.append("paths:")
    lines += [f"  {p}" for p in itertools.islice(enumerate_paths(graph), limit)]
    if counts.total > limit:
        more = (
            "--format json lists all" if counts.total <= MAX_LISTED_PATHS else "counted, not listed"
        )
        lines.append(f"  ... and {counts.total - limit} more ({more})")
    lines.append("")
    lines.append("|P(e)|, paths through each edge (Eq. 3):")
    width = max(len(edge_name(e)) for e in graph.edges)
    lines += [f"  {edge_name(e):<{width}}  {n}" for e, n in counts.through.items()]
    lines.append("")
    lines.append("|T(v)|, paths ending at each output node (Eq. 4):")
    lines += [f"  {v}  {n}" for v, n in counts.ending.items()]
    return "\n".join(lines)


STATISTIC_SECONDS = 3e-3
"""Seconds to print one path statistic with its exact values per mode (2-4 ms each for the
10 100 statistics of a fan of 100 pathways, on a 2-core machine)."""

MAX_PRETTY_CELLS = 400
"""Largest exact matrix drawn by sympy's pretty printer (about a millisecond a cell);
larger ones are written as numpy writes an array, each entry as ``str`` gives it."""


def _matrix_text(m: Any, *, width: int = 80, numeric: bool = False) -> str:
    """A matrix as text, wrapped at ``width`` columns; ``numeric``: exact entries as
    decimals (6 decimal places)."""
    if isinstance(m, sp.MatrixBase) and numeric:
        m = m.evalf(6)
        if all(x.is_number for x in m):
            m = np.array(m.tolist(), dtype=float)
    if isinstance(m, sp.MatrixBase) and len(m) > MAX_PRETTY_CELLS:
        texts = [str(x) for x in m]
        size = max(map(len, texts))
        cells = np.array([t.rjust(size) for t in texts], dtype=object).reshape(m.shape)
        return np.array2string(cells, max_line_width=width, formatter={"all": str})
    if isinstance(m, sp.MatrixBase):
        return sp.pretty(m, use_unicode=False, num_columns=width)
    return np.array2string(np.asarray(m), precision=6, suppress_small=True, max_line_width=width)


def _value_text(x: Any, *, numeric: bool) -> str:
    """A value per mode: exact as it is, or (``numeric``) to 6 significant digits."""
    if numeric:
        value = as_sympy(x).evalf(6)
        return f"{float(value):.6g}" if value.is_number else str(value)
    return _str(x)


def _matrix_json(m: Any) -> list[list[str]] | list[list[float]]:
    if isinstance(m, sp.MatrixBase):
        return [[str(x) for x in row] for row in m.tolist()]
    return np.asarray(m).tolist()


def format_statistics(
    problem: Problem,
    reduction: Reduction | None = None,
    fmt: str = "text",
    *,
    width: int = 80,
    numeric: bool = False,
    compact: bool = False,
) -> str:
    r"""$\Sigma^{yx}(p)$, $\Sigma^x(j,p)$ (Eqs. 5-6) and, with a reduction, $U$, $V$, $S$, $D$.

    Parameters
    ----------
    problem
        The network and its task.
    reduction
        A reduction of ``problem``, to add its bases and per-mode values (default: none);
        one derived on the symmetry quotient shows the whole network's
        (:attr:`gdln.Reduction.whole`).
    fmt
        ``"text"``, ``"latex"`` or ``"json"``.
    width
        Text: the columns a matrix may take before it wraps (``gdln stats`` passes the
        terminal's width).
    numeric
        Text: show exact entries and values per mode (such as
        ``-9*sqrt(6227285)/151885``) as decimals: 6 decimal places in a matrix, 6
        significant digits in a value per mode. LaTeX and JSON stay exact.
    compact
        Text: print each distinct statistic once, headed by every path (or pair of
        paths) it holds for, and each distinct list of values per mode once; a
        multitask graph's many equal $\Sigma^x$ blocks then take a few lines.

    Returns
    -------
    str
        The report in that format.

    Raises
    ------
    ValueError
        ``fmt`` is not one of the three formats.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eqs. (5)-(6) (path statistics) and (7)-(8)
    (their diagonalisation in common bases).
    """
    _check(fmt)
    task = problem.require_task()
    if reduction is not None:
        reduction = reduction.whole  # every path's statistics, even from the quotient
    stats = path_statistics(problem.graph, task, reduction.active if reduction else None)
    count = len(stats.input_output) + len(stats.input)
    check_work(
        count * STATISTIC_SECONDS,
        f"{problem.source}: printing {count} path statistics with their values per mode",
        advice="gdln derive or solve need no printout of them",
    )
    bases = _bases(reduction) if reduction is not None else []
    if fmt == "json":
        return json.dumps(
            {
                "exact": stats.exact,
                "Sigma_yx": {str(p): _matrix_json(m) for p, m in stats.input_output.items()},
                "Sigma_x": [
                    {"j": str(j), "p": str(p), "value": _matrix_json(m)}
                    for (j, p), m in stats.input.items()
                ],
                "components": [
                    {k: v for k, v in comp.items() if k != "matrices"} for comp in bases
                ],
                "mode_values": {
                    k: [_str(v) for v in vals]
                    for k, vals in (_mode_values(reduction, stats).items() if reduction else [])
                },
            },
            indent=1,
        )
    if fmt == "latex":
        return _statistics_latex(stats, reduction, bases)
    lines = []

    def matrix(m: Any, indent: int) -> str:
        return _indent(_matrix_text(m, width=max(width - indent, 20), numeric=numeric), indent)

    blocks = [(f"Sigma_yx({p})", m) for p, m in stats.input_output.items()]
    blocks += [(f"Sigma_x({j}, {p})", m) for (j, p), m in stats.input.items()]
    for names, m in _equal_blocks(blocks, width=width) if compact else blocks:
        lines += [f"{names} =", matrix(m, 2)]
    if reduction is not None:
        values = _mode_values(reduction, stats)
        lines.append("")
        lines.append(
            "diagonal values per mode (S(p) = U^T Sigma_yx(p) V, D(j,p) = V^T Sigma_x(j,p) V):"
        )
        rows = [
            (key, f"[{', '.join(_value_text(v, numeric=numeric) for v in vals)}]")
            for key, vals in values.items()
        ]
        for key, shown in _equal_blocks(rows, width=width, indent=2) if compact else rows:
            lines.append(f"  {key} = {shown}")
    for k, comp in enumerate(bases):
        lines.append("")
        lines.append(f"component {k}: {len(comp['modes'])} live modes")
        for space, value in comp["matrices"].items():
            name = "U" if space.startswith("out") else "V"
            lines += [
                f"  {name}[{space}] (columns: modes {comp['columns'][space]}) =",
                matrix(value, 4),
            ]
    return "\n".join(lines)


def _equal_blocks(
    blocks: list[tuple[str, Any]], *, width: int, indent: int = 0
) -> list[tuple[str, Any]]:
    """Blocks with equal values (compared by their exact text) merged into one, named by
    all of theirs (``Sigma_x(j, p) for 32 pairs: ...``), in the order first seen."""
    groups: dict[str, tuple[list[str], Any]] = {}
    for name, value in blocks:
        key = value if isinstance(value, str) else _matrix_text(value, width=10**6)
        groups.setdefault(key, ([], value))[0].append(name)
    merged = []
    for names, value in groups.values():
        if len(names) == 1:
            merged.append((names[0], value))
            continue
        head = names[0].split("(")[0]
        args = ", ".join(n[len(head) :] for n in names)
        what = "pairs" if head == "Sigma_x" else "paths" if head == "Sigma_yx" else "keys"
        text = f"{head} for {len(names)} {what}: {args}"
        if head not in ("Sigma_x", "Sigma_yx"):
            text = f"{len(names)} equal: {', '.join(names)}"
        merged.append(
            (textwrap.fill(text, max(width - indent, 40), subsequent_indent="    "), value)
        )
    return merged


def _latex_matrix(m: Any) -> str:
    if not isinstance(m, sp.MatrixBase):
        m = sp.Matrix(np.asarray(m, dtype=float))
    return sp.latex(m, mat_delim="[", mat_str="matrix")


def _statistics_latex(stats: Any, reduction: Reduction | None, bases: list[dict[str, Any]]) -> str:
    r"""Eqs. (5)-(6), $S$, $D$, $U$ and $V$ as LaTeX lines (``%`` starts a comment)."""
    lines = ["% path statistics, Eqs. (5)-(6)"]
    for p, m in stats.input_output.items():
        lines.append(rf"\Sigma^{{yx}}({latex_name(p)}) = {_latex_matrix(m)}")
    for (j, p), m in stats.input.items():
        lines.append(rf"\Sigma^{{x}}({latex_name(j)},\ {latex_name(p)}) = {_latex_matrix(m)}")
    if reduction is not None:
        lines.append("")
        lines.append(
            r"% diagonal values per mode: S(p) = U^T \Sigma^{yx}(p) V, D(j,p) = V^T \Sigma^x(j,p) V"
        )
        for kind, paths, vals in _mode_value_rows(reduction, stats):
            row = sp.Matrix([[as_sympy(v) for v in vals]])
            inner = r",\ ".join(latex_name(p) for p in paths)
            lines.append(rf"{kind}({inner}) = {_latex_matrix(row)}")
    for k, comp in enumerate(bases):
        lines.append("")
        lines.append(f"% component {k}: {len(comp['modes'])} live modes")
        for space, value in comp["matrices"].items():
            name = "U" if space.startswith("out") else "V"
            lines.append(f"% columns: modes {comp['columns'][space]}")
            lines.append(rf"{name}_{{{latex_name(space)}}} = {_latex_matrix(value)}")
    return "\n".join(lines)


def _indent(text: str, n: int = 2) -> str:
    return "\n".join(" " * n + line for line in text.splitlines())


def _mode_values(reduction: Reduction, stats: Any) -> dict[str, list[Any]]:
    """S(p) and D(j, p) per live mode of each path's component (exact when affordable)."""
    return {
        f"{kind}({', '.join(str(p) for p in paths)})": values
        for kind, paths, values in _mode_value_rows(reduction, stats)
    }


def _mode_value_rows(
    reduction: Reduction, stats: Any
) -> list[tuple[str, tuple[Any, ...], list[Any]]]:
    """``("S", (p,), values)`` and ``("D", (j, p), values)`` for :func:`_mode_values`."""
    exact = stats.exact and len(stats.paths) <= 200
    comp = reduction.active.component_of()
    index = {p: i for i, p in enumerate(reduction.active.paths)}
    out: list[tuple[str, tuple[Any, ...], list[Any]]] = []
    for p, m in stats.input_output.items():
        k = comp[index[p]]
        values = reduction.statistic_values(k, p.target, p.source, m, exact=exact)
        out.append(("S", (p,), values))
    for (j, p), m in stats.input.items():
        k = comp[index[p]]
        if comp[index[j]] == k:
            values = reduction.statistic_values(k, j.source, p.source, m, exact=exact)
            out.append(("D", (j, p), values))
    return out


def _bases(reduction: Reduction) -> list[dict[str, Any]]:
    """Per component: bases of each space and the diagonal values per live mode."""
    out = []
    for modes in reduction.modes:
        exact = modes.exact_vectors is not None
        bases, columns, matrices = {}, {}, {}
        for space in modes.spaces:
            matrix, owners = modes.basis(space)
            label = "/".join(str(x) for x in space)  # type: ignore[attr-defined]
            columns[label] = [o if o is not None else "-" for o in owners]
            if exact:
                assert modes.exact_vectors is not None
                cols = [modes.exact_vectors[o][space] for o in owners if o is not None]
                rest = modes.exact_complement.get(space)
                if rest is None:  # no exact completion found: float dead directions
                    rest = sp.Matrix(np.round(matrix[:, len(cols) :], 12))
                full = sp.Matrix.hstack(*cols, rest) if cols else sp.Matrix(rest)
                matrices[label] = full
                bases[label] = [[str(x) for x in row] for row in full.tolist()]
            else:
                bases[label] = np.round(matrix, 12).tolist()
                matrices[label] = np.array(bases[label], dtype=float)
        mode_values = []
        for alpha in range(len(modes)):
            entry = {}
            for space, _vec in modes.vectors[alpha].items():
                entry["/".join(str(x) for x in space)] = "present"  # type: ignore[attr-defined]
            mode_values.append(entry)
        out.append(
            {
                "exact": exact,
                "bases": bases,
                "columns": columns,
                "modes": mode_values,
                "matrices": matrices,  # the bases as sympy (exact) or numpy; not in JSON
            }
        )
    return out


def _str(x: Any) -> str:
    return str(x) if isinstance(x, sp.Basic) else repr(float(x))


def _orbit(size: Any) -> int | str:
    """An orbit size for JSON: a number, or an expression string (``"M"``)."""
    return int(size) if isinstance(size, int) or getattr(size, "is_Integer", False) else str(size)


def _instance(reduction: Reduction) -> str:
    """The parameter values the listed edges were made at (``M=7, K=4``)."""
    return ", ".join(f"{k}={reduction.problem.params[k]}" for k in reduction.symbolic)


def format_derivation(reduction: Reduction, fmt: str = "text") -> str:
    r"""The reduced ODEs (Eq. 10, lumped), data symbols per mode, conserved quantities,
    eliminations and closed forms.

    Parameters
    ----------
    reduction
        The reduction to print.
    fmt
        ``"text"``, ``"latex"`` or ``"json"``.

    Returns
    -------
    str
        The derivation in that format.

    Raises
    ------
    ValueError
        ``fmt`` is not one of the three formats.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eq. (10): the reduced dynamics.
    """
    _check(fmt)
    if fmt == "json":
        return json.dumps(_derivation_json(reduction), indent=1)
    latex = fmt == "latex"
    lines = []
    head = (
        f"{reduction.problem.name}: route {reduction.route_name}, lump={reduction.lump}; time "
        f"in units of tau; loss = {reduction.constant} + sum over modes of L_mode"
    )
    lines.append(("% " if latex else "") + head)
    if reduction.route:
        lines.append(("% " if latex else "") + f"route: {reduction.route}")
    for k, system in enumerate(reduction.systems):
        lines.append("")
        lines.append(("% " if latex else "") + f"system {k}: modes {list(system.modes)}")
        for v in list(system.variables) + list(system.eliminated):
            edges = system.edges[v]
            shown = ", ".join(edge_name(e) for e in edges[:6]) + (
                f", ... ({len(edges)} edges)" if len(edges) > 6 else ""
            )
            if v in system.sizes:
                shown += f" at {_instance(reduction)}"
            lines.append(
                ("% " if latex else "  ")
                + f"{v}: orbit {system.orbit(v)} [{shown}], initial {system.initial[v]}"
            )
        if latex:  # the same equations as the notebook display (reduction._latex)
            lines += [f"{left} = {right}" for left, right in equations(system)]
        else:
            lines += [f"  tau d{v}/dt = {system.rhs[v]}" for v in system.variables]
            lines += [f"  {v} = {expr}   (eliminated)" for v, expr in system.eliminated.items()]
            lines += [
                f"  {c} = {value}   (from the initial values)"
                for c, value in system.constants.items()
            ]
            lines.append(f"  L_mode = {system.loss}")
            lines += [f"  conserved: {q}" for q in system.conserved]
            lines += [
                f"  decaying: {q}   (tau dQ/dt = -2*weight_decay*Q, weight_decay = "
                f"{system.weight_decay})"
                for q in system.decaying
            ]
            lines += [f"  closed form {f.label()} = {f.expr}" for f in system.closed_form.values()]
        for s, values in system.symbols.items():
            text = ", ".join(_str(x) for x in values)
            lines.append(rf"% {s} per mode: {text}" if latex else f"  {s} per mode: {text}")
    return "\n".join(lines)


def _derivation_json(reduction: Reduction) -> dict[str, Any]:
    systems = []
    for system in reduction.systems:
        variables = []
        for v in list(system.variables) + list(system.eliminated):
            variables.append(
                {
                    "name": str(v),
                    "edges": [edge_name(e) for e in system.edges[v]],
                    "orbit": _orbit(system.orbit(v)),
                    "rhs": str(system.rhs[v]) if v in system.rhs else None,
                    "eliminated_as": str(system.eliminated[v]) if v in system.eliminated else None,
                    "initial": _str(system.initial[v]),
                }
            )
        systems.append(
            {
                "modes": list(system.modes),
                "time_unit": "tau",
                "variables": variables,
                "symbols": {
                    str(s): [_str(x) for x in values] for s, values in system.symbols.items()
                },
                "constants": {str(c): _str(v) for c, v in system.constants.items()},
                "loss": str(system.loss),
                "conserved": [str(q) for q in system.conserved],
                "decaying": [str(q) for q in system.decaying],
                "weight_decay": _str(system.weight_decay),
                "closed_form": {k: str(f.expr) for k, f in system.closed_form.items()},
            }
        )
    return {
        "graph": reduction.problem.name,
        "source": reduction.problem.source,
        "params": {k: str(v) for k, v in reduction.problem.params.items()},
        "lump": reduction.lump,
        "route": reduction.route_name,
        "route_reason": reduction.route,
        "symbolic": list(reduction.symbolic),
        "loss_constant": _str(reduction.constant),
        "systems": systems,
    }
