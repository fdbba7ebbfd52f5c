"""The code generator of a target: the class its `Target.codegen` names, imported lazily."""

from __future__ import annotations

from ccogen.codegen.backends.base import Backend, Options
from ccogen.targets import get_target
from ccogen.targets.target import resolve


def get_backend(name: str) -> Backend:
    """A fresh code generator for target `name` (`UnknownTarget` for an unknown name)."""
    reference = get_target(name).codegen
    backend = resolve(reference)()
    assert isinstance(backend, Backend), f"{name}: {reference} is not a Backend"
    return backend


__all__ = ["Backend", "Options", "get_backend"]
