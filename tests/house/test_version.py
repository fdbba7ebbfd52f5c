"""The version is written once, in `ccogen/_version.py`: the package, the command line,
the generated files' banners and the wheel's metadata (pyproject.toml) all read it there."""

from __future__ import annotations

import ast
import re
import tomllib

import ccogen
from ccogen import _version
from tests.helpers import REPO_ROOT

# scikit-build-core's regex provider reads `__version__ = "X"` with this default pattern
_PATTERN = re.compile(r"""(?m)^__version__ *= *(['"])v?(?P<value>.+?)\1""")


def test_the_package_version_is_the_version_module() -> None:
    assert ccogen.__version__ is _version.__version__
    assert re.fullmatch(r"\d+\.\d+\.\d+", ccogen.__version__)


def test_pyproject_reads_the_version_from_the_version_module() -> None:
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in pyproject["project"]
    assert "version" in pyproject["project"]["dynamic"]
    source = pyproject["tool"]["scikit-build"]["metadata"]["version"]
    assert source["provider"] == "scikit_build_core.metadata.regex"
    found = _PATTERN.search((REPO_ROOT / source["input"]).read_text(encoding="utf-8"))
    assert found is not None and found.group("value") == ccogen.__version__


def test_no_other_module_assigns_a_version() -> None:
    package = REPO_ROOT / "ccogen"
    writers = []
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        writers += [str(path.relative_to(REPO_ROOT)) for node in ast.walk(tree)
                    if isinstance(node, ast.Assign)
                    for t in node.targets if isinstance(t, ast.Name) and t.id == "__version__"]
    assert writers == ["ccogen/_version.py"]
