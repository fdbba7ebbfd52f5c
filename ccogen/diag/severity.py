"""How bad a finding is (a leaf of `ccogen.diag`: the registry and the model both use it)."""

from __future__ import annotations

from enum import Enum


class Severity(str, Enum):
    ERROR = "error"
    WARNING = "warning"
    NOTE = "note"  # said, never failing (a warning under `ccogen lint --strict`)
