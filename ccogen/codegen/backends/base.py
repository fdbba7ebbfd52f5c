"""The backend interface: lower an instance to a view-model, render its templates."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

from ccogen.codegen.files import GeneratedFiles
from ccogen.codegen.plan import Unsupported
from ccogen.codegen.text import comment
from ccogen.codegen.text import name as checked_name
from ccogen.ir.instance import Instance
from ccogen.ir.nodes import LaunchOrder
from ccogen.source import Span

# The SM budget by default: CTAs per launch of one kernel.  NCCL's default channel count on
# NVLink; a quarter of an H200's 132 SMs, so the rest stays free for the compute that
# communication overlaps with (and for the other ranks of a shared GPU).  Measured: 32
# CTAs store into an NVLink peer at 90-92 % of the copy engine, 128 at 93.4-95.8 %
# (docs/performance.md); `--max-ctas 128` buys those points back where the GPU is ours alone.
DEFAULT_MAX_CTAS = 32


@dataclass(frozen=True)
class Options:
    """Frozen code-generation options; `hash` keys the runtime's build cache.

    `epoch_from_heap` (nccl-lsa, nvshmem): each kernel takes its epoch from a launch
    counter in the heap instead of its `epoch` parameter (thread 0 of every CTA adds 1;
    the epoch is that ticket / gridDim.x, launches on one stream being ordered), so a
    CUDA graph that captured the launches once can replay them epoch after epoch
    (`ccogen bench`).  The kernel signature and the manifest's `params` are unchanged;
    the runtime must launch every kernel exactly once per epoch, as it does.

    `max_ctas` (every target): the SM budget, the most CTAs (workgroups) one launch of a
    kernel may have.  The SM targets split large copies over fewer CTAs to stay within
    it; a kernel with more logical blocks than the budget is refused (each logical block
    needs a CTA of its own).  Recorded in the manifest.
    """

    debug: bool = False
    arch: str = "sm_90"
    epoch_from_heap: bool = False
    max_ctas: int = DEFAULT_MAX_CTAS  # the SM budget: at most this many CTAs per launch

    def __post_init__(self) -> None:
        if not isinstance(self.max_ctas, int) or isinstance(self.max_ctas, bool) \
                or self.max_ctas < 1:
            raise ValueError(f"max_ctas must be a positive integer, not {self.max_ctas!r}")

    def as_dict(self) -> dict[str, Any]:
        """The options as data; an option left at its default is omitted when that keeps
        the hash of code generated before the option existed."""
        out = asdict(self)
        if not out["epoch_from_heap"]:
            del out["epoch_from_heap"]
        return out


def shown_source(instance: Instance, source: str) -> str:
    """The source path as every generated file prints it (`codegen.text.comment`: control
    characters, backslashes, `*/` escaped), after refusing a declared name that is not an
    ASCII identifier (`codegen.text.name`).  Each backend's model starts here, so no raw
    path or name reaches a template, a comment step or the manifest."""
    p = instance.protocol
    checked_name(p.name, "protocol")
    for what, items in (("window", p.windows), ("counter", p.counters),
                        ("buffer", p.buffers), ("kernel", p.kernels)):
        for item in items:
            checked_name(item.name, what)
    return comment(source)


def manifest_head(target: str, instance: Instance, source: str, arch: object,
                  debug: bool, heap_size: int, max_ctas: int) -> dict[str, object]:
    """The fields of manifest.json every target writes first (docs/runtime-abi.md);
    `between_launches` is `host_sync` where the protocol needs a host barrier between
    launches, `free` where the checker proved it safe back to back."""
    head: dict[str, object] = {
        "abi": 1,
        "target": target,
        "protocol": instance.protocol.name,
        "source": source,
        "nranks": instance.nranks,
        "params": dict(instance.params),
        "queues": instance.queues,
        "arch": arch,
        "debug": debug,
        "heap_size": heap_size,
        "max_ctas": max_ctas,
    }
    # `free`: the checker proved two launches back to back (`ccogen compile` refuses a
    # protocol it rejects), so the runtime and ccogen.torch put nothing between launches;
    # a manifest without the field is `host_sync` (those written before the rule)
    head["between_launches"] = (LaunchOrder.HOST_SYNC.value if instance.protocol.between_launches
                                is LaunchOrder.HOST_SYNC else "free")
    if instance.runtime:  # the kernels read run-time values: inputs must satisfy `require`
        head["runtime_values"] = True
    return head


def buffers_manifest(instance: Instance) -> list[dict[str, object]]:
    """The `buffers` list of manifest.json: each local buffer's dtype, shape and what the
    kernels do with it (`read`, `write` or `readwrite`; docs/runtime-abi.md)."""
    read: set[str] = set()
    written: set[str] = set()
    for ops in instance.ranks:
        for op in ops:
            if op.dst is not None:
                written.add(op.dst.window)
            read.update(r.window for r in (op.src, *op.srcs) if r is not None)
    out: list[dict[str, object]] = []
    for name, size in instance.buffer_sizes:
        dtype = instance.dtype(name)
        access = ("readwrite" if name in read and name in written
                  else "write" if name in written else "read")
        out.append({"name": name, "dtype": dtype.value, "shape": [size // dtype.size],
                    "access": access})
    return out


def refuse_buffers(instance: Instance, target: str) -> None:
    """Targets whose kernels take no `buffer:NAME` parameters refuse a local buffer."""
    buffer = next(iter(instance.protocol.buffers), None)
    if buffer is not None:
        raise Unsupported(f"local buffers (`buffer {buffer.name}`) are not generated on "
                          f"`{target}` yet: declare it a `window` (the caller copies its "
                          "tensor in), or generate for `nccl-lsa` or `nvshmem`", buffer.span)


def check_budget(blocks: int, max_ctas: int, kernel: str, span: Span | None) -> None:
    """A kernel needs one CTA per logical block: refuse one the budget cannot hold."""
    if blocks > max_ctas:
        raise Unsupported(f"kernel `{kernel}` has {blocks} logical blocks, each on a CTA of its "
                          f"own, over the SM budget of {max_ctas} CTAs per launch (raise "
                          "--max-ctas, or use fewer blocks)", span)


class Backend(ABC):
    name: ClassVar[str]
    language: ClassVar[str]  # "cuda" or "hip"
    # generates from an instance whose uniform loops were sampled (codegen.loops); else
    # the compiler hands it the unrolled instance
    folds_loops: ClassVar[bool] = False

    @abstractmethod
    def generate(self, instance: Instance, source: str, options: Options) -> GeneratedFiles:
        """kernels.<ext> + manifest.json for one instance."""
