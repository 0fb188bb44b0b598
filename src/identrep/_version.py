"""The package version (one place; the package, records and model files read it)."""

__version__ = "0.1.0"
