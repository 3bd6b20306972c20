"""``python -m gdln``: the same as the ``gdln`` command."""

from .cli import main

main()
