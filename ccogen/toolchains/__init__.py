"""Toolchains for `ccogen build`: find them (`locate`), build generated code (`build`).

Nothing here needs a GPU.  scripts/install-toolchains.sh installs what the seed targets
use (clang-22 + MORI headers, the CUDA 13.5 compiler wheels).
"""

from __future__ import annotations

from ccogen.toolchains.build import BuildResult, build_dir

__all__ = ["BuildResult", "build_dir"]
