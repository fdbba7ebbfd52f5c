"""Backends by target name, imported lazily."""

from __future__ import annotations

import importlib

from ccogen.codegen.backends.base import Backend, Options

BACKENDS: dict[str, str] = {
    "nccl-lsa": "ccogen.codegen.backends.nccl_lsa:NcclLsa",
    "nvshmem": "ccogen.codegen.backends.nvshmem:Nvshmem",
    "mori-sdma": "ccogen.codegen.backends.mori_sdma:MoriSdma",
    "nccl-cft": "ccogen.codegen.backends.nccl_cft:NcclCft",
}


def get_backend(name: str) -> Backend:
    module, _, cls = BACKENDS[name].partition(":")
    return getattr(importlib.import_module(module), cls)()  # type: ignore[no-any-return]


__all__ = ["BACKENDS", "Backend", "Options", "get_backend"]
