"""The spellings of an earlier release, in one table, translated at the door.

Every old keyword of a public function, old option of a command and old graph-file key is
one row of :data:`OLD_SPELLINGS`: where it is read, the old spelling, the new one and how a
value given the old way moves to the new. The public entry points translate them at their
door (:func:`~gdln.settings._door.door`, a decorator; the command line builds its hidden options from the rows
of each command and moves their values with :func:`translate_options`; the graph-file
reader reads :data:`DEPRECATED_KEYS`), with one :class:`~gdln.GdlnDeprecationWarning`
naming the new spelling and the release that removes the old one; nothing below a door
sees an old spelling. CHANGELOG.md lists the same rows.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .._errors import REMOVED_IN, GdlnDeprecationWarning

__all__ = [
    "DEPRECATED_KEYS",
    "OLD_SPELLINGS",
    "OldSpelling",
    "old_options",
    "option_name",
    "translate_keywords",
    "translate_options",
]


Move = Callable[[dict[str, Any], Any], str]
"""Moves an old value into the new spellings' values; returns the new spelling in words."""


@dataclass(frozen=True)
class OldSpelling:
    """One spelling of an earlier release.

    Parameters
    ----------
    where
        A public function (``"reduce"``), a command (``"gdln derive"``) or
        ``"graph files"``.
    old
        The old keyword, option or file key.
    new
        The new spelling, in words (the message names it).
    move
        How a value given the old way moves to the new keywords (``None``: a plain
        rename to ``new``, where a value given the new way wins); returns the new spelling
        to name, which may depend on the value.
    flag
        An option that takes no value (a command's ``--ode``).
    like
        The new option whose type an old option takes (its choices).
    """

    where: str
    old: str
    new: str
    move: Move | None = None
    flag: bool = False
    like: str | None = None

    def moved(self, values: dict[str, Any], value: Any) -> str:
        """Put ``value`` where the new spelling goes; return the new spelling in words.

        Parameters
        ----------
        values
            The values given the new way (changed in place).
        value
            The value given the old way.

        Returns
        -------
        str
            The new spelling, as the warning names it.
        """
        if self.move is not None:
            return self.move(values, value)
        if values.get(self.new) is None:
            values[self.new] = value
        return self.new


def _rename(new: str, *, values: Mapping[Any, Any] | None = None, keep: bool = True) -> Move:
    """A rename to ``new`` (the value mapped through ``values``); with ``keep``, a value
    given the new way wins, else the old one does."""

    def move(given: dict[str, Any], value: Any) -> str:
        if values is not None:
            value = values[value]
        if not keep or not given.get(new):
            given[new] = value
        return new

    return move


def _gd_map(values: dict[str, Any], value: Any) -> str:
    """``lr`` without ``dynamics``: the gradient-descent map, as it meant before."""
    values["dynamics"] = "gd-map"
    return "dynamics='gd-map', lr"


def _theory_init(values: dict[str, Any], value: Any) -> str:
    """``theory_init``: ``auto``/``file`` name a start rule, anything else a ``b0``."""
    if isinstance(value, str) and value in ("auto", "file"):
        values["theory_start"] = (
            values.get("theory_start") or {"auto": "random", "file": "b0"}[value]
        )
    elif values.get("b0") is None:
        values["b0"] = value
    return "theory_start (and b0)"


COMPARE_RUN = ("dtype", "device", "threads", "progress")
"""What :func:`gdln.compare` takes of a simulation's settings (its runs are full-batch
gradient descent, the dynamics the theory describes)."""


def _simulation_settings(allowed: tuple[str, ...] | None) -> Move:
    """``settings=SimulationSettings(...)``: each field it sets, as the keyword of the
    same name (a keyword given the new way wins); ``allowed``: the fields the function
    takes (others refused)."""

    def move(values: dict[str, Any], value: Any) -> str:
        if value is None:
            return "its keywords"
        if type(value).__name__ != "SimulationSettings" or not dataclasses.is_dataclass(value):
            raise ValueError(f"settings: expected a SimulationSettings, got {type(value).__name__}")
        moved = []
        for f in dataclasses.fields(value):
            given = getattr(value, f.name)
            if given is None or (f.default is not None and given == f.default):
                continue
            if allowed is not None and f.name not in allowed:
                raise ValueError(
                    f"settings: compare uses only {', '.join(allowed)}; got {f.name}={given!r}"
                )
            if values.get(f.name) is None:
                values[f.name] = given
            moved.append(f.name)
        return "=..., ".join(moved) or "its keywords"

    return move


def _cli_theory_init(values: dict[str, Any], value: Any) -> str:
    _theory_init(values, value)
    return "--theory-start / --b0"


def _cli_simulate_init(values: dict[str, Any], value: Any) -> str:
    """``gdln simulate --init``: the decoupled start's ``--b0``, else ``--init-scale``."""
    decoupled = values.get("init_scheme") == "decoupled"
    values["b0" if decoupled else "init_scale"] = value
    return "--b0" if decoupled else "--init-scale"


def _cli_quotient(values: dict[str, Any], value: Any) -> str:
    new = "auto" if value else "contexts"
    values["route"] = values.get("route") or new
    return f"--route {new}"


def _cli_ode(values: dict[str, Any], value: Any) -> str:
    values["dynamics"] = values.get("dynamics") or "flow"
    return "--dynamics flow"


def _cli_option(new: str, option: str) -> Move:
    """A renamed option: ``--old`` is now ``option``, whose keyword is ``new``."""

    def move(values: dict[str, Any], value: Any) -> str:
        values[new] = values.get(new) or value
        return option

    return move


OLD_SPELLINGS: tuple[OldSpelling, ...] = (
    OldSpelling("reduce", "init", "b0"),
    OldSpelling(
        "reduce",
        "quotient",
        "route",
        _rename("route", values={True: "auto", False: "contexts", None: "auto"}),
    ),
    OldSpelling("expected_dynamics", "init", "b0"),
    OldSpelling("solve", "n_points", "points"),
    OldSpelling("solve", "lr", "dynamics='gd-map', lr", _gd_map),
    OldSpelling("solve_batch", "n_points", "points"),
    OldSpelling("simulate", "init", "init_scale"),
    OldSpelling("simulate", "settings", "the keywords of its fields", _simulation_settings(None)),
    OldSpelling("initial_weights", "init", "init_scale"),
    OldSpelling("compare", "init", "init_scale"),
    OldSpelling("compare", "n_points", "points"),
    OldSpelling("compare", "theory_init", "theory_start (and b0)", _theory_init),
    OldSpelling(
        "compare", "settings", "dtype, device, threads, progress", _simulation_settings(COMPARE_RUN)
    ),
    OldSpelling("gdln derive", "--init", "--b0", _cli_option("b0", "--b0")),
    OldSpelling("gdln derive", "--quotient/--no-quotient", "--route", _cli_quotient, flag=True),
    OldSpelling("gdln solve", "--init", "--b0", _cli_option("b0", "--b0")),
    OldSpelling("gdln solve", "--ode", "--dynamics flow", _cli_ode, flag=True),
    OldSpelling("gdln simulate", "--init", "--b0 or --init-scale", _cli_simulate_init),
    OldSpelling(
        "gdln compare", "--init", "--init-scale", _cli_option("init_scale", "--init-scale")
    ),
    OldSpelling("gdln compare", "--theory-init", "--theory-start / --b0", _cli_theory_init),
    OldSpelling(
        "gdln kernel", "--mode", "--gating", _cli_option("gating", "--gating"), like="gating"
    ),
    OldSpelling(
        "gdln sd", "--mode", "--survival", _cli_option("survival", "--survival"), like="survival"
    ),
    OldSpelling(
        "gdln sd",
        "--symbolic",
        "--expression",
        _cli_option("expression", "--expression"),
        flag=True,
    ),
    OldSpelling("graph files", "solve.init", "solve.b0"),
    OldSpelling("gdln.graphfile", "Problem", "gdln.task.Problem"),
)
"""Every spelling of an earlier release that this release still reads (CHANGELOG.md,
"Deprecated"), each removed in :data:`gdln.REMOVED_IN`."""

DEPRECATED_KEYS: Mapping[str, str] = {
    row.old: row.new.split(".", 1)[1] for row in OLD_SPELLINGS if row.where == "graph files"
}
"""Graph-file keys of an earlier release, read this release with a warning: key -> setting."""


def _python_rows(function: str) -> dict[str, OldSpelling]:
    return {row.old: row for row in OLD_SPELLINGS if row.where == function}


def translate_keywords(function: str, kwargs: dict[str, Any], *, stacklevel: int) -> None:
    """Move the old keywords given to the public function ``function`` (its rows of
    :data:`OLD_SPELLINGS`) to the new ones, each with one warning naming the new spelling;
    the door of every entry point (:func:`gdln.settings._door.door`) calls it first.

    ``lr`` given to :func:`gdln.solve` without ``dynamics``
    keeps its earlier meaning (the gradient-descent map), with a warning.

    Parameters
    ----------
    function
        The public function's name.
    kwargs
        The keywords of the call, changed in place.
    stacklevel
        Of the warnings: the caller of the entry point.
    """
    for old, row in _python_rows(function).items():
        if old not in kwargs:
            continue
        if old == "lr":  # a current keyword whose old meaning was the map
            if kwargs[old] is None or kwargs.get("dynamics") is not None:
                continue
            row.moved(kwargs, kwargs[old])
            _warn_lr(function, stacklevel + 1)
            continue
        value = kwargs.pop(old)
        new = row.moved(kwargs, value)
        warnings.warn(
            f"{function}({old}=...) is now {function}({new}=...); the old keyword works until "
            f"gdln {REMOVED_IN}",
            GdlnDeprecationWarning,
            stacklevel=stacklevel,
        )


def _warn_lr(name: str, stacklevel: int) -> None:
    if name == "solve":
        message = (
            "solve(lr=...) without dynamics= no longer selects the gradient-descent map; pass "
            f"dynamics='gd-map' (lr alone keeps its earlier meaning until gdln {REMOVED_IN})"
        )
    else:
        message = (
            f"{name}(lr=...) is now {name}(dynamics='gd-map', lr=...); the old keyword works "
            f"until gdln {REMOVED_IN}"
        )
    warnings.warn(message, GdlnDeprecationWarning, stacklevel=stacklevel)


def old_options(command: str) -> tuple[OldSpelling, ...]:
    """The old options of ``gdln <command>`` (hidden options the command line adds).

    Parameters
    ----------
    command
        The command's name, e.g. ``"derive"``.

    Returns
    -------
    tuple of OldSpelling
        Its rows of :data:`OLD_SPELLINGS`.
    """
    return tuple(row for row in OLD_SPELLINGS if row.where == f"gdln {command}")


def option_name(row: OldSpelling) -> str:
    """The keyword a command's hidden old option is passed as (``old_init``).

    Parameters
    ----------
    row
        A command's row of :data:`OLD_SPELLINGS`.

    Returns
    -------
    str
        ``old_`` and the option's name, dashes as underscores.
    """
    first = row.old.split("/")[0]
    return "old_" + first.lstrip("-").replace("-", "_")


def translate_options(command: str, values: dict[str, Any]) -> None:
    """Move the values of ``gdln <command>``'s old options (passed as
    :func:`option_name`) to the new ones, each with one warning naming the new spelling.

    Parameters
    ----------
    command
        The command's name.
    values
        The command's keyword values, changed in place: the old ones are removed.
    """
    for row in old_options(command):
        value = values.pop(option_name(row), None)
        pair = "/" in row.old  # --quotient/--no-quotient: False is a value
        if value is None or (value is False and not pair):
            continue
        new = row.moved(values, value)
        warnings.warn(
            f"{row.old} is now {new}; the old spelling works until gdln {REMOVED_IN}",
            GdlnDeprecationWarning,
            stacklevel=2,
        )
