"""``python -m lazykern``: the ``lazykern`` command."""

from .cli import main

main()
