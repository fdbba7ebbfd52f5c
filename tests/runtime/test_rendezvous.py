"""The torchrun / mpirun rendezvous never trusts a directory another user could have made
(issue #29 item 5): each attack on the old `/tmp/ccogen-rendezvous` is reproduced here and
shown refused or harmless.

"Another user" is simulated by `os.chown` to uid 65534 (nobody) when the tests run as
root, by the mode bits and by symbolic links otherwise."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

import pytest

from ccogen.errors import EngineError, RunError
from ccogen.rt import rendezvous, session
from ccogen.rt.rendezvous import (
    FileRendezvous,
    UnsafeDirectory,
    base_dir,
    job_dirs,
    private_dir,
    read_private,
    write_private,
)

NOBODY = 65534
as_root = pytest.mark.skipif(os.getuid() != 0, reason="chown to another user needs root")


@pytest.fixture
def tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A scratch temporary directory standing for /tmp, and a fixed job id."""
    root = tmp_path / "tmp"
    root.mkdir()
    os.chmod(root, 0o1777)  # like /tmp: anyone can create entries
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    monkeypatch.delenv("CCOGEN_RENDEZVOUS_DIR", raising=False)
    for var in ("TORCHELASTIC_RUN_ID", "SLURM_JOB_ID"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("CCOGEN_RUN_ID", "job7")
    return root


def test_default_directory_is_per_user_and_private(tmp: Path) -> None:
    base = base_dir()
    assert base == tmp / f"ccogen-{os.getuid()}"
    st = os.lstat(base)
    assert stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid()
    assert stat.S_IMODE(st.st_mode) & 0o077 == 0
    rdv, data = job_dirs("ring")
    assert (rdv, data) == (base / "job7-ring", base / "job7-ring-data")
    assert all(stat.S_IMODE(os.lstat(p).st_mode) & 0o077 == 0 for p in (rdv, data))
    assert job_dirs("ring") == (rdv, data)  # the second rank finds the same, accepted


@as_root
def test_a_base_directory_made_by_another_user_is_refused(tmp: Path) -> None:
    planted = tmp / f"ccogen-{os.getuid()}"
    planted.mkdir(mode=0o700)
    os.chown(planted, NOBODY, NOBODY)
    with pytest.raises(UnsafeDirectory, match=r"owned by uid 65534, not by you"):
        base_dir()


@as_root
def test_a_job_directory_made_by_another_user_is_refused(tmp: Path) -> None:
    base = base_dir()
    planted = base / "job7-ring"
    planted.mkdir(mode=0o755)
    os.chown(planted, NOBODY, NOBODY)
    with pytest.raises(UnsafeDirectory, match="job7-ring: it is owned by uid 65534"):
        job_dirs("ring")
    with pytest.raises(UnsafeDirectory):
        rendezvous.from_environment(1, "ring")


def test_a_writable_directory_is_refused(tmp: Path) -> None:
    planted = tmp / f"ccogen-{os.getuid()}"
    planted.mkdir()
    os.chmod(planted, 0o777)
    with pytest.raises(UnsafeDirectory, match=r"group or others can write it \(mode 0777\)"):
        base_dir()
    os.chmod(planted, 0o770)
    with pytest.raises(UnsafeDirectory, match="mode 0770"):
        base_dir()


def test_a_symbolic_link_in_place_of_the_directory_is_refused(tmp: Path) -> None:
    theirs = tmp / "theirs"
    theirs.mkdir(mode=0o700)
    (tmp / f"ccogen-{os.getuid()}").symlink_to(theirs)
    with pytest.raises(UnsafeDirectory, match="it is a symbolic link"):
        base_dir()
    base = (tmp / "mine")
    base.mkdir(mode=0o700)
    (base / "job7-ring-data").symlink_to(theirs)
    with pytest.raises(UnsafeDirectory, match="job7-ring-data: it is a symbolic link"):
        private_dir(base / "job7-ring-data")


def test_a_file_in_place_of_the_directory_is_refused(tmp: Path) -> None:
    (tmp / f"ccogen-{os.getuid()}").write_text("x")
    with pytest.raises(UnsafeDirectory, match="it is not a directory"):
        base_dir()


def test_the_message_says_what_to_do_and_is_a_run_error(tmp: Path) -> None:
    (tmp / f"ccogen-{os.getuid()}").mkdir(mode=0o777)
    os.chmod(tmp / f"ccogen-{os.getuid()}", 0o777)
    with pytest.raises(RunError) as info:  # `ccogen run` prints it as one `error:` line
        base_dir()
    assert "CCOGEN_RENDEZVOUS_DIR" in str(info.value) and "hijack" in str(info.value)


def test_a_chosen_directory_gets_the_same_checks(tmp: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CCOGEN_RENDEZVOUS_DIR", str(tmp))  # /tmp itself: others write it
    with pytest.raises(UnsafeDirectory, match="mode 1777"):
        base_dir()
    monkeypatch.setenv("CCOGEN_RENDEZVOUS_DIR", str(tmp / "shared" / "ccogen"))
    assert base_dir() == tmp / "shared" / "ccogen"


def test_files_are_never_written_through_a_planted_link(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    link = tmp_path / "final-0-1-w.bin"
    link.symlink_to(victim)
    write_private(link, b"data")
    assert victim.read_text() == "precious"
    assert not link.is_symlink() and link.read_bytes() == b"data"
    assert stat.S_IMODE(os.stat(link).st_mode) == 0o600


def test_a_planted_temporary_link_is_not_followed(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    path = tmp_path / "uid.bin"
    (tmp_path / f".uid.bin.{os.getpid()}.tmp").symlink_to(victim)
    write_private(path, b"u" * 4)
    assert victim.read_text() == "precious" and path.read_bytes() == b"u" * 4


def test_a_swapped_final_window_link_is_not_read(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs.bin"
    theirs.write_bytes(b"\0" * 8)
    (tmp_path / "final-0-1-w.bin").symlink_to(theirs)
    with pytest.raises(OSError):
        read_private(tmp_path / "final-0-1-w.bin")


def test_a_linked_unique_id_is_refused(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs.bin"
    theirs.write_bytes(b"x" * 128)
    (tmp_path / "uid.bin").symlink_to(theirs)
    with pytest.raises(EngineError, match="cannot read the unique id"):
        FileRendezvous(tmp_path).fetch(128, timeout_s=1)


def test_stack_and_phase_files_do_not_truncate_through_links(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    session.stack_file(tmp_path, 1).symlink_to(victim)
    session.phase_file(tmp_path, 1).symlink_to(victim)
    with pytest.raises(OSError):  # O_NOFOLLOW: ELOOP, nothing truncated
        session.dump_stack_on_signal(str(tmp_path), 1)
    rank = session.RankSession.__new__(session.RankSession)
    rank.shared_dir, rank.rank = str(tmp_path), 1
    rank.phase("epoch 3: kernels")
    assert victim.read_text() == "precious"
    assert session.phase_file(tmp_path, 1).read_text() == "epoch 3: kernels"


def test_the_round_trip_still_works(tmp_path: Path) -> None:
    box = FileRendezvous(private_dir(tmp_path / "r"))
    box.publish(b"k" * 128)
    assert box.fetch(128, timeout_s=1) == b"k" * 128
