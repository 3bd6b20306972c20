"""Bounds on what gdln reads from a file, so that no file can hang it or exhaust memory.

A graph or task file is checked against these limits *before* the costly step they guard:
the file's size before it is read, YAML nesting depth and alias expansion before the
document is built, an expression's length and depth before it is walked. Each limit has a
documented default, raised for one call with ``gdln.load(..., limits=Limits(...))`` or for
a whole process with an environment variable:

====================  ==========  =============================  ==========================
field                 default     environment variable           bounds
====================  ==========  =============================  ==========================
``file_bytes``        10 MiB      ``GDLN_MAX_FILE_BYTES``        size of a graph/task file
``depth``             100         ``GDLN_MAX_DEPTH``             YAML/JSON nesting depth
``yaml_nodes``        250 000     ``GDLN_MAX_YAML_NODES``        YAML values, aliases expanded
``expression_chars``  2 000       ``GDLN_MAX_EXPRESSION_CHARS``  length of one expression
``expression_depth``  100         ``GDLN_MAX_EXPRESSION_DEPTH``  nesting of one expression
``entries``           500 000     ``GDLN_MAX_ENTRIES``           entries after ``repeat``
``data_bytes``        64 MiB      ``GDLN_MAX_DATA_BYTES``        an npz, file and unzipped
``data_values``       1 048 576   ``GDLN_MAX_DATA_VALUES``       numbers in npz data
``exact_values``      1 000 000   ``GDLN_MAX_EXACT_VALUES``      exact numbers of datasets
``data_arrays``       10 000      ``GDLN_MAX_DATA_ARRAYS``       arrays in npz files
``steps``             10 000 000  ``GDLN_MAX_STEPS``             steps of a run (GD map, simulation)
``points``            100 000     ``GDLN_MAX_POINTS``            recorded times of a run
``batch_elements``    50 000 000  ``GDLN_MAX_BATCH_ELEMENTS``    numbers a simulation holds per step
``expression_work``   20 000 000  ``GDLN_MAX_EXPRESSION_WORK``   steps of all expressions
``work``              60          ``GDLN_MAX_WORK``              estimated CPU seconds of a stage
``memory``            1 GiB       ``GDLN_MAX_MEMORY``            bytes a stage allocates at once
====================  ==========  =============================  ==========================

``steps``, ``points`` and ``batch_elements`` bound the work that numbers *imply* (``t_max/lr`` steps, ``--points``,
``--batch-size`` times ``--seeds``); :func:`gdln.solve`, :func:`gdln.simulate` and
:func:`gdln.compare` check them before they start. ``work`` and ``memory`` bound what a
costly stage does with counts that every other limit lets through (exact moments of many
examples, the symbolic loss and its lumping, the moment route's tape, an ODE that turns
stiff, the full-matrix flow): each stage estimates its cost before it starts
(:func:`check_work`, :func:`check_memory`) or meters it while it runs (:class:`WorkMeter`)
and is refused in one line that names the limit.

>>> Limits().depth
100
>>> with use_limits(Limits(depth=5)):
...     current_limits().depth
5
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, fields

from .._errors import MAX_MESSAGE, GdlnError, GraphSpecError, shorten, shorten_text

__all__ = [
    "ENVIRONMENT",
    "Limits",
    "WorkMeter",
    "beyond",
    "check_memory",
    "check_work",
    "count_entries",
    "count_values",
    "count_work",
    "counting",
    "current_limits",
    "metering",
    "tick",
    "use_limits",
]

ENVIRONMENT: dict[str, str] = {
    "file_bytes": "GDLN_MAX_FILE_BYTES",
    "depth": "GDLN_MAX_DEPTH",
    "yaml_nodes": "GDLN_MAX_YAML_NODES",
    "expression_chars": "GDLN_MAX_EXPRESSION_CHARS",
    "expression_depth": "GDLN_MAX_EXPRESSION_DEPTH",
    "entries": "GDLN_MAX_ENTRIES",
    "data_bytes": "GDLN_MAX_DATA_BYTES",
    "data_values": "GDLN_MAX_DATA_VALUES",
    "exact_values": "GDLN_MAX_EXACT_VALUES",
    "data_arrays": "GDLN_MAX_DATA_ARRAYS",
    "steps": "GDLN_MAX_STEPS",
    "points": "GDLN_MAX_POINTS",
    "batch_elements": "GDLN_MAX_BATCH_ELEMENTS",
    "expression_work": "GDLN_MAX_EXPRESSION_WORK",
    "work": "GDLN_MAX_WORK",
    "memory": "GDLN_MAX_MEMORY",
}


@dataclass(frozen=True)
class Limits:
    """How much :func:`gdln.load` reads before it refuses a file.

    Parameters
    ----------
    file_bytes
        Largest graph or task file, in bytes (checked before reading).
    depth
        Deepest nesting of YAML or JSON collections, counting those reached through
        YAML aliases.
    yaml_nodes
        Most values (scalars and collections) in one YAML document, counting each YAML
        alias as the values it stands for; this bounds "billion laughs" alias bombs.
    expression_chars
        Longest expression (a parameter, size, probability or ``{...}`` field of an id).
    expression_depth
        Deepest nesting of an expression's syntax tree (``1+1+...+1`` nests once per term).
    entries
        Most nodes, edges, contexts, examples and random gates one file expands to, each
        ``repeat`` counted as the entries it makes (one entry costs tens of microseconds).
    data_bytes
        Largest ``.npz`` data file, and most bytes its arrays take once decompressed
        (both read from the file's zip directory before any array is, and the
        decompressed stream counted as it is read); also the largest sweep table.
    data_values
        Most numbers the ``.npz`` files of one load hold (read from each array's ``.npy``
        header before the array is), plus the second moments they imply: a dataset or a
        group of examples whose fields have $D$ columns in all has $D^2$ of them. Also the
        most cells of a sweep table (counted by their separators before it is parsed).
    exact_values
        Most exact numbers (rationals, expressions) the datasets of one load are built
        from: the values of ``examples:`` and ``moments:`` matrices after ``repeat``, and
        the cells of built-in datasets (``{builtin: whitened, size: n}`` has $2n^2$),
        counted before they are built. One costs microseconds and about 100 bytes.
    data_arrays
        Most arrays the ``.npz`` files of one load hold, counted as the most that each
        file's zip directory has room for (an entry takes at least 46 bytes) before the
        directory is read; checking one array costs about 100 microseconds.
    steps
        Most steps of one run, ``round(t_max / lr)``: of the gradient-descent map of
        :func:`gdln.solve` and of a simulation (a step costs microseconds to milliseconds).
    points
        Most recorded times of one run (``n_points``, ``--points``, the records of a
        simulation); each holds every variable. Also the most points of a sweep's grid.
    batch_elements
        Most numbers a simulation holds per step: seeds times (examples or minibatch rows
        times the summed node sizes, plus the weights), 400 MB in float64 at the default;
        the tangent kernel along a trajectory at a time (:func:`gdln.trajectory_kernels`);
        and the numbers ``gdln kernel`` and ``gdln sd`` hold at once (estimated first).
    expression_work
        Most steps the expressions of one file may take together: each evaluation costs
        the nodes of its syntax tree, a ``pick()`` draw the domains it shuffles and a root
        of an exact number the square of its bits (a step is well under a microsecond).
    work
        Most CPU seconds one stage may take, as the stage estimates them from its counts
        before it starts (exact moments of examples, the symbolic loss, lumping and
        conserved quantities, the moment route's tape) or meters them while it runs (the
        steps of an ODE stepper and of the full-matrix flow, refused early when the pace
        so far would take longer). The estimates are calibrated on a 2-core machine.
    memory
        Most bytes one stage allocates at once for its arrays (the full-matrix flow with
        its recorded states, a simulation's batch and its gradients), estimated before
        they are allocated.

    Raises
    ------
    GraphSpecError
        A field is not a positive integer.
    """

    file_bytes: int = 10 * 2**20
    depth: int = 100
    yaml_nodes: int = 250_000
    expression_chars: int = 2_000
    expression_depth: int = 100
    entries: int = 500_000
    data_bytes: int = 64 * 2**20
    data_values: int = 2**20
    exact_values: int = 1_000_000
    data_arrays: int = 10_000
    steps: int = 10_000_000
    points: int = 100_000
    batch_elements: int = 50_000_000
    expression_work: int = 20_000_000
    work: int = 60
    memory: int = 2**30

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise GraphSpecError(
                    f"Limits.{item.name}: expected a positive integer, got {shorten(value)}"
                )

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> Limits:
        """The defaults, replaced by any ``GDLN_MAX_*`` variable that is set.

        Parameters
        ----------
        environ
            The variables to read (default: :data:`os.environ`).

        Returns
        -------
        Limits
            The limits in force.

        Raises
        ------
        GraphSpecError
            A variable is set to something other than a positive integer.
        """
        environ = os.environ if environ is None else environ
        values: dict[str, int] = {}
        for name, variable in ENVIRONMENT.items():
            text = environ.get(variable, "").strip().replace("_", "")
            if not text:
                continue
            # ASCII digits only: int() reads other decimal digits ('٣') and str.isdigit()
            # takes superscripts ('²') that int() refuses
            if not (text.isascii() and text.isdigit()) or int(text) <= 0 or len(text) > 18:
                raise GraphSpecError(
                    f"expected a positive integer, got {shorten(environ[variable])}",
                    source="environment",
                    key=variable,
                )
            values[name] = int(text)
        return cls(**values)

    def exceeded(self, name: str, what: str) -> str:
        """A message saying that ``what`` is beyond limit ``name`` and how to raise it.

        Parameters
        ----------
        name
            The limit, a field name such as ``"entries"``.
        what
            What went beyond it, e.g. ``"600000 entries"``.

        Returns
        -------
        str
            The message, naming the limit's value and the ways to raise it.
        """
        return (
            f"{what} exceeds the limit {name}={getattr(self, name)} "
            f"(raise it: {ENVIRONMENT[name]}=N or load(limits=Limits({name}=N)))"
        )


def beyond(limit: str, what: str) -> str:
    """``what exceeds the limit NAME=VALUE (raise it: GDLN_MAX_NAME=N)``."""
    value = getattr(current_limits(), limit)
    return f"{what} exceeds the limit {limit}={value} (raise it: {ENVIRONMENT[limit]}=N)"


def count_entries(
    added: int, *, source: str, key: str, cls: type[GraphSpecError] = GraphSpecError
) -> None:
    """Count ``added`` entries of the file being read; refuse it past the current limit."""
    limits = current_limits()
    counter = _ENTRIES.get()
    total = added + (counter[0] if counter is not None else 0)
    if counter is not None:
        counter[0] = total
    if total > limits.entries:
        raise cls(limits.exceeded("entries", f"{total} entries"), source=source, key=key)


def count_work(steps: int, *, cls: type[Exception] = GraphSpecError) -> None:
    """Count ``steps`` of expression work of the file being read; refuse it past the limit.

    Outside :func:`use_limits` nothing is counted: one expression alone is bounded by
    its length, its depth and the size of the numbers it may build.
    """
    counter = _WORK.get()
    if counter is None:
        return
    counter[0] += steps
    if counter[0] > counter[1]:
        limits = current_limits()
        raise cls(limits.exceeded("expression_work", f"{counter[0]} steps of expressions"))


_ACTIVE: ContextVar[Limits | None] = ContextVar("gdln_limits", default=None)
_ENTRIES: ContextVar[list[int] | None] = ContextVar("gdln_entries", default=None)
_TOTALS: ContextVar[dict[str, int] | None] = ContextVar("gdln_totals", default=None)
_WORK: ContextVar[list[int] | None] = ContextVar("gdln_work", default=None)


def current_limits() -> Limits:
    """The limits in force: those of the enclosing :func:`use_limits`, else the
    environment's (:meth:`Limits.from_environment`)."""
    active = _ACTIVE.get()
    return active if active is not None else Limits.from_environment()


def counting() -> contextlib.AbstractContextManager[Limits]:
    """:func:`use_limits` for work done after a file was read (contexts made on first
    use), unless a read is already counting."""
    active = _ACTIVE.get()
    return contextlib.nullcontext(active) if active is not None else use_limits()


@contextlib.contextmanager
def use_limits(limits: Limits | None = None) -> Iterator[Limits]:
    """Put ``limits`` (default: :func:`current_limits`) in force for the enclosed reads."""
    chosen = limits if limits is not None else current_limits()
    if not isinstance(chosen, Limits):
        raise GraphSpecError(f"limits: expected a gdln.graphfile.Limits, got {shorten(chosen)}")
    token, counted, totals = _ACTIVE.set(chosen), _ENTRIES.set([0]), _TOTALS.set({})
    worked = _WORK.set([0, chosen.expression_work])
    try:
        yield chosen
    finally:
        _ACTIVE.reset(token)
        _ENTRIES.reset(counted)
        _TOTALS.reset(totals)
        _WORK.reset(worked)


def count_values(
    name: str,
    added: int,
    what: str,
    *,
    source: str,
    key: str | None = None,
    cls: type[GraphSpecError] = GraphSpecError,
) -> None:
    """Count ``added`` towards limit ``name`` (``data_values``, ``exact_values``) before
    building what they stand for; refuse past the limit, all files of one load together.

    ``what`` describes the ``added`` values in the message, e.g. ``"array 'x' of shape
    (10, 2): 20 values"``.
    """
    limits = current_limits()
    totals = _TOTALS.get()
    before = totals.get(name, 0) if totals is not None else 0
    if before + added > getattr(limits, name):
        if before:
            what = f"{what} ({before + added} with the data read before)"
        raise cls(limits.exceeded(name, what), source=source, key=key)
    if totals is not None:
        totals[name] = before + added


def _fit(what: str, rest: str) -> str:
    """``what + rest`` within :data:`~gdln._errors.MAX_MESSAGE` characters, ``what`` cut in
    the middle where it must be (the limit and how to raise it are kept whole)."""
    return shorten_text(what, max(MAX_MESSAGE - len(rest), 40)) + rest


def _seconds(value: float) -> str:
    return f"{value:.0f} s" if 10 <= value < 1e6 else f"{value:.2g} s"


def check_work(
    seconds: float, what: str, *, cls: Callable[[str], BaseException] = GdlnError, advice: str = ""
) -> None:
    """Refuse a stage whose estimated cost ``seconds`` exceeds the limit ``work``.

    ``what`` says what the stage would do, e.g. ``"exact moments of 300 examples x 300
    values (27000000 multiply-adds)"``; ``advice`` (optional) what else to lower.

    >>> with use_limits(Limits(work=1)):
    ...     check_work(5.0, "a test")
    Traceback (most recent call last):
    ...
    gdln._errors.GdlnError: a test, about 5 s, exceeds the limit work=1 s (raise it: GDLN_MAX_WORK=N)
    """
    limit = current_limits().work
    if seconds > limit:
        tail = f"; {advice}" if advice else ""
        rest = (
            f", about {_seconds(seconds)}, exceeds the limit work={limit} s "
            f"(raise it: {ENVIRONMENT['work']}=N){tail}"
        )
        raise cls(_fit(what, rest))


def check_memory(
    nbytes: float, what: str, *, cls: Callable[[str], BaseException] = GdlnError, advice: str = ""
) -> None:
    """Refuse a stage that would allocate ``nbytes`` beyond the limit ``memory``.

    >>> check_memory(2**40, "weights of 1e6 x 1e6")
    Traceback (most recent call last):
    ...
    gdln._errors.GdlnError: weights of 1e6 x 1e6, about 1e+03 GiB, exceed the limit memory=1073741824 bytes (raise it: GDLN_MAX_MEMORY=N)
    """
    limit = current_limits().memory
    if nbytes > limit:
        tail = f"; {advice}" if advice else ""
        rest = (
            f", about {nbytes / 2**30:.2g} GiB, exceed the limit memory={limit} bytes "
            f"(raise it: {ENVIRONMENT['memory']}=N){tail}"
        )
        raise cls(_fit(what, rest))


class WorkMeter:
    """Meter a stage whose cost is known only as it runs (the steps of an ODE).

    Each :meth:`charge` adds the estimated seconds of one unit of work (a right-hand-side
    evaluation, a step) done up to time ``t`` of ``horizon``; :meth:`measure` charges the
    CPU time spent since it was last called. The stage is refused once
    the charges pass the limit ``work``, or earlier, once a twentieth of it is spent, when
    the pace so far would need more than the limit to reach the horizon.

    >>> meter = WorkMeter("the test ODE", horizon=10.0, limit=1)
    >>> meter.charge(0.01, 5.0)
    >>> meter.charge(0.1, 0.5)
    Traceback (most recent call last):
    ...
    gdln._errors.GdlnError: the test ODE reached t = 0.5 of 10 in about 0.11 s, and at that pace would take about 2.2 s: beyond the limit work=1 s (raise it: GDLN_MAX_WORK=N)
    """

    def __init__(
        self,
        what: str,
        *,
        horizon: float,
        cls: Callable[[str], BaseException] = GdlnError,
        advice: str = "",
        limit: float | None = None,
    ) -> None:
        self.what, self.horizon, self.cls, self.advice = what, float(horizon), cls, advice
        self.limit = float(current_limits().work if limit is None else limit)
        self.spent = 0.0
        self.clock = time.process_time()

    def measure(self, t: float) -> None:
        """Charge the CPU time this process spent since the last call (or the meter's
        start): the work done by time ``t``; refuse past the limit (see above)."""
        now = time.process_time()
        self.charge(now - self.clock, t)
        self.clock = now

    def charge(self, seconds: float, t: float) -> None:
        """Add ``seconds`` of work done by time ``t``; refuse past the limit (see above)."""
        self.spent += seconds
        if self.spent * 20 < self.limit:
            return
        done = min(max(float(t), 0.0), self.horizon) / self.horizon if self.horizon > 0 else 1.0
        projected = self.spent / done if done > 0 else float("inf")
        if self.spent <= self.limit and projected <= self.limit:
            return
        tail = f"; {self.advice}" if self.advice else ""
        rest = (
            f" reached t = {t:.3g} of {self.horizon:.3g} in about "
            f"{_seconds(self.spent)}, and at that pace would take "
            f"{'about ' + _seconds(projected) if projected < 1e12 else 'forever'}: beyond "
            f"the limit work={self.limit:g} s (raise it: {ENVIRONMENT['work']}=N){tail}"
        )
        raise self.cls(_fit(self.what, rest))


_METER: ContextVar[WorkMeter | None] = ContextVar("gdln_meter", default=None)


@contextlib.contextmanager
def metering(meter: WorkMeter) -> Iterator[WorkMeter]:
    """Put ``meter`` in force: every :func:`tick` inside charges it (the steppers of an
    ODE call :func:`tick` without knowing who meters them)."""
    token = _METER.set(meter)
    try:
        yield meter
    finally:
        _METER.reset(token)


def tick(t: float) -> None:
    """Charge the CPU time spent since the last tick to the meter in force, if any, as
    the work done by time ``t`` (:meth:`WorkMeter.measure`)."""
    meter = _METER.get()
    if meter is not None:
        meter.measure(t)
