r"""The result of :func:`gdln.timescales`: ordered stages, and how to print them.

A stage is one saddle-to-saddle transition from small initial weights (scale $u_0$): what
becomes active, when (the leading order as $u_0\to0$, its formula in $u_0$, and where the
exact reduced ODE exists its own time to half-completion), the loss on the plateau after
it and the map each active pathway computes there.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import sympy as sp

from .._html import html_table
from ..report._plots import plot_timescales

__all__ = ["HOLDS_FOR", "LeadingTime", "Stage", "Timescales", "format_timescales", "tidy_loss"]

U0 = sp.Symbol("u0", positive=True)
"""The initial scale $u_0$ in the printed formulas."""
DIGITS = 6  # significant digits of the coefficients in a printed formula
MAPS_SHOWN = 8  # maps listed per stage in the text printout
ROUND_OFF = 1e-12  # relative size below which a loss or a map entry is printed as 0
HOLDS_FOR = {
    "random": "small random weights as u0 -> 0, and the aligned start",
    "aligned": "the aligned start only (u0 on every edge along its escape direction); from "
    "small random weights a power-law time is off by a factor that depends on the draw",
}
"""Which start a stage's leading-order time holds for (``Stage.holds_for``), and its meaning."""


def tidy_loss(loss: float, initial: float) -> float:
    """``loss``, or 0.0 where it is round-off next to the loss at zero weights."""
    return 0.0 if abs(loss) <= ROUND_OFF * max(1.0, abs(initial)) else float(loss)


@dataclass(frozen=True)
class LeadingTime:
    r"""A time $a\ln(1/u_0) + \sum_k c_k u_0^{-p_k}$: the sum of the escapes so far.

    Parameters
    ----------
    log
        The coefficient $a$ of $\ln(1/u_0)$.
    powers
        Pairs $(p_k, c_k)$, one per distinct power.
    """

    log: float = 0.0
    powers: tuple[tuple[float, float], ...] = ()

    def plus_log(self, coefficient: float) -> LeadingTime:
        """This time plus ``coefficient * ln(1/u0)``."""
        return LeadingTime(self.log + coefficient, self.powers)

    def plus_power(self, power: float, coefficient: float) -> LeadingTime:
        """This time plus ``coefficient * u0**(-power)``."""
        terms = dict(self.powers)
        key = next((p for p in terms if abs(p - power) <= 1e-9 * max(1.0, power)), power)
        terms[key] = terms.get(key, 0.0) + coefficient
        return LeadingTime(self.log, tuple(sorted(terms.items())))

    def value(self, u0: float) -> float:
        """The time at ``u0``."""
        total = self.log * float(np.log(1.0 / u0))
        return float(total + sum(c * u0 ** (-p) for p, c in self.powers))

    def expression(self) -> sp.Expr:
        """The formula in the symbol ``u0``, coefficients to :data:`DIGITS` digits."""
        total: sp.Expr = sp.Integer(0)
        if self.log:
            total += sp.Float(self.log, DIGITS) * sp.log(1 / U0)
        for p, c in self.powers:
            exponent = sp.Integer(round(p)) if abs(p - round(p)) <= 1e-9 else sp.Float(p, DIGITS)
            total += sp.Float(c, DIGITS) * U0 ** (-exponent)
        return total

    def holds_for(self) -> str:
        """``"aligned"`` if the time holds a power of $u_0$, else ``"random"`` (:data:`HOLDS_FOR`)."""
        return "aligned" if any(c for _, c in self.powers) else "random"

    def close_to(self, other: LeadingTime) -> bool:
        """Whether two times have the same terms (to 1e-7 relative)."""

        def near(a: float, b: float) -> bool:
            return abs(a - b) <= 1e-7 * max(1.0, abs(a), abs(b))

        if not near(self.log, other.log) or len(self.powers) != len(other.powers):
            return False
        return all(
            near(p, q) and near(c, d)
            for (p, c), (q, d) in zip(self.powers, other.powers, strict=True)
        )


@dataclass(frozen=True)
class Stage:
    r"""One stage of learning from small initial weights.

    Parameters
    ----------
    active
        The variables that become active: reduced variables as ``NAME[mode]`` (aligned
        route) or trainable edges as ``u->v`` (asymptotic route).
    pathways
        The input-output paths that become fully active (``x->h->y``, with ``[mode]`` on
        the aligned route); on the asymptotic route a further direction of an active
        pathway is ``x->h->y (direction k)``.
    time
        The leading-order time at which the stage happens, at the given $u_0$.
    time_formula
        The leading-order time as a formula in ``u0`` (sympy; a sum of
        $a\ln(1/u_0)$ and $c\,u_0^{-p}$ terms, coefficients rounded).
    loss
        The loss of Eq. (1) on the plateau after the stage.
    maps
        Path (``x->h->y``) -> the matrix $W_p$ it computes on that plateau, for every
        active path.
    mechanism
        ``"exponential"`` (time $\propto\ln(1/u_0)$), ``"power"``
        (time $\propto u_0^{-p}$) or ``"immediate"`` (forced, no plateau before it).
    modes
        The singular modes involved (aligned route; empty otherwise).
    ode_time
        Aligned route: the exact reduced ODE's time to half-completion, when the maps
        of the stage's new pathways reach half their plateau values (``None`` if not
        computed or not reached).
    holds_for
        Which start the leading-order time holds for: ``"random"``, small random
        weights as $u_0\to0$ (and the aligned start), where the time is a multiple of
        $\ln(1/u_0)$, which no start's $O(1)$ factors change; ``"aligned"``, the
        aligned start only (every edge at $u_0$ along its escape direction), where the
        time holds a power $u_0^{-p}$, whose coefficient is the blow-up time of that
        start: from small random weights it is off by a factor that depends on the draw
        (see :data:`HOLDS_FOR`).
    notes
        What the stage's time or plateau does not account for, in words (empty when
        nothing).
    """

    active: tuple[str, ...]
    pathways: tuple[str, ...]
    time: float
    time_formula: sp.Expr
    loss: float
    maps: Mapping[str, np.ndarray] = field(default_factory=dict)
    mechanism: str = "exponential"
    modes: tuple[int, ...] = ()
    ode_time: float | None = None
    holds_for: str = "random"
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.holds_for not in HOLDS_FOR:
            raise ValueError(
                f"holds_for {self.holds_for!r}: expected one of {', '.join(HOLDS_FOR)}"
            )
        object.__setattr__(self, "notes", tuple(str(n) for n in self.notes))
        maps = {}
        for path, matrix in self.maps.items():
            m = np.array(matrix, dtype=float)
            m[np.abs(m) <= ROUND_OFF * max(float(np.abs(m).max(initial=0.0)), 1e-300)] = 0.0
            maps[path] = m
        object.__setattr__(self, "maps", maps)
        object.__setattr__(self, "time", float(self.time))
        object.__setattr__(self, "loss", float(self.loss))
        if self.ode_time is not None:
            object.__setattr__(self, "ode_time", float(self.ode_time))

    def __repr__(self) -> str:
        return (
            f"Stage(active={list(self.active)}, time={self.time:.6g}, "
            f"time_formula={self.time_formula}, loss={self.loss:.6g})"
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON fields of the stage.

        Returns
        -------
        dict
            Its pathways, times and formulas, matrices as nested lists.
        """
        return {
            "active": list(self.active),
            "pathways": list(self.pathways),
            "time": self.time,
            "time_formula": str(self.time_formula),
            "loss": self.loss,
            "maps": {k: np.asarray(v, float).tolist() for k, v in self.maps.items()},
            "mechanism": self.mechanism,
            "modes": list(self.modes),
            "ode_time": self.ode_time,
            "holds_for": self.holds_for,
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class Timescales:
    """The ordered stages of learning from small initial weights.

    Parameters
    ----------
    source
        The graph file.
    u0
        The initial scale $u_0$ the times are evaluated at.
    route
        The route the dynamics were obtained by, by its declared name
        (:data:`gdln.settings.ROUTES`): ``"quotient"`` or ``"contexts"`` (an exact
        reduction), or ``"matrix"`` (the full matrices' statistics, without common bases).
    stages
        The stages, in order of time.
    assumptions
        What the leading order assumes, in words.
    initial_loss
        The loss of Eq. (1) at zero weights (the first plateau).
    not_predicted
        The pathways that can still lower the loss after the last stage but get no
        stage here, each with the reason (empty when every one has its stage).
    analysis
        ``"aligned"`` (the leading order of the exact reduced ODE, Eq. 10, mode by mode)
        or ``"asymptotic"`` (rank-one stages, for statistics without common bases).
    route_reason
        Why the route was taken, in words (``route: auto``'s choice), or ``""``.
    """

    source: str
    u0: float
    route: str
    stages: tuple[Stage, ...]
    assumptions: tuple[str, ...]
    initial_loss: float
    not_predicted: tuple[str, ...] = ()
    analysis: str = "aligned"
    route_reason: str = ""

    def __repr__(self) -> str:
        return (
            f"Timescales({self.source!r}, route={self.route!r}, u0={self.u0:g}, "
            f"stages={list(self.stages)})"
        )

    plot = plot_timescales  # timescales.plot(ax=None, t_max=None) -> matplotlib Axes

    def _repr_html_(self) -> str:
        """The stage table of :func:`format_timescales`, for Jupyter."""
        exact = self.analysis == "aligned"
        header = [
            "stage",
            "time",
            "formula (u0 -> 0)",
            "holds for",
            *(["ODE half"] if exact else []),
        ]
        rows = [
            [
                k,
                f"{s.time:.6g}",
                s.time_formula,
                s.holds_for,
                *(["-" if s.ode_time is None else f"{s.ode_time:.6g}"] if exact else []),
                f"{s.loss:.6g}",
                _shortened(s.pathways or s.active),
            ]
            for k, s in enumerate(self.stages, 1)
        ]
        caption = (
            f"{self.source}: route {self.route}, {self.analysis} stages, u0 = {self.u0:g}, "
            "time in units of tau; "
            f"loss at zero weights {self.initial_loss:.6g}"
        )
        return html_table([*header, "loss after", "active"], rows, caption=caption)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Timescales:
        """The result as :meth:`to_dict` (``gdln timescales --format json``) wrote it.

        Parameters
        ----------
        data
            The JSON fields.

        Returns
        -------
        Timescales
            The stages with their times, losses and maps; each ``time_formula`` is the
            text that was written, kept as a sympy symbol of that name (text is never
            evaluated).

        Raises
        ------
        KeyError
            A field is missing.
        """
        stages = tuple(
            Stage(
                active=tuple(s["active"]),
                pathways=tuple(s["pathways"]),
                time=s["time"],
                time_formula=sp.Symbol(str(s["time_formula"])),
                loss=s["loss"],
                maps={k: np.asarray(v, float) for k, v in s["maps"].items()},
                mechanism=s["mechanism"],
                modes=tuple(s["modes"]),
                ode_time=s["ode_time"],
            )
            for s in data["stages"]
        )
        route, analysis = str(data["route"]), str(data.get("analysis", "aligned"))
        if route in ("aligned", "asymptotic"):  # written before routes had one name each
            route, analysis = ("contexts" if route == "aligned" else "matrix"), route
        return cls(
            source=str(data["source"]),
            u0=float(data["u0"]),
            route=route,
            stages=stages,
            assumptions=tuple(data["assumptions"]),
            initial_loss=float(data["initial_loss"]),
            not_predicted=tuple(data.get("not_predicted", ())),
            analysis=analysis,
            route_reason=str(data.get("route_reason", "")),
        )

    def ratios(self) -> tuple[float, ...]:
        """Each stage's leading-order time over the first nonzero one's.

        Returns
        -------
        tuple of float
            One ratio per stage.
        """
        times = [s.time for s in self.stages]
        first = next((t for t in times if t > 0), 1.0)
        return tuple(t / first for t in times)

    def to_dict(self) -> dict[str, Any]:
        """The JSON fields of the result.

        Returns
        -------
        dict
            ``stages``, ``route`` (its declared name), ``route_reason``, ``analysis``,
            ``not_predicted``, ``assumptions`` and the settings.
        """
        return {
            "source": self.source,
            "u0": self.u0,
            "route": self.route,
            "route_reason": self.route_reason,
            "analysis": self.analysis,
            "initial_loss": self.initial_loss,
            "stages": [s.to_dict() for s in self.stages],
            "not_predicted": list(self.not_predicted),
            "assumptions": list(self.assumptions),
        }


def format_timescales(result: Timescales, fmt: str = "text") -> str:
    """The stages as text (a table, then the maps) or JSON.

    Parameters
    ----------
    result
        From :func:`gdln.timescales`.
    fmt
        ``"text"`` or ``"json"``.

    Returns
    -------
    str
        The printout.

    Raises
    ------
    ValueError
        ``fmt`` is neither ``"text"`` nor ``"json"``.
    """
    if fmt == "json":
        return json.dumps(result.to_dict())
    if fmt != "text":
        raise ValueError(f"format {fmt!r}: expected text or json")
    exact = result.analysis == "aligned"
    why = f" ({result.route_reason})" if result.route_reason else ""
    lines = [
        f"{result.source}: route {result.route}{why}, {result.analysis} stages, "
        f"u0 = {result.u0:g}; time in units of tau",
        f"loss at zero weights: {result.initial_loss:.6g}",
        "",
    ]
    header = ["stage", "time", "formula (u0 -> 0)", "holds for"] + (["ODE half"] if exact else [])
    rows = [[*header, "loss after", "active"]]
    for k, s in enumerate(result.stages, 1):
        ode = [] if not exact else ["-" if s.ode_time is None else f"{s.ode_time:.6g}"]
        pathways = _shortened(s.pathways or s.active)
        start = s.holds_for + ("*" if s.notes else "")
        rows.append(
            [str(k), f"{s.time:.6g}", str(s.time_formula), start, *ode, f"{s.loss:.6g}", pathways]
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for r in rows:
        lines.append("  ".join([*(c.ljust(w) for c, w in zip(r, widths, strict=False)), r[-1]]))
    for k, s in enumerate(result.stages, 1):
        lines += ["", f"stage {k} ({s.mechanism}): active {', '.join(s.active)}"]
        lines += [f"  note: {n}" for n in s.notes]
        shown = list(s.maps.items())[:MAPS_SHOWN]
        lines += [f"  {path}: {_matrix_text(m)}" for path, m in shown]
        if len(s.maps) > MAPS_SHOWN:
            lines.append(f"  ... {len(s.maps) - MAPS_SHOWN} more maps (--format json lists all)")
    if result.not_predicted:
        lines += ["", "not predicted:"] + [f"  - {n}" for n in result.not_predicted]
    used = sorted({s.holds_for for s in result.stages})
    lines += ["", "holds for (* : see the stage's notes):"]
    lines += [f"  {name}: {HOLDS_FOR[name]}" for name in used]
    lines += ["", "assumptions:"] + [f"  - {a}" for a in result.assumptions]
    return "\n".join(lines)


def _shortened(names: tuple[str, ...], shown: int = 3) -> str:
    """The first few names, and how many there are in all."""
    if len(names) <= shown:
        return ", ".join(names)
    return ", ".join(names[:shown]) + f", ... ({len(names)} in all)"


def _matrix_text(matrix: np.ndarray) -> str:
    """A small matrix in full (4 digits), a large one by its singular values."""
    m = np.atleast_2d(np.asarray(matrix, float))
    if m.size <= 16:
        rows = ["[" + ", ".join(f"{x:.4g}" for x in row) + "]" for row in m]
        return "[" + ", ".join(rows) + "]"
    sv = np.linalg.svd(m, compute_uv=False)
    shown = ", ".join(f"{x:.4g}" for x in sv[sv > 1e-9 * max(sv[0], 1e-300)][:6])
    return f"{m.shape[0]}x{m.shape[1]}, singular values {shown}"
