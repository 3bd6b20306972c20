"""Every setting of gdln declared once, and the named choices they take.

:class:`Settings` holds one resolved value per setting; its fields are the declarations
(name, type, default, meaning, graph-file key, command-line option). Graph files preset
them in ``solve:`` and ``simulate:``, the command line and the Python API override them by
name, and every public function reads the same resolved value.
"""

from .._lazy import attach_stub

__getattr__, __dir__, __all__ = attach_stub(__name__, __file__)
