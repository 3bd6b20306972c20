"""The door of every public entry point: old spellings translated, settings resolved once.

A public function that reads settings is decorated with :func:`door`. Before its body
runs, the door

1. translates the keywords of an earlier release (its rows of
   :data:`~gdln.settings.OLD_SPELLINGS`), each with one warning, and
2. where the function takes ``resolved``, turns the keywords that name declared settings
   and the settings of its first argument (a problem's: its graph file's sections over the
   declared defaults) into one frozen :class:`~gdln.settings.Settings` value, by the one
   rule of :meth:`Settings.given <gdln.settings.Settings.given>` (the call's value, else
   the file's, else the declared default), and passes it as ``resolved``.

The body, and everything it calls, reads that one value; nothing below a door resolves a
setting again or sees an old spelling. The loose keywords are the signature a user reads
(``help``, the API reference); ``resolved`` is not part of it.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from ._declared import SettingError, Settings, declarations
from ._spellings import translate_keywords

__all__ = ["AT_THE_DOOR", "door", "settings_of"]

F = TypeVar("F", bound=Callable[..., Any])

AT_THE_DOOR = Settings()
"""The default of an entry point's ``resolved`` parameter, which its door replaces."""

RESOLVED = "resolved"
"""The parameter through which a door passes the resolved settings to its function."""


def settings_of(source: Any) -> Settings:
    """The settings a call resolves against: those of ``source`` (a problem), of the
    problem it was derived from (a reduction, the expected dynamics), else the declared
    defaults (a bare graph).

    Parameters
    ----------
    source
        The first argument of an entry point.

    Returns
    -------
    Settings
        Its problem's settings, or the declared defaults.
    """
    own = getattr(source, "settings", None)
    if isinstance(own, Settings):
        return own
    problem = getattr(source, "problem", None)
    own = getattr(problem, "settings", None)
    return own if isinstance(own, Settings) else Settings()


def door(
    function: F | None = None,
    *,
    error: type[Exception] | None = None,
    own: tuple[str, ...] = (),
) -> Any:
    """Make ``function`` a public entry point (see the module docstring).

    Parameters
    ----------
    function
        The public function. Where it takes a keyword ``resolved``, the door passes it
        the settings resolved from the call's keywords that name declared settings.
    error
        The exception a refused setting is raised as (default: the
        :class:`~gdln.settings.SettingError` itself), e.g. the simulation's
        :class:`~gdln.simulation.SimulationSpecError`.
    own
        Settings whose keyword also takes a value that is not the setting's (a list of
        seeds for ``seeds``): such a value is left to the function, not resolved.

    Returns
    -------
    callable
        The function, with the signature users read (without ``resolved``).
    """
    if function is None:
        return functools.partial(door, error=error, own=own)
    name = function.__name__
    signature = inspect.signature(function)
    resolving = RESOLVED in signature.parameters
    public = signature.replace(
        parameters=[p for p in signature.parameters.values() if p.name != RESOLVED]
    )
    names = tuple(n for n in public.parameters if n in declarations())
    first = next(iter(public.parameters))

    @functools.wraps(function)
    def entered(*args: Any, **kwargs: Any) -> Any:
        try:
            try:
                translate_keywords(name, kwargs, stacklevel=3)
            except ValueError as err:  # an old spelling whose value cannot move
                raise SettingError(str(err)) from None
            if resolving:
                if RESOLVED in kwargs:
                    raise TypeError(f"{name}() got an unexpected keyword argument {RESOLVED!r}")
                bound = public.bind(*args, **kwargs)
                given = {n: bound.arguments[n] for n in names if n in bound.arguments}
                for n in own:  # a value the function reads itself (explicit seeds)
                    if _listed(given.get(n)):
                        del given[n]
                resolved = settings_of(bound.arguments.get(first)).given(**given)
        except SettingError as err:  # the door's own refusals, never the body's
            if error is None:
                raise
            raise error(str(err)) from None
        if not resolving:
            return function(*args, **kwargs)
        called = frozenset(k for k, v in given.items() if v is not None)
        resolved = dataclasses.replace(resolved, called=called)  # this call's, no other's
        return function(*args, **kwargs, resolved=resolved)

    entered.__signature__ = public  # type: ignore[attr-defined]
    return entered


def _listed(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, str)
