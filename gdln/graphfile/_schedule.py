r"""A graph file's ``schedule:``: the phases in which its contexts are trained.

Each entry of the list is one phase, or a short form that expands to several::

    schedule:
      - {duration: 25, probabilities: {context0: 1}}            # one phase
      - {duration: 10, task: other_task.yaml, name: transfer}   # a task file of its own
      - {blocked: [context0, context1], duration: 25, repeats: 2}
      - {interleaved: [context0, context1], duration: 50}

Durations and probabilities are expressions in the file's parameters, read exactly
(``1/3`` stays 1/3); labels are the task's context labels. Every error names the file,
the key (``schedule[2].probabilities.context5``) and the value. The value is a
:class:`~gdln.task.Schedule` (Flesch et al. 2023 for blocked and interleaved training;
Saxe, Sodhani & Lewallen 2022, Eqs. 5-6, for why only the probabilities matter).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import sympy as sp

from .._errors import TaskSpecError, shorten
from ..task._schedule import Phase, Schedule
from ..task._task import Task, is_symbolic
from ._document import Scope, entry_of, mapping, printable_name, sequence, text

__all__ = ["PHASE_KEYS", "read_schedule"]

PHASE_KEYS = frozenset({"duration", "probabilities", "task", "name", "blocked", "interleaved"})
PHASE_KEYS |= {"repeats"}
"""The keys of one entry of ``schedule:``."""
MAX_PHASES = 10_000
"""Most phases one schedule expands to."""


def read_schedule(
    doc: Mapping[str, Any], scope: Scope, task: Task | None, read_task: Callable[[Path], Task]
) -> Schedule | None:
    """The document's ``schedule:`` (``None`` without one), checked against ``task``.

    ``read_task`` reads a phase's task file (relative to the graph file's folder) against
    the same graph and parameters.

    Raises
    ------
    TaskSpecError
        Naming the file, the key and the value: an entry that is not a mapping or has an
        unknown key, a duration that is not a number > 0, a probability outside
        [0, 1] or probabilities that do not sum to 1, an unknown label, a task file that
        cannot be read, a schedule without a task, more than :data:`MAX_PHASES` phases.
    """
    if "schedule" not in doc:
        return None
    here = scope.at("schedule")
    here = Scope(here.source, here.folder, here.names, here.key, TaskSpecError)
    phases: list[Phase] = []
    for index, raw in enumerate(sequence(doc["schedule"], here)):
        at = here.at(index)
        entry = entry_of(raw, at, allowed=PHASE_KEYS)
        phases += _phases(entry, at, read_task)
        if len(phases) > MAX_PHASES:
            raise at.fail(f"the schedule expands to more than {MAX_PHASES} phases")
    if not phases:
        raise here.fail("expected a list of phases, got an empty one")
    if task is None:
        raise here.fail("a schedule orders the contexts of a task; the file has no 'task:'")
    schedule = Schedule(tuple(phases), source=scope.source)
    schedule.check(task)
    return schedule


def _phases(entry: Mapping[str, Any], at: Scope, read_task: Callable[[Path], Task]) -> list[Phase]:
    """One entry as phases: a phase, or the expansion of ``blocked:``/``interleaved:``."""
    forms = [k for k in ("probabilities", "task", "blocked", "interleaved") if k in entry]
    if len(forms) != 1:
        raise at.fail(
            "give exactly one of 'probabilities', 'task', 'blocked' or 'interleaved', got "
            + (", ".join(repr(f) for f in forms) or "none")
        )
    if "duration" not in entry:
        raise at.fail("missing 'duration' (in units of tau)")
    form = forms[0]
    if "repeats" in entry and form != "blocked":
        raise at.at("repeats").fail("'repeats' goes with 'blocked'")
    duration = at.at("duration").number(entry["duration"])
    if is_symbolic(duration) or not 0 < float(duration) < math.inf:
        raise at.at("duration").fail(
            f"duration {shorten(duration)}: expected a finite number > 0 (in units of tau)"
        )
    name = ""
    if "name" in entry:
        name = printable_name(text(entry["name"], at.at("name")), at.at("name"), what="name")
    try:
        if form == "probabilities":
            probabilities = {
                _label(label, at.at("probabilities")): at.at("probabilities", str(label)).number(p)
                for label, p in mapping(entry["probabilities"], at.at("probabilities")).items()
            }
            if not probabilities:
                raise at.at("probabilities").fail("expected label: probability, got nothing")
            return [Phase(duration, probabilities, name=name, key=at.key)]
        if form == "task":
            file = text(entry["task"], at.at("task"), what="a task file's path")
            return [Phase(duration, task=read_task(at.folder / file), name=name, key=at.key)]
        labels = [
            _label(label, at.at(form, k))
            for k, label in enumerate(sequence(entry[form], at.at(form)))
        ]
        if not labels:
            raise at.at(form).fail("expected a list of context labels, got an empty one")
        if form == "interleaved":
            share = dict.fromkeys(labels, sp.Rational(1, len(labels)))
            return [Phase(duration, share, name=name or "interleaved", key=at.key)]
        repeats = at.at("repeats").number(entry.get("repeats", 1))
        if not isinstance(repeats, int) or repeats < 1:
            raise at.at("repeats").fail(f"expected an integer >= 1, got {shorten(repeats)}")
        if repeats * len(labels) > MAX_PHASES:
            raise at.at("repeats").fail(
                f"{repeats} x {len(labels)} phases is above the limit of {MAX_PHASES}"
            )
        return [
            Phase(duration, {label: 1}, name=label, key=f"{at.key}.{form}[{k}]")
            for _ in range(repeats)
            for k, label in enumerate(labels)
        ]
    except TaskSpecError as err:
        if err.source is not None:
            raise
        message = str(err)[len(err.key) + 2 :] if err.key else str(err)
        raise TaskSpecError(message, source=at.source, key=err.key) from err


def _label(value: Any, at: Scope) -> str:
    """A context label: printable text (numbers are refused, with a hint to quote)."""
    return printable_name(text(value, at, what="a context label"), at, what="label")
