"""gdln: the path-based theory of gated networks.

A Gated Deep Linear Network (GDLN) is an architecture graph whose nodes and edges carry
gates (Saxe, Sodhani & Lewallen 2022). gdln reads such graphs and their tasks from files,
enumerates paths, derives the path statistics and the exact reduced learning dynamics
symbolically, solves them numerically, and checks them against simulations.

The subpackages follow the data flow:

- :mod:`gdln.graphfile`: graph file -> :class:`Problem` (a networkx graph and a
  :class:`Task`, both from :mod:`gdln.task`), :func:`load`;
- :mod:`gdln.paths`: paths (:func:`enumerate_paths`) and path statistics
  (:func:`path_statistics`, Eqs. 3-6);
- :mod:`gdln.reduction`: bases, per-mode losses, reduced and lumped ODEs
  (:func:`reduce`, Eq. 10), and the path-free moment route (:func:`expected_dynamics`);
- :mod:`gdln.report`: text, LaTeX and JSON printouts;
- :mod:`gdln.solution`: the ODE and the exact gradient-descent map (:func:`solve`);
- :mod:`gdln.simulation`: the full network in torch (:func:`simulate`);
- :mod:`gdln.comparison`: theory against simulation (:func:`compare`);
- :mod:`gdln.sweep`: parameter sweeps (:func:`run_sweep`);
- :mod:`gdln.balanced`: exact dynamics from λ-balanced starts (:func:`solve_balanced`)
  and the tangent kernel along a trajectory (:func:`balanced_kernels`,
  :func:`decoupled_kernels`).
- :mod:`gdln.outputs`: every file and folder gdln writes, whole or not at all.

The other seed papers' path views have their own subpackages: :mod:`gdln.kernels`
(deep gated networks, neural path kernels, the NTK, the path formula for the Gram
matrix) and :mod:`gdln.sd` (stochastic depth).

Every name is imported on first use (SPEC 1), so ``import gdln`` loads none of sympy,
networkx, scipy or torch; the public names are listed in ``__init__.pyi``.
"""

from typing import Any

from ._lazy import attach_stub

_getattr, __dir__, __all__ = attach_stub(__name__, __file__)


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("gdln")
        except PackageNotFoundError:  # pragma: no cover - running from a source tree
            return "0.0.0"
    return _getattr(name)
