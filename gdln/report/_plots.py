r"""Pictures of results: a trajectory's loss, variables and kernel distance; stages.

Each plot draws on a matplotlib ``Axes`` and returns it, as the ``plot`` methods of pandas
and xarray do: pass ``ax=`` to draw into a figure of your own; without it a new figure is
made with pyplot, so a notebook shows it. matplotlib is imported when a plot is drawn,
never with this module. Time is in units of $\tau$ throughout; the loss is that of Eq. (1)
of Saxe et al. 2022.

Three details keep the pictures honest (issue 38): curves that are equal (modes of equal
strength, the edges of one orbit) are drawn once, their legend entry naming all of them,
instead of one hiding another; a band over random seeds (mean $\pm$ sd) is clipped to the
seeds' own range, so it never shows losses no seed had; stage labels closer than a few
percent of the axis are written once (``2,3``), not on top of each other. Legends sit
beside the axes, not over the curves.

The trajectory is read through its accessors and ``meta`` only (see
:class:`gdln.Trajectory`), never by the names of its series.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np

__all__ = [
    "TRAJECTORY_KINDS",
    "axes_for",
    "equal_groups",
    "mark_stages",
    "place_legend",
    "plot_timescales",
    "plot_trajectory",
    "seed_band",
    "shade_phases",
    "trajectory_kinds",
]

TRAJECTORY_KINDS = ("loss", "variables", "kernel")
"""What :func:`plot_trajectory` draws: the loss (and the loss per context), the reduced
variables or the edges' singular values, the tangent-kernel distance $S(t)$."""

MAX_LINES = 12  # curves drawn with their own legend entry; more are drawn in grey
RANKS = 8  # singular values drawn per edge, the largest first
STAGE_GAP = 0.04  # stage labels closer than this fraction of the axis share one label


class TrajectoryLike(Protocol):
    """What the plots read: a :class:`gdln.Trajectory`."""

    @property
    def t(self) -> np.ndarray: ...
    @property
    def loss(self) -> np.ndarray: ...
    @property
    def series(self) -> Mapping[str, np.ndarray]: ...
    @property
    def meta(self) -> Mapping[str, Any]: ...
    @property
    def variable_edges(self) -> Mapping[str, tuple[str, ...]]: ...
    def variable(self, name: str, *, system: int | None = None) -> np.ndarray: ...
    def has_variable(self, name: str, *, system: int | None = None) -> bool: ...
    def context_losses(self, *, evaluation: bool = False) -> dict[str, np.ndarray]: ...
    def singular_values(self, edge: Any) -> np.ndarray: ...
    def kernel_distance(self) -> np.ndarray: ...


class StageLike(Protocol):
    """What :func:`plot_timescales` reads of a stage: a :class:`gdln.Stage`."""

    @property
    def time(self) -> float: ...
    @property
    def loss(self) -> float: ...
    @property
    def ode_time(self) -> float | None: ...


class TimescalesLike(Protocol):
    """What :func:`plot_timescales` reads: a :class:`gdln.Timescales`."""

    @property
    def source(self) -> str: ...
    @property
    def u0(self) -> float: ...
    @property
    def initial_loss(self) -> float: ...
    @property
    def stages(self) -> Sequence[StageLike]: ...


def axes_for(ax: Any = None, *, figsize: tuple[float, float] = (8.0, 4.2)) -> Any:
    """``ax``, or the axes of a new pyplot figure with a constrained layout."""
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    _, new = plt.subplots(figsize=figsize, layout="constrained")
    return new


def seed_band(loss: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean over seeds and the band mean $\\pm$ sd clipped to the seeds' own range.

    Parameters
    ----------
    loss
        ``(T, seeds)``.

    Returns
    -------
    tuple of numpy.ndarray
        ``(mean, low, high)``, each ``(T,)``: ``low >= min`` and ``high <= max`` over the
        seeds at every time, so the band never rises above the highest seed (the loss at
        the start, L(0), included).

    Examples
    --------
    >>> mean, low, high = seed_band(np.array([[1.0, 1.0, 4.0]]))
    >>> float(mean[0]), float(low[0]), float(high[0])
    (2.0, 1.0, 3.414213562373095)
    """
    values = np.asarray(loss, dtype=float)
    mean, sd = values.mean(axis=1), values.std(axis=1)
    low = np.maximum(mean - sd, values.min(axis=1))
    high = np.minimum(mean + sd, values.max(axis=1))
    return mean, low, high


def equal_groups(curves: Sequence[np.ndarray], *, rtol: float = 1e-9) -> list[list[int]]:
    """Group curves that are equal to within ``rtol`` of the largest value, in order.

    Parameters
    ----------
    curves
        Arrays of one shape.
    rtol
        Tolerance, relative to the largest absolute value of all curves.

    Returns
    -------
    list of list of int
        Indices of ``curves``; each group is drawn as one line.

    Examples
    --------
    >>> equal_groups([np.ones(3), np.zeros(3), np.ones(3)])
    [[0, 2], [1]]
    >>> _joined(["B1 [x0->h1 +6], mode 2", "B1 [x0->h1 +6], mode 3", "B3 [h2->y0 +6], mode 2"])
    'B1 [x0->h1 +6], modes 2, 3 = B3 [h2->y0 +6], mode 2'
    """
    scale = max((float(np.nanmax(np.abs(c))) for c in curves if np.size(c)), default=0.0)
    tol = rtol * max(scale, 1e-300)
    groups: list[list[int]] = []
    for i, curve in enumerate(curves):
        for group in groups:
            first = curves[group[0]]
            if np.shape(first) == np.shape(curve) and np.allclose(first, curve, rtol=0, atol=tol):
                group.append(i)
                break
        else:
            groups.append([i])
    return groups


def _joined(labels: Sequence[str]) -> str:
    """One legend entry for equal curves: ``B1, modes 2, 3``, ``B1 = B3, mode 0``,
    ``x0->h1 = x1->h1 = ... (7 equal)``; a label's part after its last ``", "`` (the mode)
    is written once for the curves that share it."""
    parts: dict[str, list[str]] = {}
    for label in labels:
        head, sep, tail = label.rpartition(", ")
        key = head if sep else label
        parts.setdefault(key, [])
        if sep:
            parts[key].append(tail)
    written = []
    for head, tails in parts.items():
        if not tails:
            written.append(head)
        elif len(tails) == 1:
            written.append(f"{head}, {tails[0]}")
        else:
            word, _, _ = tails[0].partition(" ")
            numbers = _numbers([t.partition(" ")[2] for t in tails])
            written.append(f"{head}, {word}s {numbers}")
    if len(written) <= 3:
        return " = ".join(written)
    return f"{written[0]} = {written[1]} = ... ({len(labels)} equal)"


def _numbers(texts: Sequence[str]) -> str:
    """``1, 2, 3, 7`` written ``1-3, 7``."""
    if not all(t.isdigit() for t in texts):
        return ", ".join(texts)
    runs: list[list[int]] = []
    for n in sorted(int(t) for t in texts):
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return ", ".join(", ".join(map(str, r)) if len(r) < 3 else f"{r[0]}-{r[-1]}" for r in runs)


def mark_stages(
    ax: Any,
    times: Sequence[float],
    *,
    label: str | None = "stage times",
    color: str = "0.35",
    gap: float = STAGE_GAP,
) -> list[tuple[float, str]]:
    """A dotted vertical line at each time within the x limits, numbered from 1 at the
    top; numbers of lines closer than ``gap`` of the axis width share one label (``2,3``).

    Parameters
    ----------
    ax
        The axes, with their data drawn (the x limits are read, then kept).
    times
        The stage times, in order.
    label
        The legend entry of the lines (one entry for all).
    color
        Their colour.
    gap
        The smallest distance between two labels, as a fraction of the axis width.

    Returns
    -------
    list of tuple
        ``(time, text)`` of each label drawn. The lines carry the ``gid`` ``"stage N"``.
    """
    low, high = ax.get_xlim()
    width = max(high - low, 1e-300)
    shown = [(n, float(t)) for n, t in enumerate(times, start=1) if low <= t <= high]
    groups: list[list[tuple[int, float]]] = []
    for number, time in shown:
        if groups and (time - groups[-1][0][1]) / width < gap:
            groups[-1].append((number, time))
        else:
            groups.append([(number, time)])
    for i, (number, time) in enumerate(shown):
        ax.axvline(
            time, color=color, ls=":", lw=1, gid=f"stage {number}", label=label if i == 0 else None
        )
    labels = []
    for group in groups:
        numbers = [n for n, _ in group]
        text = ",".join(map(str, numbers)) if len(numbers) <= 3 else f"{numbers[0]}-{numbers[-1]}"
        ax.annotate(
            text,
            (group[0][1], 1),
            xycoords=("data", "axes fraction"),
            xytext=(2, -10),
            textcoords="offset points",
            fontsize=7,
            color=color,
            gid=f"stage label {text}",
        )
        labels.append((group[0][1], text))
    ax.set_xlim(low, high)
    return labels


def place_legend(ax: Any, *, fontsize: float = 7.5) -> Any:
    """The legend of ``ax`` beside it (right of the axes), never over the curves."""
    handles, labels = ax.get_legend_handles_labels()
    if not handles:
        return None
    return ax.legend(
        handles,
        labels,
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        borderaxespad=0.0,
        fontsize=fontsize,
        frameon=False,
    )


def trajectory_kinds(trajectory: TrajectoryLike) -> tuple[str, ...]:
    """The kinds of :data:`TRAJECTORY_KINDS` that ``trajectory`` has something for.

    Parameters
    ----------
    trajectory
        A :class:`gdln.Trajectory`.

    Returns
    -------
    tuple of str
        ``"loss"`` always; ``"variables"`` with reduced variables or singular values;
        ``"kernel"`` with the kernel distance.
    """
    kinds = ["loss"]
    if _variable_curves(trajectory):
        kinds.append("variables")
    try:
        trajectory.kernel_distance()
        kinds.append("kernel")
    except KeyError:
        pass
    return tuple(kinds)


def plot_trajectory(self: TrajectoryLike, kind: str = "loss", *, ax: Any = None) -> Any:
    r"""Plot the trajectory against time $t/\tau$; return the matplotlib ``Axes``.

    Parameters
    ----------
    kind
        ``"loss"``: the loss of Eq. (1) and the loss within each context (several seeds:
        their mean, each seed faint, and mean $\pm$ sd clipped to the seeds' range);
        ``"variables"``: each reduced variable per mode, labelled with the edges it
        stands for (Eq. 10), or each edge's singular values (median over seeds) of a
        simulation or the full-matrix flow; ``"kernel"``: the tangent-kernel distance
        $S(t)$. Curves that are equal are drawn once, their legend entry naming each.
    ax
        Draw into these axes; default: a new figure (pyplot).

    Returns
    -------
    matplotlib.axes.Axes
        The axes drawn on.

    Raises
    ------
    ValueError
        ``kind`` is not one of ``"loss"``, ``"variables"``, ``"kernel"``, or the
        trajectory has nothing of that kind.
    """
    if kind not in TRAJECTORY_KINDS:
        raise ValueError(f"kind {kind!r}: expected one of {', '.join(TRAJECTORY_KINDS)}")
    ax = axes_for(ax)
    if kind == "loss":
        _draw_loss(ax, self)
    elif kind == "variables":
        curves = _variable_curves(self)
        if not curves:
            raise ValueError("this trajectory records no reduced variables or singular values")
        _draw_curves(ax, self.t, curves)
        ax.set_ylabel("$b_e^\\alpha$ per mode / singular values by rank")
    else:
        try:
            distance = self.kernel_distance()
        except KeyError as err:
            raise ValueError(
                "this trajectory has no kernel distance (gdln solve --kernel)"
            ) from err
        ax.plot(self.t, distance, color="tab:purple", label="$S(t)$, tangent-kernel distance")
        ax.set_ylabel("kernel distance $S(t)$")
    ax.set_xlabel(r"time $t/\tau$")
    title = str(self.meta.get("graph") or _stem(self.meta.get("source")) or "")
    if title:
        ax.set_title(f"{title}: {kind}", fontsize=9)
    place_legend(ax)
    return ax


def _stem(source: Any) -> str:
    text = str(source or "")
    return text.rsplit("/", 1)[-1].removesuffix(".yaml")


def _draw_loss(ax: Any, trajectory: TrajectoryLike) -> None:
    t, loss = trajectory.t, np.asarray(trajectory.loss, dtype=float)
    if loss.ndim == 2 and loss.shape[1] > 1:
        mean, low, high = seed_band(loss)
        for s in range(loss.shape[1]):
            ax.plot(t, loss[:, s], color="tab:red", lw=0.5, alpha=0.35)
        ax.fill_between(t, low, high, color="tab:red", alpha=0.2, lw=0, gid="seed band")
        label = f"loss (Eq. 1), mean of {loss.shape[1]} seeds, ± sd within their range"
        ax.plot(t, mean, color="tab:red", lw=1.8, label=label, gid="loss")
    else:
        ax.plot(
            t, loss.reshape(len(t), -1)[:, 0], color="black", lw=2, label="loss (Eq. 1)", gid="loss"
        )
    contexts = trajectory.context_losses()
    curves = [
        (f"in context {label}", np.asarray(v, float).reshape(len(t), -1).mean(axis=1))
        for label, v in contexts.items()
    ]
    _draw_curves(ax, t, curves, lw=1.0, note="per context")
    ax.set_ylabel(r"loss $\mathcal{L}$")
    ax.set_ylim(bottom=0)
    schedule = trajectory.meta.get("schedule")
    if isinstance(schedule, Mapping) and schedule.get("phases"):
        shade_phases(ax, schedule["phases"])


def shade_phases(ax: Any, phases: Sequence[Mapping[str, Any]]) -> None:
    """Shade every other phase of a schedule and name each phase at the top of ``ax``.

    Parameters
    ----------
    ax
        The axes, with their data drawn (the x limits are kept).
    phases
        Each phase's ``start``, ``end`` and ``name`` (``meta["schedule"]["phases"]`` of
        :func:`gdln.solve`'s trajectory with ``schedule=``). The spans carry the ``gid``
        ``"phase K"``, the names ``"phase label K"``.
    """
    low, high = ax.get_xlim()
    for k, phase in enumerate(phases):
        start, end = float(phase["start"]), float(phase["end"])
        ax.axvspan(start, end, color="0.5" if k % 2 else "0.8", alpha=0.12, lw=0, gid=f"phase {k}")
        ax.annotate(
            str(phase.get("name", k)),
            ((start + end) / 2, 1),
            xycoords=("data", "axes fraction"),
            xytext=(0, -10),
            textcoords="offset points",
            ha="center",
            fontsize=7,
            color="0.3",
            gid=f"phase label {k}",
        )
    ax.set_xlim(low, high)


def _variable_curves(trajectory: TrajectoryLike) -> list[tuple[str, np.ndarray]]:
    """(label, curve) of each reduced variable in each mode, labelled with the edges it
    stands for (:attr:`gdln.Trajectory.variable_edges`), or of each edge's singular values
    (median over seeds)."""
    meta = trajectory.meta
    curves: list[tuple[str, np.ndarray]] = []
    modes = meta.get("modes") or []
    systems = [m if isinstance(m, list) else None for m in modes] or [None]
    for name, edges in trajectory.variable_edges.items():
        where = _edges_text(edges)
        for k, numbers in enumerate(systems):
            if not trajectory.has_variable(name, system=k):
                continue
            values = np.asarray(trajectory.variable(name, system=k), dtype=float)
            values = values.reshape(len(trajectory.t), -1)
            for a in range(values.shape[1]):
                mode = numbers[a] if numbers and a < len(numbers) else a
                curves.append((f"{name}{where}, mode {mode}", values[:, a]))
    if curves:
        return curves
    for edge in meta.get("edges") or ():
        try:
            values = np.asarray(trajectory.singular_values(edge), dtype=float)
        except KeyError:
            continue
        median = np.median(values, axis=1) if values.ndim == 3 else values
        for r in range(min(median.shape[1], RANKS)):
            curves.append((f"{edge}, rank {r + 1}", median[:, r]))
    return curves


def _edges_text(edges: Sequence[str]) -> str:
    """`` [x->h]``, or `` [x0->h +6]`` for a variable standing for seven edges."""
    if not edges:
        return ""
    return f" [{edges[0]}]" if len(edges) == 1 else f" [{edges[0]} +{len(edges) - 1}]"


def _draw_curves(
    ax: Any,
    t: np.ndarray,
    curves: Sequence[tuple[str, np.ndarray]],
    *,
    lw: float = 1.6,
    note: str = "",
) -> None:
    """Each distinct curve once, labelled by every curve equal to it; beyond
    :data:`MAX_LINES` distinct curves, the rest in grey under one label."""
    groups = equal_groups([c for _, c in curves])
    colours = _colours()
    for i, group in enumerate(groups):
        labels = [curves[j][0] for j in group]
        y = curves[group[0]][1]
        if i < MAX_LINES:
            ax.plot(t, y, lw=lw, color=colours(i), label=_joined(labels), gid=f"curve {i}")
        else:
            rest = len(groups) - MAX_LINES
            ax.plot(
                t,
                y,
                lw=0.6,
                color="0.6",
                label=f"{rest} more {note}".strip() if i == MAX_LINES else None,
            )


def _colours() -> Callable[[int], Any]:
    import matplotlib

    cycle = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]
    return lambda i: cycle[i % len(cycle)]


def plot_timescales(self: TimescalesLike, *, ax: Any = None, t_max: float | None = None) -> Any:
    r"""Plot the stages: the plateau losses as a staircase against the leading-order
    times, each stage time marked and numbered, the exact ODE's half-times as crosses.

    Parameters
    ----------
    ax
        Draw into these axes; default: a new figure (pyplot).
    t_max
        The right end of the time axis; default: 15% past the last stage.

    Returns
    -------
    matplotlib.axes.Axes
        The axes drawn on; the stage lines carry the ``gid`` ``"stage N"``.
    """
    ax = axes_for(ax)
    times = [float(s.time) for s in self.stages]
    end = t_max if t_max is not None else 1.15 * max(times, default=1.0) or 1.0
    xs = [0.0, *times, end]
    ys = [float(self.initial_loss), *(float(s.loss) for s in self.stages)]
    ax.step(
        xs,
        [*ys, ys[-1]],
        where="post",
        color="black",
        lw=1.8,
        label="plateau loss (leading order)",
        gid="plateaus",
    )
    half = [
        (s.ode_time, (before + float(s.loss)) / 2)
        for s, before in zip(self.stages, ys, strict=False)
        if s.ode_time is not None
    ]
    if half:
        ax.plot(
            *zip(*half, strict=True),
            "x",
            color="tab:blue",
            ms=7,
            label="exact ODE: half-way (Eq. 10)",
        )
    ax.set_xlim(0.0, end)
    ax.set_ylim(bottom=0)
    mark_stages(ax, times, label=f"stage times (u0 = {self.u0:.3g})")
    ax.set_xlabel(r"time $t/\tau$")
    ax.set_ylabel(r"loss $\mathcal{L}$ (Eq. 1)")
    ax.set_title(f"{_stem(self.source)}: stages from small initial weights", fontsize=9)
    place_legend(ax)
    return ax
