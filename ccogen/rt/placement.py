"""Where the ranks of a run go, and whether their kernels can all be resident at once.

Placement (`place`): one rank per GPU when the machine has enough GPUs.  With fewer GPUs
than ranks, `nvshmem` places the ranks round-robin on the GPUs (rank r on GPU r % G) when
CUDA MPS is running; this mode is functional only (the ranks share SMs and memory
bandwidth, so the timings mean nothing).  `nccl-lsa` refuses it (NCCL refuses two ranks
of one communicator on one GPU), and so does every target without MPS (without MPS the
processes' kernels time-slice instead of running together, and a kernel that spins on a
peer's signal holds the GPU while the peer cannot run).

MPS detection (`detect_mps`): the control daemon is asked through its client,
`echo get_default_active_thread_percentage | nvidia-cuda-mps-control` (what NVSHMEM asks
too, to decide its own multi-process-per-GPU mode); where that binary is not on PATH,
the daemon's named pipe `$CUDA_MPS_PIPE_DIRECTORY/control` (default /tmp/nvidia-mps)
decides.  A default active thread percentage below 100, or CUDA_MPS_ACTIVE_THREAD_PERCENTAGE
set for the ranks, is refused: the residency argument below needs every rank to be able
to use every free SM, and MPS documents the limit as a cap, not as disjoint SMs.

Residency (`residency_problem`, `check_residency`): generated kernels whose CTAs wait on
each other are launched cooperatively, so one launch's CTAs must all fit on the GPU at
once: grid <= SMs x the occupancy the driver reports for the kernel.  Ranks sharing a GPU
add a condition across processes: each rank's kernel spins on the others' signals, so
the kernels of every rank on the GPU must be resident together.  With R ranks on a GPU
of S SMs, each rank launching at most G CTAs plus one CTA of the engine's own, that
holds when R x (G + 1) <= S x P, where P is the CTAs of the kernel one SM holds (the
driver's occupancy when all the protocol's kernels have one footprint, else 1): a CTA
that is not resident yet then always finds an SM with room, because fewer than S x P
CTAs are resident.  The run is refused before anything launches when it does not hold,
naming the `--max-ctas` that fits.  `shared_budget` is the same rule with P = 1, for the
code generator when `ccogen run` picks the budget itself before anything is built.
"""

from __future__ import annotations

import math
import os
import shutil
import stat
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ccogen.errors import NoGpuError, NotEnoughGpusError, RunError

if TYPE_CHECKING:
    from ccogen.manifest import KernelSpec, Manifest

MPS_CONTROL = "nvidia-cuda-mps-control"
DEFAULT_PIPE_DIRECTORY = "/tmp/nvidia-mps"
ENGINE_CTAS = 1  # CTAs per rank left for the engine's own kernels (quiet / barrier on stream)


def _sharing_targets() -> list[str]:
    """The targets whose ranks may share a GPU (`EngineSpec.ranks_share_gpu`)."""
    from ccogen.targets import TARGETS

    return [t.name for t in TARGETS.values() if t.engine and t.engine.ranks_share_gpu]
CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16
CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1
CU_FUNC_ATTRIBUTE_NUM_REGS = 4

Runner = Callable[..., "subprocess.CompletedProcess[str]"]


class ResidencyError(RunError):
    """The kernels cannot all be resident at once on the GPUs they would run on."""


@dataclass(frozen=True)
class MpsStatus:
    running: bool
    detail: str  # how that was decided, or why not
    default_percentage: float | None = None  # the daemon's default active thread percentage


def detect_mps(env: Mapping[str, str] | None = None, run: Runner = subprocess.run) -> MpsStatus:
    """Whether the CUDA MPS control daemon is up for this user (module docstring)."""
    env = os.environ if env is None else env
    pipe = Path(env.get("CUDA_MPS_PIPE_DIRECTORY") or DEFAULT_PIPE_DIRECTORY) / "control"
    binary = shutil.which(MPS_CONTROL, path=env.get("PATH"))
    if binary is None:
        if _is_fifo(pipe):
            return MpsStatus(True, f"the MPS control pipe {pipe} exists ({MPS_CONTROL} is not "
                                   "on PATH to ask the daemon)")
        return MpsStatus(False, f"no MPS control pipe at {pipe} and no {MPS_CONTROL} on PATH")
    try:
        done = run([binary], input="get_default_active_thread_percentage\n",
                   capture_output=True, text=True, timeout=10, env=dict(env))
    except (OSError, subprocess.TimeoutExpired) as exc:
        return MpsStatus(False, f"`{MPS_CONTROL}` did not answer: {exc}")
    answer = (done.stdout or "").strip().splitlines()
    if done.returncode != 0 or not answer:
        said = " ".join(((done.stderr or "") + " " + (done.stdout or "")).split())
        return MpsStatus(False, f"the MPS control daemon does not answer at {pipe}"
                                f"{f' ({said})' if said else ''}")
    try:
        percentage: float | None = float(answer[-1].split()[-1])
    except ValueError:
        percentage = None
    return MpsStatus(True, f"the MPS control daemon answers at {pipe}", percentage)


def _is_fifo(path: Path) -> bool:
    try:
        return stat.S_ISFIFO(path.stat().st_mode)
    except OSError:
        return False


@dataclass(frozen=True)
class Placement:
    """Rank r runs on GPU `devices[r]`; when ranks share a GPU, `sms` is the SM count of
    the smallest of the GPUs (0 otherwise: nothing needs it before the kernels load)."""

    devices: tuple[int, ...]
    sms: int = 0
    mps: MpsStatus | None = None  # set when ranks share a GPU

    def ranks_on(self, device: int) -> int:
        return self.devices.count(device)

    @property
    def per_gpu(self) -> int:
        """The most ranks any one GPU holds."""
        return max((self.ranks_on(d) for d in set(self.devices)), default=1)

    @property
    def shared(self) -> bool:
        return self.per_gpu > 1

    def describe(self) -> str:
        """One line for the report; empty for one rank per GPU."""
        if not self.shared:
            return ""
        gpus = len(set(self.devices))
        return (f"{len(self.devices)} ranks on {gpus} GPU{'s' if gpus > 1 else ''} under MPS "
                f"(round-robin, up to {self.per_gpu} per GPU): functional only, the ranks "
                "share SMs and memory bandwidth, so the timings mean nothing")


def place(nranks: int, target: str, *, gpus: int | None = None, sms: int | None = None,
          mps: MpsStatus | None = None, env: Mapping[str, str] | None = None) -> Placement:
    """Devices for `nranks` ranks of `target` (module docstring); raises NoGpuError or
    NotEnoughGpusError with what to do.  `gpus`, `sms` and `mps` are asked of the machine
    when not given."""
    env = os.environ if env is None else env
    if gpus is None:
        gpus = device_count()
    if gpus >= nranks:
        return Placement(tuple(range(nranks)))
    needs = f"protocol needs {nranks} GPUs, this machine has {gpus}"
    sharing = _sharing_targets()
    if target not in sharing:
        raise NotEnoughGpusError(
            f"{needs}; several ranks on one GPU run only on "
            f"{', '.join(f'`{t}`' for t in sharing)} under CUDA MPS: NCCL refuses two "
            f"ranks of one communicator on one GPU, so `{target}` needs a GPU per rank")
    mps = mps if mps is not None else detect_mps(env)
    if not mps.running:
        raise NotEnoughGpusError(
            f"{needs}; several ranks on one GPU need CUDA MPS, which is not running "
            f"({mps.detail}): start it with `nvidia-cuda-mps-control -d` "
            "(docs/runtime.md, \"Several ranks on one GPU\")")
    limited = env.get("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE")
    if limited or (mps.default_percentage is not None and mps.default_percentage < 100):
        what = (f"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE={limited}" if limited else
                f"the MPS daemon's default active thread percentage {mps.default_percentage:g}")
        raise NotEnoughGpusError(
            f"{needs}, and ranks sharing a GPU must each be able to use every free SM, but "
            f"{what} caps them (MPS does not make the caps disjoint, so a rank's kernel could "
            "wait for SMs its peers' spinning kernels hold): unset it, or set it to 100")
    return Placement(tuple(r % gpus for r in range(nranks)),
                     sms if sms is not None else fewest_sms(gpus), mps)


def device_count() -> int:
    """The GPUs the CUDA driver reports; NoGpuError (with what to check) when none."""
    from ccogen.rt import native

    try:
        count = native.device_count()
    except native.GpuUnavailable as exc:
        raise NoGpuError(f"no NVIDIA GPU found: {exc}") from None
    if count == 0:
        raise NoGpuError("no NVIDIA GPU found: the CUDA driver reports 0 devices "
                         "(check nvidia-smi and CUDA_VISIBLE_DEVICES)")
    return count


def fewest_sms(gpus: int) -> int:
    """The fewest SMs of GPUs 0 .. gpus - 1 (the budget every rank's kernels fit)."""
    from ccogen.rt import native

    rt = native.load()
    return min(int(rt.device_attribute(d, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT))
               for d in range(gpus))


# ------------------------------------------------------------------------------- residency


def shared_budget(sms: int, ranks_per_gpu: int) -> int:
    """CTAs per launch that keep the kernels of `ranks_per_gpu` ranks on one GPU of `sms`
    SMs resident together whatever their occupancy (one CTA per SM assumed), leaving
    `ENGINE_CTAS` per rank to the engine; at least 1."""
    return max(1, sms // max(1, ranks_per_gpu) - ENGINE_CTAS)


def sharing_budget(ranks_per_gpu: int, sms: int) -> int | None:
    """The SM budget (`max_ctas`) for code that `ranks_per_gpu` ranks run on one GPU of
    `sms` SMs: `shared_budget`, at most the code generator's default; None (the default)
    for one rank per GPU.  What `ccogen run` and `ccogen.torch` generate for."""
    from ccogen.codegen.backends.base import DEFAULT_MAX_CTAS

    if ranks_per_gpu <= 1:
        return None
    return min(DEFAULT_MAX_CTAS, shared_budget(sms, ranks_per_gpu))


@dataclass(frozen=True)
class Footprint:
    """One kernel of a manifest as the driver sees it on one GPU."""

    name: str
    grid: int
    block: int
    shared_mem: int  # dynamic
    cooperative: bool
    occupancy: int  # CTAs per SM (cuOccupancyMaxActiveBlocksPerMultiprocessor)
    registers: int = 0  # per thread
    static_shared: int = 0

    @property
    def shape(self) -> tuple[int, int, int, int]:
        return (self.block, self.shared_mem, self.registers, self.static_shared)


def residency_problem(kernels: Sequence[Footprint], sms: int, ranks_here: int,
                      where: str = "this GPU") -> str | None:
    """Why the kernels could not all be resident at once (module docstring), or None."""
    for k in kernels:
        if k.occupancy < 1:
            return (f"kernel `{k.name}` does not fit on an SM of {where}: the driver reports no "
                    f"room for a CTA of {k.block} threads with {k.shared_mem} bytes of dynamic "
                    "shared memory")
    if ranks_here <= 1:
        for k in kernels:
            if k.cooperative and k.grid > sms * k.occupancy:
                fit = sms * k.occupancy
                return (f"kernel `{k.name}` launches {k.grid} CTAs that must be resident at once "
                        f"(a cooperative launch), but {where} holds {sms} SMs x {k.occupancy} "
                        f"= {fit} of them: regenerate with --max-ctas {fit} or less")
        return None
    uniform = len({k.shape for k in kernels}) == 1
    per_sm = min(k.occupancy for k in kernels) if uniform else 1
    grid = max(k.grid for k in kernels)
    need = ranks_here * (grid + ENGINE_CTAS)
    if need <= sms * per_sm:
        return None
    why = (f"{per_sm} CTA(s) of `{kernels[0].name}` per SM" if uniform else
           "1 CTA per SM (the kernels differ in footprint)")
    fit = sms * per_sm // ranks_here - ENGINE_CTAS
    advice = (f"regenerate with --max-ctas {fit} or less, or put fewer ranks on a GPU"
              if fit >= 1 else "put fewer ranks on a GPU")
    return (f"{ranks_here} ranks share {where}, and each rank's kernels wait on the others', so "
            f"all of them must be resident at once: {ranks_here} ranks x ({grid} CTAs + "
            f"{ENGINE_CTAS} for the engine) = {need} CTAs, but {sms} SMs x {why} hold "
            f"{sms * per_sm}: {advice}")


def footprint(kernel: KernelSpec, function: Any) -> Footprint:
    """A manifest kernel and its loaded function (`_ccogen_rt.Function`) as a Footprint."""
    threads = math.prod(kernel.block)
    return Footprint(kernel.name, math.prod(kernel.grid), threads, kernel.shared_mem,
                     kernel.cooperative,
                     int(function.max_active_blocks_per_sm(threads, kernel.shared_mem)),
                     int(function.attribute(CU_FUNC_ATTRIBUTE_NUM_REGS)),
                     int(function.attribute(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)))


def footprints(manifest: Manifest, cubin: Path, device: int) -> tuple[list[Footprint], int]:
    """The manifest's kernels as the driver sees them on `device`, and its SM count (loads
    the cubin in the device's primary context, then lets both go)."""
    from ccogen.rt import native

    rt = native.load()
    ctx = rt.Context(device)
    try:
        module = rt.Module(cubin.read_bytes())
        try:
            out = [footprint(k, module.function(k.symbol)) for k in manifest.kernels]
        finally:
            module.unload()
        sms = int(rt.device_attribute(device, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT))
    finally:
        ctx.release()
    return out, sms


def check_residency(manifest: Manifest, cubin: Path, placement: Placement) -> None:
    """Raise ResidencyError when the kernels could not all be resident on some GPU of the
    placement (asks the driver for the occupancy of each kernel)."""
    for device in sorted(set(placement.devices)):
        kernels, sms = footprints(manifest, cubin, device)
        problem = residency_problem(kernels, sms, placement.ranks_on(device), f"GPU {device}")
        if problem is not None:
            raise ResidencyError(problem)


__all__ = ["ENGINE_CTAS", "Footprint", "MpsStatus", "Placement", "ResidencyError",
           "check_residency", "detect_mps", "device_count", "fewest_sms", "footprint",
           "footprints", "place", "residency_problem", "shared_budget", "sharing_budget"]
