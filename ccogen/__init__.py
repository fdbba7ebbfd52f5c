"""ccogen: a compiler for GPU communication protocols."""

__version__ = "0.1.0"
