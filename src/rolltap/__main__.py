"""``python -m rolltap`` is the ``rolltap`` command."""

from rolltap.cli.main import main

main()
