"""The ground floor: what every stage may use to stay within bounds and exact.

Below every stage of the pipeline (layer 0): exact numbers and the bounded evaluation of
expressions (``_expressions``: no text reaches ``eval`` or ``sympify``), the limits on
counts, work and memory with their meters (``_limits``: :class:`gdln.graphfile.Limits`,
``check_work``, ``check_memory``, ``WorkMeter``), and the bounded readers of files
(``_read``: regular files within a size, UTF-8 text, JSON; ``_npz``: ``.npz`` data, every
array bounded before it is read). The graph-file reader (:mod:`gdln.graphfile`) uses them
as every other stage does; its public names (``Limits``, ``evaluate``,
``ExpressionError``) are re-exported there.
"""
