"""rolltap's version, importable by its parts without loading the package's facade
(``rolltap/__init__.py`` names the parts above them)."""

__version__ = "0.1.0"
