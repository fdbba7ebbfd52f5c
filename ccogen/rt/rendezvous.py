"""Sharing the engine's 128-byte unique id from rank 0 with the other ranks.

- Launched by ccogen (one spawned process per GPU): a fresh temporary directory made by the
  launcher; rank 0 writes `uid.bin` atomically, the others poll for it.
- Under torchrun / mpirun (`RANK`, `WORLD_SIZE`, `LOCAL_RANK` set): `torch.distributed`
  when it is initialized (broadcast_object_list), else a private directory of the user
  shared by the job's ranks: `$CCOGEN_RENDEZVOUS_DIR` (must be on a shared filesystem
  for several nodes), default `ccogen-<uid>` in the temporary directory (`$TMPDIR`,
  else `/tmp`), holding `<job>-<protocol>/` (the unique id) and `<job>-<protocol>-data/`
  (the final windows the `ensure` checks exchange, each rank's phase and stack files),
  with the job id from `$CCOGEN_RUN_ID`, `$TORCHELASTIC_RUN_ID`, `$SLURM_JOB_ID`, or
  MASTER_ADDR:MASTER_PORT.

Other users of the machine can write /tmp, so nothing there is trusted (docs/reliability.md,
"Security model"): a directory is used only if it is a real directory (not a symbolic
link) owned by this user that neither group nor others can write (`private_dir`; one ccogen
creates is mode 0700), else the run stops with `UnsafeDirectory` naming the problem.  Files
are created there with O_EXCL | O_NOFOLLOW (mode 0600) and renamed into place, and read
with O_NOFOLLOW, so no planted link is written or read through.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ccogen.errors import EngineError, RunError

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


class UnsafeDirectory(RunError):
    """A rendezvous directory that another user could have made or can write."""


def private_dir(path: str | Path) -> Path:
    """`path` as a directory only this user can write: created (mode 0700, missing parents
    too) if absent, else checked with lstat; UnsafeDirectory if it is a symbolic link, not
    a directory, owned by another user, or writable by group or others."""
    path = Path(path)
    with contextlib.suppress(FileExistsError):
        if not path.parent.is_dir():
            path.parent.mkdir(parents=True, exist_ok=True)
        os.mkdir(path, 0o700)
    try:
        st = os.lstat(path)
    except OSError as exc:
        raise UnsafeDirectory(f"cannot use {path} for the rendezvous: "
                              f"{exc.strerror or exc}") from None
    problem = _problem(st)
    if problem:
        raise UnsafeDirectory(
            f"refusing the rendezvous directory {path}: {problem}; another user may have "
            "made it to hijack the job (remove it if it is yours, or set "
            "CCOGEN_RENDEZVOUS_DIR to a directory only you can write)")
    return path


def _problem(st: os.stat_result) -> str:
    if stat.S_ISLNK(st.st_mode):
        return "it is a symbolic link"
    if not stat.S_ISDIR(st.st_mode):
        return "it is not a directory"
    if st.st_uid != os.getuid():
        return f"it is owned by uid {st.st_uid}, not by you (uid {os.getuid()})"
    if st.st_mode & 0o022:
        return f"group or others can write it (mode {stat.S_IMODE(st.st_mode):04o})"
    return ""


def write_private(path: Path, data: bytes) -> None:
    """Write `path` atomically without following links: a new temporary file beside it
    (O_CREAT | O_EXCL | O_NOFOLLOW, mode 0600), renamed over it (a link there is replaced,
    never written through)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def read_private(path: Path) -> bytes:
    """The bytes of `path`, refusing a symbolic link (OSError ELOOP) or a file that is not
    regular."""
    fd = os.open(path, os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise OSError(f"{path} is not a regular file")
        return handle.read()


def open_private(path: Path) -> int:
    """A file descriptor for writing `path` from its start, never through a link (mode 0600
    when created)."""
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _NOFOLLOW, 0o600)


@dataclass(frozen=True)
class FileRendezvous:
    directory: Path
    name: str = "uid"

    @property
    def path(self) -> Path:
        return self.directory / f"{self.name}.bin"

    def publish(self, data: bytes) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        write_private(self.path, data)

    def fetch(self, size: int, timeout_s: float) -> bytes:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                data = read_private(self.path)
                if len(data) == size:
                    return data
            except FileNotFoundError:
                pass
            except OSError as exc:
                raise EngineError(f"cannot read the unique id {self.path}: {exc}") from None
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


def base_dir() -> Path:
    """The user's private directory for rendezvous under torchrun / mpirun (checked)."""
    chosen = os.environ.get("CCOGEN_RENDEZVOUS_DIR", "").strip()
    if chosen:
        return private_dir(chosen)
    return private_dir(Path(tempfile.gettempdir()) / f"ccogen-{os.getuid()}")


def job_dirs(tag: str) -> tuple[Path, Path]:
    """The job's rendezvous directory and its data directory (final windows, phase and
    stack files), both private (`private_dir`)."""
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in f"{job_id()}-{tag}")
    base = base_dir()
    return private_dir(base / safe), private_dir(base / f"{safe}-data")


def from_environment(rank: int, tag: str) -> FileRendezvous | TorchRendezvous:
    """The rendezvous for a rank started by torchrun / mpirun."""
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return TorchRendezvous(rank)
    except ImportError:
        pass
    return FileRendezvous(job_dirs(tag)[0])


__all__ = ["FileRendezvous", "TorchRendezvous", "UnsafeDirectory", "base_dir",
           "from_environment", "job_dirs", "job_id", "open_private", "private_dir",
           "read_private", "write_private"]
