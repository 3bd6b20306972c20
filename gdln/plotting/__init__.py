"""Pictures of every result gdln writes: ``gdln plot RESULT -o FIG.png|svg|pdf``.

:func:`plot_result` reads what ``gdln solve``, ``simulate``, ``timescales``, a sweep
(:func:`gdln.run_sweep`) and ``gdln kernel`` write, and draws it; :func:`save_plot` writes
the figure, its format chosen by the file's suffix. The panels come from the results' own
``plot`` methods (:meth:`gdln.Trajectory.plot`, :meth:`gdln.Timescales.plot`), which
return matplotlib ``Axes`` as pandas and xarray do.
"""

from .._lazy import attach_stub

__getattr__, __dir__, __all__ = attach_stub(__name__, __file__)
