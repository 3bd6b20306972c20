"""The solution's errors: a lookup that names no one series."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._errors import GdlnError, shorten, shorten_text

__all__ = ["AmbiguousVariableError"]


class AmbiguousVariableError(GdlnError, KeyError):
    """A reduced variable is recorded in several systems and no ``system`` was given.

    :meth:`gdln.Trajectory.variable` never picks one: the message names the systems and
    their modes. A :class:`KeyError`, as a missing variable is.
    """

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""

    @classmethod
    def between(cls, name: str, systems: Sequence[int], modes: Any) -> AmbiguousVariableError:
        """The error for ``name``, recorded in each of ``systems``.

        Parameters
        ----------
        name
            The variable's name.
        systems
            The systems that record it.
        modes
            ``meta["modes"]`` of the trajectory (one list per system), to name each
            system's modes; anything else names none.

        Returns
        -------
        AmbiguousVariableError
            The error, its one-line message naming the systems and their modes.
        """
        listed = (
            modes if isinstance(modes, list) and all(isinstance(m, list) for m in modes) else []
        )
        which = "; ".join(
            f"system {k}" + (f" (modes {shorten(listed[k])})" if k < len(listed) else "")
            for k in systems
        )
        return cls(
            f"variable {shorten(name)} is recorded in several systems ({shorten_text(which, 200)}): "
            "pass system="
        )
