"""Sharing the engine's 128-byte unique id from rank 0 with the other ranks.

- Launched by ccogen (one spawned process per GPU): a fresh temporary directory made by the
  launcher; rank 0 writes `uid.bin` atomically, the others poll for it.
- Under torchrun / mpirun (`RANK`, `WORLD_SIZE`, `LOCAL_RANK` set): `torch.distributed`
  when it is initialized (broadcast_object_list), else a directory shared by all ranks:
  `$CCOGEN_RENDEZVOUS_DIR` (must be on a shared filesystem for several nodes), default
  `/tmp/ccogen-rendezvous`, with a file name keyed by the job id
  (`$CCOGEN_RUN_ID`, `$TORCHELASTIC_RUN_ID`, `$SLURM_JOB_ID`, or MASTER_ADDR:MASTER_PORT).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from ccogen.rt.errors import EngineError


@dataclass(frozen=True)
class FileRendezvous:
    directory: Path
    name: str = "uid"

    @property
    def path(self) -> Path:
        return self.directory / f"{self.name}.bin"

    def publish(self, data: bytes) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        tmp = self.directory / f".{self.name}.{os.getpid()}.tmp"
        tmp.write_bytes(data)
        os.replace(tmp, self.path)

    def fetch(self, size: int, timeout_s: float) -> bytes:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                data = self.path.read_bytes()
                if len(data) == size:
                    return data
            except FileNotFoundError:
                pass
            if time.monotonic() > deadline:
                raise EngineError(f"no unique id from rank 0 in {self.path} after "
                                  f"{timeout_s:.0f} s (did rank 0 start?)")
            time.sleep(0.02)


class TorchRendezvous:
    """torch.distributed.broadcast_object_list from rank 0 (already initialized)."""

    def __init__(self, rank: int) -> None:
        self.rank = rank
        self._data: bytes | None = None

    def publish(self, data: bytes) -> None:
        self._broadcast(data)

    def fetch(self, size: int, timeout_s: float) -> bytes:
        data = self._broadcast(None)
        if len(data) != size:
            raise EngineError("torch.distributed delivered a unique id of the wrong size")
        return data

    @staticmethod
    def _broadcast(data: bytes | None) -> bytes:
        import torch.distributed as dist

        box = [data]
        dist.broadcast_object_list(box, src=0)
        assert isinstance(box[0], bytes)
        return box[0]


def job_id() -> str:
    for var in ("CCOGEN_RUN_ID", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID"):
        value = os.environ.get(var, "").strip()
        if value and value != "none":
            return value
    addr = os.environ.get("MASTER_ADDR", "local")
    port = os.environ.get("MASTER_PORT", "0")
    return f"{addr}-{port}"


def from_environment(rank: int, tag: str) -> FileRendezvous | TorchRendezvous:
    """The rendezvous for a rank started by torchrun / mpirun."""
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return TorchRendezvous(rank)
    except ImportError:
        pass
    base = Path(os.environ.get("CCOGEN_RENDEZVOUS_DIR", "/tmp/ccogen-rendezvous"))
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in f"{job_id()}-{tag}")
    return FileRendezvous(base, safe)


__all__ = ["FileRendezvous", "TorchRendezvous", "from_environment", "job_id"]
