"""The only place C identifiers are derived from protocol names."""

from __future__ import annotations

import re


def c_identifier(*parts: str) -> str:
    """`ccogen_alltoall_exchange`: lowercase, non-identifier characters as `_`."""
    text = "_".join(("ccogen", *parts))
    return re.sub(r"[^A-Za-z0-9_]", "_", text)
