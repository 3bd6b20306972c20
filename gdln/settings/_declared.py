r"""Every setting of gdln, declared once: name, type, default, meaning, file key, option.

The fields of :class:`Settings` *are* the declarations. Each carries, beside its default,
a :class:`Declaration`: what it means, how a value is read and checked, the graph-file key
that presets it (``solve.lump``) and the command-line option that overrides it
(``--lump``). From this one table

* a graph file's ``solve:`` and ``simulate:`` sections are read into a :class:`Settings`
  when the problem is loaded (:meth:`Settings.from_file`; ``Problem.settings``);
* every public function takes each setting it uses as a keyword of the same name whose
  default ``None`` means "the problem's value" (:meth:`Settings.given`): command line,
  else the file, else the declared default, resolved in one place;
* the command line builds its options (``gdln.cli``), the JSON Schema its ``solve:`` and
  ``simulate:`` sections (``gdln schema``), and a test holds the graph-file reference
  against it.

>>> Settings().lump, Settings().t_max
('symmetry', 10.0)
>>> Settings().given(lump="full", t_max="40").t_max
40.0
>>> Settings().given(lump="fast")
Traceback (most recent call last):
...
gdln.settings._declared.SettingError: lump (--lump): expected one of none, symmetry, balanced, full; got 'fast'
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from fractions import Fraction
from typing import Any

from .._errors import REMOVED_IN, GdlnDeprecationWarning, GraphSpecError, shorten
from ._choices import DTYPES, DYNAMICS, INITS, LUMPINGS, METHODS, OPTIMIZERS, ROUTES, THEORY_STARTS
from ._constraints import NON_NEGATIVE, POSITIVE, UNIT_INTERVAL, Constraint, Options, at_least
from ._parse import FLAG, AutoOr, Device, ExactReal, Optional
from ._spellings import DEPRECATED_KEYS

__all__ = [
    "SECTIONS",
    "Declaration",
    "SettingError",
    "Settings",
    "declarations",
    "read_setting",
]

SECTIONS = ("solve", "simulate")
"""The graph-file sections that preset settings."""


class SettingError(GraphSpecError):
    """A setting's value is malformed: the message names the setting (and the file key or
    option it came from) and what was expected.

    Parameters
    ----------
    message
        What is wrong: the setting's name, its option, and what was expected.
    source
        The file (or other origin) the value came from.
    key
        The file key of the setting, such as ``solve.t_max``.
    """


@dataclass(frozen=True)
class Declaration:
    """What one setting means and how its values are read.

    Parameters
    ----------
    meaning
        One sentence: what the setting is (help text, schema description, reference).
    constraint
        What a value must be (:mod:`gdln.settings._constraints`): it reads a value (from a
        file, the command line or Python) into the setting's type, raising
        ``ValueError`` with what was expected.
    choices
        The names a choice setting takes, with their meanings.
    file_key
        ``"section.key"`` of a graph file, or ``None`` (not a file setting).
    option
        The command-line option, or ``None``.
    shown
        The default as the help and the reference show it.
    """

    meaning: str
    constraint: Constraint
    choices: Mapping[str, str] | None = None
    file_key: str | None = None
    option: str | None = None
    shown: str = ""

    @property
    def parse(self) -> Any:
        """The constraint's reader of values and text: value -> the setting's value, or
        ``ValueError``."""
        return self.constraint.parse

    @property
    def expected(self) -> str:
        """What a value must be, in words (``"a finite number > 0"``)."""
        return str(self.constraint)


def _declare(
    default: Any,
    meaning: str,
    constraint: Constraint,
    *,
    file: bool = False,
    section: str = "solve",
    option: bool = True,
    shown: str | None = None,
) -> Any:
    """A field of :class:`Settings` carrying its :class:`Declaration` (the name is the
    field's; the file key is ``section.name``, the option ``--name`` with dashes)."""
    declaration = Declaration(
        meaning=meaning,
        constraint=constraint,
        choices=constraint.names if isinstance(constraint, Options) else None,
        file_key=section if file else None,  # completed with the name in declarations()
        option="" if option else None,
        shown=str(default) if shown is None else shown,
    )
    return field(default=default, metadata={"declaration": declaration})


# ----------------------------------------------------------------------------- the table


@dataclass(frozen=True)
class Settings:
    r"""The resolved value of every setting; the fields are the declarations.

    Build it with :meth:`from_file` (a graph file's sections) or with keywords; override
    with :meth:`given`. Every field is read and checked when the value is made.

    Parameters
    ----------
    lump
        How far the reduced ODEs are lumped (:data:`~gdln.settings.LUMPINGS`).
    b0
        The initial value $b(0)$ of every reduced variable (Eq. 9; a mapping edge -> value
        for one per edge).
    route
        How the dynamics of the file are obtained (:data:`~gdln.settings.ROUTES`).
    t_max
        The horizon, in units of $\tau$.
    lr
        The learning rate of gradient descent: the step of the reduced gradient-descent
        map and of every simulation, in units of $\tau$.
    weight_decay
        The weight decay $\gamma \ge 0$: the objective is the loss of Eq. (1) plus
        $\tfrac{\gamma}{2}\sum_e\lVert W_e\rVert_F^2$ over the trained edges, so that
        $\tau\dot W_e = -\partial\mathcal L/\partial W_e - \gamma W_e$ (flow, reduced
        dynamics, gradient-descent map and simulation alike).
    dynamics
        What ``solve`` integrates (:data:`~gdln.settings.DYNAMICS`).
    points
        How many times are recorded.
    method
        The ODE stepper (:data:`~gdln.settings.METHODS`).
    init_scheme
        How a simulation's initial weights are made (:data:`~gdln.settings.INITS`).
    init_scale
        The scale $\sigma_0$ of random initial weights.
    theory_start
        Where ``compare`` starts the theory (:data:`~gdln.settings.THEORY_STARTS`).
    seeds, seed
        How many random repetitions, and the first seed.
    optimizer, batch_size, momentum
        The optimiser (:data:`~gdln.settings.OPTIMIZERS`), its minibatch size and its
        heavy-ball momentum $\mu$.
    dtype, device, threads
        Where and how a simulation computes.
    progress
        Whether runs show a progress bar.
    record_patterns
        Whether a simulation records the activation patterns of its ReLU nodes (and its
        training examples), from which :func:`gdln.extract` reads the gated network.
    source
        The file the values were read from, named in error messages (``None``: not a file).
    written
        The names of the settings the file wrote (:meth:`from_file`); empty otherwise.
    called
        The names of the settings given for the call that resolved these
        (:meth:`given`); empty otherwise.
    """

    lump: str = _declare(
        "symmetry",
        "How far to lump the reduced ODEs; symmetry is exact for the ODE and the "
        "gradient-descent map alike.",
        Options(LUMPINGS),
        file=True,
    )
    b0: Any = _declare(  # noqa: RUF009 (a field() carrying its declaration)
        Fraction(1, 1000),
        "The initial value b(0) of every reduced variable (the decoupled start of Eq. 9): "
        "a number such as 0.1 or 1/10.",
        ExactReal(),
        file=True,
        shown="1/1000",
    )
    route: str = _declare(
        "auto",
        "How the dynamics are obtained: the symmetry quotient, every context, path-free "
        "moments or the full matrices; auto chooses by one rule for every command.",
        Options(ROUTES),
        file=True,
    )
    t_max: float = _declare(
        10.0,
        "The horizon, in units of tau.",
        POSITIVE,
        file=True,
        shown="10",
    )
    lr: float = _declare(
        0.05,
        "The learning rate of gradient descent: the step, in units of tau, of the reduced "
        "gradient-descent map and of every simulation.",
        POSITIVE,
        file=True,
    )
    weight_decay: float = _declare(
        0.0,
        "The weight decay gamma: the penalty (gamma/2) times the sum of every trained "
        "weight's squared norm is added to the loss, in the theory and every simulation.",
        NON_NEGATIVE,
        file=True,
        shown="0",
    )
    dynamics: str = _declare(
        "flow",
        "What solve integrates: gradient flow (the ODE) or the exact gradient-descent map "
        "with learning rate lr.",
        Options(DYNAMICS),
        file=True,
    )
    points: int = _declare(
        201,
        "How many times are recorded, evenly spaced from 0 to t_max.",
        at_least(2),
        file=True,
    )
    method: str = _declare(
        "auto",
        "The ODE stepper.",
        Options(METHODS),
        file=True,
    )
    init_scheme: str = _declare(
        "xavier",
        "How a simulation's initial weights are made: a random scheme at scale init_scale, "
        "or the decoupled weights of Eq. (9) at b0.",
        Options(INITS),
        file=True,
        section="simulate",
    )
    init_scale: float = _declare(
        0.2,
        "The scale sigma0 of random initial weights.",
        NON_NEGATIVE,
        file=True,
        section="simulate",
    )
    theory_start: str = _declare(
        "auto",
        "Where compare starts the theory and the decoupled run: auto takes b0 where b0 is "
        "given (for the run, else in the file) and init_scale is not given for the run, "
        "else the mode strengths of the random initial weights.",
        Options(THEORY_STARTS),
        file=True,
        section="simulate",
    )
    seeds: int = _declare(
        10,
        "How many runs from random initial weights, batched.",
        at_least(1),
        file=True,
        section="simulate",
    )
    seed: int = _declare(
        0,
        "The first seed; runs are reproducible under it.",
        at_least(0),
        file=True,
        section="simulate",
    )
    optimizer: str = _declare(
        "gd",
        "The optimiser of a simulation.",
        Options(OPTIMIZERS),
        file=True,
        section="simulate",
    )
    batch_size: int | None = _declare(
        None,
        "The minibatch size of the sgd optimiser.",
        Optional(at_least(1)),
        file=True,
        section="simulate",
        shown="none",
    )
    momentum: float = _declare(
        0.0,
        "Heavy-ball momentum mu; each step then advances t by lr/(1-mu) tau.",
        UNIT_INTERVAL,
        file=True,
        section="simulate",
        shown="0",
    )
    dtype: str = _declare(
        "float64",
        "The floating-point type of a simulation.",
        Options(DTYPES),
    )
    device: str = _declare(
        "auto",
        "Where a simulation runs: auto (CUDA when present, else the CPU), cpu or cuda[:k].",
        Device(),
    )
    threads: Any = _declare(  # noqa: RUF009 (a field() carrying its declaration)
        "auto",
        "CPU threads for torch: auto chooses from the work per step and the free cores (1 for "
        "small networks or a busy machine); the run's meta['threads'] says how many ran.",
        AutoOr(at_least(1)),
    )
    progress: Any = _declare(  # noqa: RUF009 (a field() carrying its declaration)
        "auto",
        "Show a progress bar: auto shows one when standard error is a terminal.",
        AutoOr(FLAG),
    )
    record_patterns: bool = _declare(
        False,
        "Record at every recorded step which units of each ReLU node are on for which "
        "training example (and the weights and examples), for gdln extract.",
        FLAG,
        file=True,
        section="simulate",
        shown="false",
    )

    source: str | None = field(default=None, compare=False, repr=False)
    """The file whose sections preset these settings (errors name it)."""
    written: frozenset[str] = field(default=frozenset(), compare=False, repr=False)
    """The settings the file wrote (for rules that honour the file's own choice)."""
    called: frozenset[str] = field(default=frozenset(), compare=False, repr=False)
    """The settings given for the call (for rules that honour the nearer source)."""

    def __post_init__(self) -> None:
        for name, declaration in declarations().items():
            value = getattr(self, name)
            object.__setattr__(self, name, _read(name, declaration, value, source=self.source))

    @classmethod
    def from_file(cls, sections: Mapping[str, Any], *, source: str | None = None) -> Settings:
        """The settings a graph file presets in its ``solve:`` and ``simulate:`` sections.

        ``sections`` maps a section name to its mapping (as read). Unknown keys are
        refused, naming the file, the key and the keys known; old spellings
        (:data:`DEPRECATED_KEYS`) are read with a :class:`~gdln.GdlnDeprecationWarning`.

        Parameters
        ----------
        sections
            Section name (``solve``, ``simulate``) to the mapping read from the file;
            numbers as text are read exactly (fractions), never evaluated.
        source
            The file's name, for error messages.

        Returns
        -------
        Settings
            The declared defaults with the file's values in their place.

        Raises
        ------
        SettingError
            An unknown key, or a value its declaration refuses (naming file and key).
        """
        values: dict[str, Any] = {}
        written: dict[str, str] = {}  # setting -> the key the file wrote it under
        by_key = {d.file_key: name for name, d in declarations().items() if d.file_key}
        for section, mapping in sections.items():
            if not isinstance(mapping, Mapping):
                raise SettingError(
                    f"expected a mapping of settings, got {shorten(mapping)}",
                    source=source,
                    key=section,
                )
            for key, value in mapping.items():
                as_written = file_key = f"{section}.{key}"
                if file_key in DEPRECATED_KEYS:
                    new = DEPRECATED_KEYS[file_key]
                    warnings.warn(
                        f"{source}: {file_key} is now {declarations()[new].file_key} "
                        f"(the old key is read until gdln {REMOVED_IN})",
                        GdlnDeprecationWarning,
                        stacklevel=3,
                    )
                    file_key = declarations()[new].file_key or file_key
                name = by_key.get(file_key)
                if name is None:
                    known = sorted(k.split(".", 1)[1] for k in by_key if k.startswith(section))
                    raise SettingError(
                        f"unknown setting {shorten(key)}; expected one of {', '.join(known)}",
                        source=source,
                        key=section,
                    )
                if name in written:  # the old key beside the new one
                    raise SettingError(
                        f"{written[name]} and {as_written} are one setting, the second its "
                        f"old name; keep {file_key} only",
                        source=source,
                        key=as_written,
                    )
                written[name] = as_written
                values[name] = _read(
                    name, declarations()[name], value, source=source, key=as_written
                )
        return cls(**values, source=source, written=frozenset(values))

    def given(self, **values: Any) -> Settings:
        """These settings with the given values instead; ``None`` keeps a value.

        The one rule of every public function and command: a value given for the call
        (keyword or option), else the file's, else the declared default.

        Parameters
        ----------
        **values
            Setting name to value, checked by the declaration; ``None`` keeps the value.

        Returns
        -------
        Settings
            A new value (or this one, when nothing is given).

        Raises
        ------
        TypeError
            A name that is not a declared setting.
        SettingError
            A value its declaration refuses.
        """
        unknown = sorted(set(values) - set(declarations()))
        if unknown:
            raise TypeError(f"unknown settings: {', '.join(unknown)}")
        chosen = {k: v for k, v in values.items() if v is not None}
        if not chosen:
            return self
        return dataclasses.replace(self, **chosen, called=self.called | frozenset(chosen))


def _read(
    name: str,
    declaration: Declaration,
    value: Any,
    *,
    source: str | None = None,
    key: str | None = None,
) -> Any:
    """``value`` read by the declaration; an error names the file (where known), and the
    file key as written (``key``: a value from the file) or the setting and its option
    (a value given)."""
    try:
        return declaration.parse(value)
    except (ValueError, TypeError, ArithmeticError) as err:
        if key is not None:
            where = key
        elif name == "device":  # the one device rule, one message shape (gdln._device)
            where = name
        else:
            where = f"{name} ({declaration.option})" if declaration.option else name
        raise SettingError(str(err), source=source, key=where) from None


def read_setting(name: str, value: Any) -> Any:
    """``value`` read and checked by the declaration of setting ``name`` (an error names
    the setting and its option); nothing else is read, so this stays light."""
    return _read(name, declarations()[name], value)


_DECLARATIONS: dict[str, Declaration] = {}


def declarations() -> dict[str, Declaration]:
    """Every declared setting, in the order of :class:`Settings`.

    Returns
    -------
    dict[str, Declaration]
        Setting name -> its :class:`Declaration`, with the file key completed
        (``section.name``) and the option spelled (``--name``).
    """
    if not _DECLARATIONS:
        for item in fields(Settings):
            if "declaration" not in item.metadata:
                continue  # source
            declaration: Declaration = item.metadata["declaration"]
            _DECLARATIONS[item.name] = dataclasses.replace(
                declaration,
                file_key=None
                if declaration.file_key is None
                else f"{declaration.file_key}.{item.name}",
                option=None if declaration.option is None else "--" + item.name.replace("_", "-"),
            )
    return _DECLARATIONS
