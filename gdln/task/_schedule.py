r"""Schedules: the order in which a network sees its contexts (blocked, interleaved, any).

Gradient flow sees the data only through the path statistics $\Sigma^{yx}(p)$ and
$\Sigma^x(j,p)$ (Eqs. 5-6 of Saxe, Sodhani & Lewallen 2022), and these are averages over
the contexts with their probabilities $\pi_c$. A schedule makes the $\pi_c$ piecewise
constant in time: a list of :class:`Phase`, each a duration (in units of $\tau$) and the
probability of each context during it, or a task of its own on the same nodes and edges.
Blocked training (Flesch et al. 2023) is one context at a time; interleaved training is
one phase with every context at once.

A schedule is a value: it says nothing of how the phases are solved
(:func:`gdln.solve` with ``schedule=`` integrates each from the previous phase's end) and is
checked against a task by :meth:`Schedule.check` (labels known).

>>> blocked(["a", "b"], 10.0, repeats=2).boundaries
(0.0, 10.0, 20.0, 30.0, 40.0)
>>> interleaved(["a", "b"], 5.0).phases[0].probabilities
{'a': 1/2, 'b': 1/2}
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
import sympy as sp

from .._errors import TaskSpecError, shorten
from ._task import Context, Task, as_float

__all__ = ["Phase", "Schedule", "blocked", "interleaved", "phase_task", "schedule_task"]

SUM_TOLERANCE = 1e-9
"""How far the probabilities of a phase may sum from 1 when they are not all exact."""


def _exact_probability(value: Any) -> Any:
    """A probability as an exact number: ints stay, floats become the decimal they print."""
    if isinstance(value, bool) or not isinstance(value, (int, float, Fraction, sp.Basic)):
        raise TypeError(f"{shorten(value)} is not a number")
    if isinstance(value, sp.Basic):
        if value.free_symbols or not value.is_number:
            raise TypeError(f"{shorten(value)} is not a number")
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise TypeError(f"{value!r} is not finite")
        value = Fraction(repr(value))
    if isinstance(value, Fraction):
        return sp.Rational(value.numerator, value.denominator)
    return sp.Integer(value)


@dataclass(frozen=True)
class Phase:
    r"""One phase of a schedule: how long, and on which contexts.

    Parameters
    ----------
    duration
        The phase's length in units of $\tau$ (a finite number > 0). With the
        gradient-descent map it must be a whole number of steps of the learning rate.
    probabilities
        Context label -> its probability $\pi_c$ during the phase (labels left out have
        probability 0); the values sum to 1. Numbers are kept exact (``0.1`` is 1/10).
    task
        A task of its own on the same nodes and edges, instead of ``probabilities``: the
        phase trains on its contexts with their probabilities.
    name
        A name for printing (default: the one context trained, or the labels joined by
        ``+``, or ``"task"``).
    key
        Where the phase was written (``schedule[2]`` in a graph file,
        ``phases[2]`` in Python), for messages.

    Raises
    ------
    TaskSpecError
        One line naming the key and the value: a duration that is not a finite number
        > 0, a probability that is not a number in $[0, 1]$, probabilities that do not
        sum to 1, both or neither of ``probabilities`` and ``task``.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eqs. (1), (5)-(6): the averages over contexts that a
    phase's probabilities weight; Flesch et al. (2023), blocked and interleaved training.
    """

    duration: float
    probabilities: Mapping[str, Any] = field(default_factory=dict)
    task: Task | None = field(default=None, repr=False)
    name: str = ""
    key: str = field(default="", repr=False, compare=False)

    def __post_init__(self) -> None:
        where = self.key or "phase"
        duration = self.duration
        ok = isinstance(duration, (int, float, Fraction, sp.Basic)) and not isinstance(
            duration, bool
        )
        try:
            value = float(duration) if ok else math.nan
        except (TypeError, ValueError, OverflowError):
            value = math.nan
        if not 0 < value < math.inf:
            raise TaskSpecError(
                f"duration {shorten(duration)}: expected a finite number > 0 (in units of tau)",
                key=f"{where}.duration",
            )
        object.__setattr__(self, "duration", value)
        if (self.task is None) == (not self.probabilities):
            raise TaskSpecError(
                "give the probabilities of the contexts (label -> p) or a task of its own, "
                "exactly one of them",
                key=where,
            )
        exact = {}
        for label, p in dict(self.probabilities).items():
            if not isinstance(label, str) or not label:
                raise TaskSpecError(
                    f"context label {shorten(label)}: expected text", key=f"{where}.probabilities"
                )
            try:
                number = _exact_probability(p)
            except TypeError:
                number = None
            if number is None or not 0 <= float(number) <= 1:
                raise TaskSpecError(
                    f"probability {shorten(p)}: expected a number in [0, 1]",
                    key=f"{where}.probabilities.{label}",
                )
            exact[label] = number
        total = sum(exact.values(), sp.Integer(0))
        if exact and total != 1 and abs(float(total) - 1) > SUM_TOLERANCE:
            raise TaskSpecError(
                f"the probabilities sum to {total}, expected 1", key=f"{where}.probabilities"
            )
        object.__setattr__(self, "probabilities", exact)
        if not self.name:
            trained = [label for label, p in exact.items() if p != 0]
            object.__setattr__(self, "name", "+".join(trained) if exact else "task")

    @property
    def trained(self) -> tuple[str, ...]:
        """The labels of the contexts with probability > 0 in this phase (from
        ``probabilities``; a phase with a task of its own: that task's, by label)."""
        if self.task is not None:
            return tuple(c.label for c in self.task.contexts if _nonzero(c.probability))
        return tuple(label for label, p in self.probabilities.items() if p != 0)


def _nonzero(p: Any) -> bool:
    return bool(p != 0)


@dataclass(frozen=True)
class Schedule:
    r"""Phases in order, each trained from the previous phase's end state.

    Parameters
    ----------
    phases
        One :class:`Phase` or more.
    source
        Where the schedule was read (a graph file), for messages.

    Raises
    ------
    TaskSpecError
        No phases, or an entry that is not a :class:`Phase`.

    References
    ----------
    Saxe, Sodhani & Lewallen (2022), Eqs. (2), (5)-(6): gradient flow sees the data only
    through the statistics, which a schedule makes piecewise constant in time.
    """

    phases: tuple[Phase, ...]
    source: str = field(default="<schedule>", compare=False)

    def __post_init__(self) -> None:
        phases = tuple(self.phases) if isinstance(self.phases, Sequence) else ()
        if not phases:
            raise TaskSpecError(
                f"a schedule needs at least one phase, got {shorten(self.phases)}",
                source=self.source,
                key="schedule",
            )
        keyed = []
        for k, phase in enumerate(phases):
            if not isinstance(phase, Phase):
                raise TaskSpecError(
                    f"expected a Phase, got {shorten(phase)}",
                    source=self.source,
                    key=f"phases[{k}]",
                )
            keyed.append(phase if phase.key else dataclasses.replace(phase, key=f"phases[{k}]"))
        object.__setattr__(self, "phases", tuple(keyed))

    def __len__(self) -> int:
        return len(self.phases)

    @property
    def boundaries(self) -> tuple[float, ...]:
        """0, then the end of each phase, in units of $\\tau$."""
        return (0.0, *(float(t) for t in np.cumsum([p.duration for p in self.phases])))

    @property
    def duration(self) -> float:
        """The total length of the schedule, in units of $\\tau$."""
        return self.boundaries[-1]

    def fail(self, phase: int, key: str, message: str) -> TaskSpecError:
        """The one-line error about phase ``phase``'s ``key``, naming the file.

        Parameters
        ----------
        phase
            The index of the phase.
        key
            The key within the phase (``"duration"``), or ``""`` for the phase itself.
        message
            What is wrong, with the value.

        Returns
        -------
        TaskSpecError
            To raise.
        """
        where = self.phases[phase].key + (f".{key}" if key else "")
        return TaskSpecError(message, source=self.source, key=where)

    def check(self, task: Task) -> None:
        """Refuse a phase that names a context the task (with the phases' own tasks) lacks.

        Parameters
        ----------
        task
            The problem's task.

        Raises
        ------
        TaskSpecError
            Naming the file, the phase's key and the unknown label, with the known ones.
        """
        known = {c.label for c in schedule_task(task, self).contexts}
        for k, phase in enumerate(self.phases):
            for label in phase.probabilities:
                if label not in known:
                    shown = ", ".join(sorted(known)[:6]) + (", ..." if len(known) > 6 else "")
                    raise self.fail(
                        k,
                        f"probabilities.{label}",
                        f"no context is labelled {label!r}; the task's labels: {shown}",
                    )


def blocked(labels: Sequence[str], duration: float, repeats: int = 1) -> Schedule:
    """One phase per context in turn (probability 1 each), the cycle ``repeats`` times.

    Parameters
    ----------
    labels
        The contexts' labels, in the order they are trained.
    duration
        Each phase's length, in units of $\\tau$.
    repeats
        How many times the cycle runs (an int >= 1).

    Returns
    -------
    Schedule
        ``len(labels) * repeats`` phases.

    Raises
    ------
    TaskSpecError
        No labels, ``repeats`` not an int >= 1, or a duration that is not a number > 0.

    Examples
    --------
    >>> [p.name for p in blocked(["context0", "context1"], 25.0).phases]
    ['context0', 'context1']
    """
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise TaskSpecError(f"repeats {shorten(repeats)}: expected an int >= 1", key="repeats")
    if isinstance(labels, str) or not labels:
        raise TaskSpecError(f"labels {shorten(labels)}: expected a list of labels", key="labels")
    return Schedule(tuple(Phase(duration, {label: 1}) for _ in range(repeats) for label in labels))


def interleaved(labels: Sequence[str], duration: float) -> Schedule:
    """One phase with every context at equal probability $1/n$.

    Parameters
    ----------
    labels
        The contexts' labels.
    duration
        The phase's length, in units of $\\tau$.

    Returns
    -------
    Schedule
        One phase named ``"interleaved"``.

    Raises
    ------
    TaskSpecError
        No labels, or a duration that is not a number > 0.
    """
    if isinstance(labels, str) or not labels:
        raise TaskSpecError(f"labels {shorten(labels)}: expected a list of labels", key="labels")
    share = sp.Rational(1, len(labels))
    return Schedule((Phase(duration, dict.fromkeys(labels, share), name="interleaved"),))


# -- the task each phase trains on ---------------------------------------------------------


def schedule_task(task: Task, schedule: Schedule) -> Task:
    """Every context the schedule sees, once: the task's own, then the phases' own tasks'.

    A label that two tasks share must mean the same context (its gates, the nodes it binds
    and the moments of the data it binds); a dataset name two tasks share for different
    data is renamed ``"<phase key>:<name>"``. The probabilities are the task's own (a
    context only a phase's task has gets 0): each phase gives its own (:func:`phase_task`).

    Parameters
    ----------
    task
        The problem's task.
    schedule
        The schedule.

    Returns
    -------
    Task
        The contexts whose losses a schedule records, in that order.

    Raises
    ------
    TaskSpecError
        A label that means two different contexts, naming the phase.
    """
    own = [p for p in schedule.phases if p.task is not None]
    if not own:
        return task
    contexts = list(task.contexts)
    datasets = dict(task.datasets)
    by_label = {c.label: (c, task) for c in contexts}
    for phase in own:
        assert phase.task is not None
        for c in phase.task.contexts:
            if c.label in by_label:
                first, first_task = by_label[c.label]
                if not _same_context(first, first_task, c, phase.task):
                    raise TaskSpecError(
                        f"context {c.label!r} of this phase's task differs from the context "
                        "of that label seen before; give it another label",
                        source=schedule.source,
                        key=phase.key,
                    )
                continue
            name = c.dataset
            data = phase.task.datasets[name]
            if name in datasets and datasets[name] is not data:
                name = f"{phase.key}:{c.dataset}"
            datasets[name] = data
            added = dataclasses.replace(c, probability=0, dataset=name)
            contexts.append(added)
            by_label[c.label] = (c, phase.task)
    return Task(contexts=tuple(contexts), datasets=datasets, random_gates=task.random_gates)


def _same_context(a: Context, task_a: Task, b: Context, task_b: Task) -> bool:
    """Whether two contexts gate and bind alike, on data of the same second moments."""
    if dict(a.gates) != dict(b.gates) or dict(a.inputs) != dict(b.inputs):
        return False
    if dict(a.targets) != dict(b.targets):
        return False
    da, db = task_a.datasets[a.dataset], task_b.datasets[b.dataset]
    if da is db:
        return True
    fields = [*a.inputs.values(), *a.targets.values()]
    for f in fields:
        for g in fields:
            if da.has_moment(f, g) != db.has_moment(f, g):
                return False
            if da.has_moment(f, g) and not np.allclose(
                as_float(da.moment(f, g)), as_float(db.moment(f, g)), rtol=1e-12, atol=1e-300
            ):
                return False
    return True


def phase_task(union: Task, phase: Phase) -> Task:
    """The task of one phase: every context of ``union`` with the phase's probabilities.

    Parameters
    ----------
    union
        :func:`schedule_task` of the problem's task and the schedule.
    phase
        The phase.

    Returns
    -------
    Task
        The same contexts and datasets; a context the phase does not name has
        probability 0 (its loss is still recorded: that curve is forgetting).
    """
    if phase.task is not None:
        given = {c.label: c.probability for c in phase.task.contexts}
    else:
        given = dict(phase.probabilities)
    contexts = tuple(
        dataclasses.replace(c, probability=given.get(c.label, 0)) for c in union.contexts
    )
    return Task(contexts=contexts, datasets=union.datasets, random_gates=union.random_gates)
