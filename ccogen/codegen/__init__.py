"""Code generation: instance + target -> generated files (kernels + manifest).

`generate(instance, target, source=..., options=...)` is the entry point; each target is
one module in `codegen/backends/` with one template directory in `templates/`, named by
the target's `Target.codegen` (ccogen.targets).
"""

from __future__ import annotations

from ccogen.codegen import rtpeer
from ccogen.codegen.backends import Options, get_backend
from ccogen.codegen.files import GeneratedFiles, seal
from ccogen.codegen.plan import Unsupported
from ccogen.ir.instance import Instance


def generate(instance: Instance, target: str, *, source: str = "<protocol>",
             options: Options | None = None) -> GeneratedFiles:
    """Generate the code of one instance for one target (the instance must be clean);
    `options` None: the defaults.  The manifest is sealed (`codegen.files.seal`)."""
    rtpeer.refuse(instance, target)
    instance = rtpeer.collapse(instance)
    files = get_backend(target).generate(instance, source, options or Options())
    return GeneratedFiles(seal(files.files))  # the hashes the runtime checks (ccogen.manifest)


__all__ = ["GeneratedFiles", "Options", "Unsupported", "generate"]
