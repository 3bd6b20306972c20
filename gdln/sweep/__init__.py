"""Parameter sweeps on local cores or a Dask cluster, appended to one resumable table."""

from .._lazy import attach_stub

__getattr__, __dir__, __all__ = attach_stub(__name__, __file__)
