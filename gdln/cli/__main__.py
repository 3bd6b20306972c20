"""``python -m gdln.cli``: the same as the ``gdln`` command."""

from . import main

main()
