"""``python -m lazykern``: the ``lazykern`` command."""

from .tools.cli import main

main()
