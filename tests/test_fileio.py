"""Reading sources and writing outputs (`ccogen.fileio`) and the commands that use it:
nothing lost, nothing written where it should not be, one line and exit 2 for misuse."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from ccogen import cli
from ccogen.errors import DiagnosticError
from ccogen.fileio import FileError, decode_source, read_source, write_atomic, write_generated

ROOT = Path(__file__).resolve().parent.parent
GOOD = ROOT / "protocols" / "alltoall.cco"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def proto(tmp_path: Path) -> Path:
    path = tmp_path / "p.cco"
    path.write_bytes(GOOD.read_bytes())
    return path


def one_error_line(err: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err and "internal error" not in err


# ----------------------------------------------------------------------------- reading


def test_latin1_byte_is_e001_at_its_line_and_column() -> None:
    with pytest.raises(DiagnosticError) as caught:
        decode_source(b"protocol p():\n    team lsa  # caf\xe9\n", "x.cco")
    d = caught.value.diagnostics[0]
    assert d.code == "E001" and "0xe9" in d.message
    assert d.span is not None and (d.span.line, d.span.column) == (2, 20)


def test_bom_is_dropped() -> None:
    assert decode_source(b"\xef\xbb\xbfprotocol", "x.cco") == "protocol"


@pytest.mark.parametrize("command", ["lint", "simulate", "fmt", "compile"])
def test_every_command_reports_a_non_utf8_source(capsys: pytest.CaptureFixture[str],
                                                 proto: Path, command: str) -> None:
    proto.write_bytes(GOOD.read_bytes().replace(b"# Every", b"# caf\xe9 Every"))
    extra = ["--target", "mori-sdma", "-o", str(proto.parent / "out")] if command == "compile" \
        else []
    code, out, err = run(capsys, command, str(proto), *extra)
    assert code == 1
    assert "error[E001]: the file is not UTF-8" in out + err
    assert "Traceback" not in out + err


def test_fifo_dev_zero_and_directories_are_refused(capsys: pytest.CaptureFixture[str],
                                                   tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path, why in ((fifo, "not a regular file"), (Path("/dev/zero"), "not a regular file"),
                      (tmp_path, "it is a directory")):
        code, _, err = run(capsys, "lint", str(path))
        assert code == 2 and why in err
        one_error_line(err)


def test_size_is_capped(tmp_path: Path) -> None:
    big = tmp_path / "big.cco"
    big.write_bytes(b"#" * 2048)
    with pytest.raises(FileError, match="larger than the limit of 1,024 bytes"):
        read_source(big, limit=1024)


def test_api_load_reads_safely_and_simulate_accepts_it(tmp_path: Path) -> None:
    import ccogen

    with pytest.raises(FileError):
        ccogen.load("/dev/zero")
    report = ccogen.simulate(ccogen.load(GOOD), ranks=2, seeds=1)
    assert report.passed


# ----------------------------------------------------------------------------- writing


def test_write_atomic_keeps_the_old_text_when_the_write_fails(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    target = tmp_path / "p.cco"
    target.write_text("old\n")

    def fail(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", fail)
    with pytest.raises(FileError, match="No space left on device"):
        write_atomic(target, "new\n" * 1000)
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["p.cco"]  # no temporary file left


def test_write_atomic_keeps_the_mode_and_follows_a_link(tmp_path: Path) -> None:
    target = tmp_path / "real.cco"
    target.write_text("old\n")
    target.chmod(0o640)
    link = tmp_path / "link.cco"
    link.symlink_to(target)
    write_atomic(link, "new\n")
    assert link.is_symlink() and target.read_text() == "new\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640


def test_fmt_on_a_read_only_file_reports_and_keeps_it(capsys: pytest.CaptureFixture[str],
                                                      tmp_path: Path) -> None:
    path = tmp_path / "p.cco"
    text = "protocol p(a: int = 1):\n    team lsa\n    window  w: 64\n"
    path.write_text(text)
    path.chmod(0o444)
    code, _, err = run(capsys, "fmt", str(path))
    assert code == 2 and "read-only" in err
    one_error_line(err)
    assert path.read_text() == text


def test_fmt_goes_on_with_the_other_files(capsys: pytest.CaptureFixture[str],
                                          tmp_path: Path) -> None:
    bad = tmp_path / "missing.cco"
    good = tmp_path / "g.cco"
    good.write_text("protocol p(a: int = 1):\n    team lsa\n    window  w: 64\n")
    code, out, err = run(capsys, "fmt", str(bad), str(good))
    assert code == 2 and "cannot read" in err
    assert f"reformatted {good}" in out


def test_trace_never_overwrites_the_input(capsys: pytest.CaptureFixture[str], proto: Path) -> None:
    before = proto.read_bytes()
    code, _, err = run(capsys, "simulate", str(proto), "--trace", str(proto), "--ranks", "2")
    assert code == 2 and "refusing to overwrite the input file" in err
    one_error_line(err)
    assert proto.read_bytes() == before
    link = proto.parent / "alias.json"
    link.symlink_to(proto)
    code, _, err = run(capsys, "simulate", str(proto), "--trace", str(link), "--ranks", "2")
    assert code == 2 and proto.read_bytes() == before


@pytest.mark.parametrize("out", ["missing/t.json", "/proc/ccogen-test/t.json"])
def test_trace_into_a_missing_or_unwritable_folder(capsys: pytest.CaptureFixture[str],
                                                   proto: Path, out: str) -> None:
    code, _, err = run(capsys, "simulate", str(proto), "--trace", str(proto.parent / out)
                       if not out.startswith("/") else out, "--ranks", "2", "--seeds", "1")
    assert code == 2 and "does not exist" in err
    one_error_line(err)


def test_compile_refuses_files_it_did_not_generate(capsys: pytest.CaptureFixture[str],
                                                   proto: Path) -> None:
    out = proto.parent / "out"
    out.mkdir()
    mine = out / "host.cpp"
    mine.write_text("my own code\n")
    code, _, err = run(capsys, "compile", str(proto), "--target", "mori-sdma", "-o", str(out))
    assert code == 2 and "was not generated by ccogen" in err and "--force" in err
    one_error_line(err)
    assert mine.read_text() == "my own code\n"
    assert sorted(p.name for p in out.iterdir()) == ["host.cpp"]  # nothing written
    code, _, _ = run(capsys, "compile", str(proto), "--target", "mori-sdma", "-o", str(out),
                     "--force")
    assert code == 0 and mine.read_text().startswith("// @generated by ccogen")
    code, _, _ = run(capsys, "compile", str(proto), "--target", "mori-sdma", "-o", str(out))
    assert code == 0  # its own files are overwritten


def test_compile_does_not_follow_links_out_of_the_output(capsys: pytest.CaptureFixture[str],
                                                         proto: Path) -> None:
    out = proto.parent / "out"
    out.mkdir()
    victim = proto.parent / "victim.txt"
    victim.write_text("keep\n")
    (out / "host.cpp").symlink_to(victim)
    code, _, err = run(capsys, "compile", str(proto), "--target", "mori-sdma", "-o", str(out),
                       "--force")
    assert code == 2 and "symbolic link" in err
    assert victim.read_text() == "keep\n"


def test_compile_onto_the_input_or_a_file(capsys: pytest.CaptureFixture[str], proto: Path) -> None:
    before = proto.read_bytes()
    code, _, err = run(capsys, "compile", str(proto), "--target", "mori-sdma", "-o", str(proto))
    assert code == 2 and "refusing to overwrite the input file" in err
    other = proto.parent / "notes.txt"
    other.write_text("mine\n")
    code, _, err = run(capsys, "compile", str(proto), "--target", "mori-sdma", "-o", str(other))
    assert code == 2 and "exists and is not a directory" in err and other.read_text() == "mine\n"
    assert proto.read_bytes() == before
    code, _, err = run(capsys, "compile", str(proto), "--target", "mori-sdma", "-o", "/proc/x")
    assert code == 2
    one_error_line(err)


def test_compile_without_o_writes_a_folder_named_after_the_protocol(
        capsys: pytest.CaptureFixture[str], proto: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(proto.parent)
    (proto.parent / "build").mkdir()
    code, out, _ = run(capsys, "compile", str(proto), "--target", "mori-sdma")
    assert code == 0 and out.strip() == "wrote alltoall-mori-sdma-n2"
    assert (proto.parent / "alltoall-mori-sdma-n2" / "host.cpp").is_file()
    assert not any((proto.parent / "build").iterdir())


def test_write_generated_checks_everything_before_writing(tmp_path: Path) -> None:
    (tmp_path / "b.txt").write_text("user\n")
    with pytest.raises(FileError):
        write_generated(tmp_path, {"a.txt": "// @generated by ccogen\n", "b.txt": "x"})
    assert not (tmp_path / "a.txt").exists()


def test_bench_output_is_checked_before_the_run(capsys: pytest.CaptureFixture[str],
                                                proto: Path) -> None:
    before = proto.read_bytes()
    for out, why in ((str(proto), "refusing to overwrite the input file"),
                     (str(proto / "x"), "is not a directory")):
        code, _, err = run(capsys, "bench", str(proto), "--target", "nccl-lsa", "--sweep",
                           "block=1KiB..4KiB", "-o", out)
        assert code == 2 and why in err
        one_error_line(err)
    assert proto.read_bytes() == before


# ------------------------------------------------- run, build, simulate --trace (#29 item 6)


def test_run_out_keeps_files_it_did_not_write(capsys: pytest.CaptureFixture[str],
                                              proto: Path) -> None:
    out = proto.parent / "out"
    out.mkdir()
    mine = out / "kernels.cu"
    mine.write_text("my own kernels\n")
    code, _, err = run(capsys, "run", str(proto), "--target", "nccl-lsa", "-o", str(out))
    assert code == 2 and "was not generated by ccogen" in err
    assert "--force" not in err  # run's --force is about the checker, not about files
    one_error_line(err)
    assert mine.read_text() == "my own kernels\n"
    assert sorted(p.name for p in out.iterdir()) == ["kernels.cu"]  # nothing written


def test_run_out_does_not_write_through_links(capsys: pytest.CaptureFixture[str],
                                              proto: Path) -> None:
    out = proto.parent / "out"
    out.mkdir()
    victim = proto.parent / "victim.txt"
    victim.write_text("keep\n")
    (out / "manifest.json").symlink_to(victim)
    code, _, err = run(capsys, "run", str(proto), "--target", "nccl-lsa", "-o", str(out),
                       "--force")
    assert code == 2 and "symbolic link" in err
    one_error_line(err)
    assert victim.read_text() == "keep\n"


@pytest.mark.parametrize("what", ["file", "input", "inside-a-file"])
def test_run_out_onto_a_file_is_a_usage_error(capsys: pytest.CaptureFixture[str], proto: Path,
                                              what: str) -> None:
    other = proto.parent / "notes.txt"
    other.write_text("mine\n")
    out = {"file": other, "input": proto, "inside-a-file": other / "d"}[what]
    before = proto.read_bytes()
    code, _, err = run(capsys, "run", str(proto), "--target", "nccl-lsa", "-o", str(out))
    assert code == 2
    one_error_line(err)
    assert "run -o" in err or "input file" in err
    assert other.read_text() == "mine\n" and proto.read_bytes() == before


def test_run_out_writes_its_files(capsys: pytest.CaptureFixture[str], proto: Path) -> None:
    out = proto.parent / "out"
    run(capsys, "run", str(proto), "--target", "nccl-lsa", "-o", str(out))  # no GPU here: 2
    assert (out / "manifest.json").is_file() and (out / "kernels.cu").is_file()
    first = (out / "kernels.cu").read_text()
    run(capsys, "run", str(proto), "--target", "nccl-lsa", "-o", str(out))
    assert (out / "kernels.cu").read_text() == first  # its own files: rewritten freely


def _compiled(capsys: pytest.CaptureFixture[str], proto: Path) -> Path:
    out = proto.parent / "out"
    code, _, _ = run(capsys, "compile", str(proto), "--target", "nccl-lsa", "-o", str(out))
    assert code == 0
    return out


def test_build_does_not_write_the_cubin_through_a_link(capsys: pytest.CaptureFixture[str],
                                                       proto: Path) -> None:
    out = _compiled(capsys, proto)
    victim = proto.parent / "victim.bin"
    victim.write_bytes(b"keep")
    (out / "kernels.cubin").symlink_to(victim)
    code, _, err = run(capsys, "build", str(proto), "--target", "nccl-lsa", "-o", str(out),
                       "--force")
    assert code == 2 and "kernels.cubin is a symbolic link" in err
    one_error_line(err)
    assert victim.read_bytes() == b"keep" and (out / "kernels.cubin").is_symlink()


def test_build_keeps_a_file_it_did_not_build(capsys: pytest.CaptureFixture[str],
                                             proto: Path) -> None:
    out = _compiled(capsys, proto)
    (out / "kernels.ptx").write_text("my hand-written PTX\n")
    code, _, err = run(capsys, "build", str(proto), "--target", "nccl-lsa", "-o", str(out))
    assert code == 2 and "was not built by ccogen" in err and "--force" in err
    one_error_line(err)
    assert (out / "kernels.ptx").read_text() == "my hand-written PTX\n"


def test_build_outputs_of_an_earlier_build_may_be_replaced(tmp_path: Path) -> None:
    from ccogen.cli.compile import BUILD_OUTPUTS
    from ccogen.fileio import check_build_outputs
    from ccogen.toolchains.hip import AMDGPU_MACH

    assert {f"kernels.{arch}.hsaco" for arch in AMDGPU_MACH} <= set(BUILD_OUTPUTS)
    (tmp_path / "kernels.cubin").write_bytes(b"\x7fELF\x02\x01rest")
    (tmp_path / "kernels.ptx").write_text("//\n// Generated by NVIDIA NVVM Compiler\n//\n")
    check_build_outputs(tmp_path, BUILD_OUTPUTS)  # nothing raised
    (tmp_path / "host.o").write_text("not an object\n")
    with pytest.raises(FileError, match=r"host\.o exists and was not built by ccogen"):
        check_build_outputs(tmp_path, BUILD_OUTPUTS)
    check_build_outputs(tmp_path, BUILD_OUTPUTS, force=True)
    (tmp_path / "host.o").unlink()
    (tmp_path / "host.o").mkdir()
    with pytest.raises(FileError, match="not a regular file"):
        check_build_outputs(tmp_path, BUILD_OUTPUTS, force=True)


def test_trace_never_replaces_another_source(capsys: pytest.CaptureFixture[str],
                                             proto: Path) -> None:
    other = proto.parent / "other.cco"
    other.write_text("protocol other():\n    team lsa(2)\n")
    before = other.read_bytes()
    for out in (other, proto.parent / "new.cco", proto.parent / "NEW.CCO"):
        code, _, err = run(capsys, "simulate", str(proto), "--trace", str(out), "--ranks", "2")
        assert code == 2 and "refusing to write onto a .cco file" in err
        one_error_line(err)
    assert other.read_bytes() == before and not (proto.parent / "new.cco").exists()


def test_trace_never_writes_through_a_link(capsys: pytest.CaptureFixture[str],
                                           proto: Path) -> None:
    victim = proto.parent / "victim.txt"
    victim.write_text("keep\n")
    link = proto.parent / "t.json"
    link.symlink_to(victim)
    code, _, err = run(capsys, "simulate", str(proto), "--trace", str(link), "--ranks", "2")
    assert code == 2 and "symbolic link" in err
    one_error_line(err)
    assert victim.read_text() == "keep\n"


def test_trace_replaces_only_an_earlier_trace(capsys: pytest.CaptureFixture[str],
                                              proto: Path) -> None:
    mine = proto.parent / "data.json"
    mine.write_text('{"my": "data"}\n')
    code, _, err = run(capsys, "simulate", str(proto), "--trace", str(mine), "--ranks", "2",
                       "--seeds", "1")
    assert code == 2 and "was not written by ccogen" in err
    one_error_line(err)
    assert mine.read_text() == '{"my": "data"}\n'
    trace = proto.parent / "t.json"
    for _ in range(2):  # the second run replaces the first run's trace
        code, _, err = run(capsys, "simulate", str(proto), "--trace", str(trace), "--ranks", "2",
                           "--seeds", "1")
        assert code == 0, err
    assert '"generator":"ccogen simulate"' in trace.read_text()
