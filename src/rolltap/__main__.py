"""``python -m rolltap``: the same as the ``rolltap`` console script."""

from rolltap.cli.main import main

if __name__ == "__main__":
    main()
