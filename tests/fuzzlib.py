"""The fuzzer shared by the test suite (a fast sample) and `scripts/fuzz.py` (the long run).

Inputs, from a seeded `random.Random` (reproducible: `case(seed, i)` rebuilds input i):

* `bytes`  byte-level mutations of a library protocol or lint fixture (flips, inserted
  bytes that are not UTF-8, deleted and duplicated ranges);
* `tokens` token- and line-level mutations (keywords, operators, huge numbers, deep
  nesting, indentation changes, duplicated and swapped lines);
* `values` changes that usually keep the syntax (a number, an operator, an op or a
  keyword swapped), so that most inputs reach the checks and the simulator;
* `params` a library protocol with hostile `--param`/`--ranks`/`--limit` values
  (2**62-byte windows, 10**30-element loops, tens of thousands of ranks);
* `cli`    a command line of `ccogen` built from the subcommands, their flags and
  hostile values and paths (missing, a directory, a FIFO, `/dev/zero`, the input as
  the output, a read-only file), run in a scratch directory;
* `ir`     random well-scoped IR protocols from the hypothesis strategies of
  `tests/strategies.py`, printed and checked (`ir_cases`).

Input i is of kind `MIX[i % 20]` (mostly the cheap text mutations).  Each text goes
through the whole pipeline a user can reach: decode, parse, `fmt` (twice: the second
pass must change nothing, and no comment may be lost), `lint` at the given team sizes
and, for about one input in `SIM_EVERY`, `simulate` with one seed.  What may come out: diagnostics
with registered codes and spans inside the text, and for the CLI exit codes 0, 1 or 2
without "internal error".  Anything else is a failure: a traceback (any other
exception), a timeout (`TIMEOUT_S` of CPU per input, or a wall-clock window of that
length in which it used almost no CPU: blocked) or a broken property.
"""

from __future__ import annotations

import contextlib
import io
import os
import random
import signal
import stat
import tempfile
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ccogen.diag import Diagnostic
from ccogen.diag.codes import RULES
from ccogen.errors import DiagnosticError
from ccogen.limits import Limits

ROOT = Path(__file__).resolve().parents[1]
# the MoE protocols' production defaults take minutes to lint: not fuzz seeds
_LARGE = ("moe_dispatch.cco", "moe_combine.cco")
SEEDS: list[tuple[str, str]] = sorted(
    (p.name, p.read_text(encoding="utf-8"))
    for p in [*(ROOT / "protocols").glob("*.cco"), *(ROOT / "tests" / "lint").glob("*.cco")]
    if p.name not in _LARGE)
LIBRARY = sorted(p for p in (ROOT / "protocols").glob("*.cco") if p.name not in _LARGE)
TOKENS = ["protocol", "team", "lsa", "world", "queues", "auto", "window", "counter", "kernel",
          "ensure", "if", "elif", "else", "for", "in", "lanes", "warps", "blocks", "pass", "put",
          "get", "copy", "commit", "quiet", "wait_signal", "wait_count", "barrier", "fence", "me",
          "nranks", "peers()", "range(", "init(", "@", ":", "(", ")", "[", "]", ",", "=", "==",
          "+", "-", "*", "//", "%", "**", "0", "1", "-1", "4 KiB", "\n", "    ", "\t", '"remote"',
          '"same_queue"', "True", "x", "send", "recv", "#", '"""', "\\\n", "signal=", "queue=",
          "99999999999999999999999", "2**62", "1 GiB", "# comment", "  # trailing", "\r\n",
          "(" * 40, "1+" * 200, "-" * 300]
KINDS = ("bytes", "tokens", "values", "params", "cli")
# input i is of kind MIX[i % 20]: most inputs are the cheap text mutations
MIX = ("bytes", "tokens") * 6 + ("values", "values") + ("params",) * 4 + ("cli",) * 2
TIMEOUT_S = 20.0
SIM_EVERY = 8
# the fuzzer's own limits: lower than the defaults so that one input stays fast
LIMITS = Limits(ranks=64, op_instances=20_000, iterations=100_000, sim_bytes=16 << 20,
                analysis_bytes=256 << 20)


STAGES: Counter[str] = Counter()  # how far the text inputs got: decoded, parsed, linted, ...


class Timeout(Exception):
    pass


@dataclass
class Failure:
    kind: str
    index: int
    what: str  # "traceback", "timeout" or "property"
    detail: str
    text: str = ""
    argv: list[str] = field(default_factory=list)


@dataclass
class Case:
    kind: str
    index: int
    data: bytes = b""
    argv: list[str] = field(default_factory=list)
    ranks: tuple[int, ...] = (2,)
    params: tuple[str, ...] = ()
    files: dict[str, bytes] = field(default_factory=dict)


# ============================================================================= generation


def case(seed: int, index: int, kinds: tuple[str, ...] = MIX) -> Case:
    """Input `index` of the run seeded `seed` (the same pair gives the same input)."""
    rng = random.Random(seed * 1_000_003 + index)
    kind = kinds[index % len(kinds)]
    if kind == "bytes":
        return Case(kind, index, _mutate_bytes(rng, _seed(rng).encode()))
    if kind == "tokens":
        text = _seed(rng)
        for _ in range(rng.randint(1, 5)):
            text = _mutate_text(rng, text)
        return Case(kind, index, text.encode(), ranks=(rng.choice([1, 2, 3]),))
    if kind == "values":
        text = _seed(rng)
        for _ in range(rng.randint(1, 3)):
            text = _mutate_value(rng, text)
        return Case(kind, index, text.encode(), ranks=(rng.choice([2, 3, 4]),))
    if kind == "params":
        return _params_case(rng, index)
    return _cli_case(rng, index)


def _seed(rng: random.Random) -> str:
    return rng.choice(SEEDS)[1]


def _mutate_bytes(rng: random.Random, data: bytes) -> bytes:
    for _ in range(rng.randint(1, 6)):
        if not data:
            return bytes([rng.randrange(256)])
        i = rng.randrange(len(data))
        j = min(len(data), i + rng.randint(0, 16))
        op = rng.randrange(5)
        if op == 0:
            data = data[:i] + bytes([data[i] ^ (1 << rng.randrange(8))]) + data[i + 1:]
        elif op == 1:
            data = data[:i] + bytes(rng.randrange(256) for _ in range(rng.randint(1, 4))) + data[i:]
        elif op == 2:
            data = data[:i] + data[j:]
        elif op == 3:
            data = data[:j] + data[i:j] * rng.randint(1, 40) + data[j:]
        else:
            data = data[:i] + rng.choice([b"\xe9", b"\xff\xfe", b"\x00", b"\xef\xbb\xbf", b"\r",
                                          b"\x0c", b"\xc3"]) + data[i:]
    return data


def _mutate_text(rng: random.Random, text: str) -> str:
    if not text:
        return rng.choice(TOKENS)
    i = rng.randrange(len(text))
    j = min(len(text), i + rng.randint(0, 12))
    op = rng.choice(["delete", "insert", "duplicate", "swap", "line", "indent", "nest", "number"])
    if op == "delete":
        return text[:i] + text[j:]
    if op == "insert":
        return text[:i] + rng.choice(TOKENS) + text[i:]
    if op == "duplicate":
        return text[:j] + text[i:j] * rng.randint(1, 3) + text[j:]
    if op == "swap":
        return text[:i] + text[j:j + (j - i)] + text[i:j] + text[j + (j - i):]
    if op == "number":
        return text[:i] + str(rng.choice([0, -1, 2**31, 2**62, 2**64 + 1, 10**30])) + text[j:]
    lines = text.split("\n")
    k = rng.randrange(len(lines))
    if op == "line":
        lines.insert(rng.randrange(len(lines) + 1), lines[k])
    elif op == "indent":
        lines[k] = rng.choice(["", " ", "  ", "        ", "\t"]) + lines[k].lstrip()
    else:  # nest the line under `depth` `if`s
        depth = rng.choice([1, 3, 20, 80, 200])
        pad = len(lines[k]) - len(lines[k].lstrip())
        nested = [" " * (pad + 4 * d) + "if me == 0:" for d in range(depth)]
        lines[k:k + 1] = [*nested, " " * (pad + 4 * depth) + lines[k].lstrip()]
    return "\n".join(lines)


_SWAPS = [("put", "get"), ("+", "-"), ("*", "//"), ("<", "<="), ("==", "!="), ("me", "0"),
          ("peers()", "ranks()"), ('"remote"', '"local"'), ("quiet(", "fence("), ("lsa", "world"),
          ("wait_signal(", "wait_count("), ("1 MiB", "3 B"), ("queue=0", "queue=1")]


def _mutate_value(rng: random.Random, text: str) -> str:
    """A change that usually keeps the syntax: a number, an operator, an op, a keyword."""
    import re

    if rng.random() < 0.5:
        numbers = list(re.finditer(r"\b\d+\b", text))
        if numbers:
            m = rng.choice(numbers)
            value = rng.choice([0, 1, 2, 3, 7, 15, 16, 17, 64, 255, 4096, 2**20, 2**31, 2**40,
                                2**62, 10**25])
            return text[:m.start()] + str(value) + text[m.end():]
    a, b = rng.choice(_SWAPS)
    if rng.random() < 0.5:
        a, b = b, a
    places = [m.start() for m in re.finditer(re.escape(a), text)]
    if not places:
        return text
    i = rng.choice(places)
    return text[:i] + b + text[i + len(a):]


_HOSTILE_VALUES = ["0", "-1", "1", "3", "4KiB", "1GiB", "4611686018427387904", "2**62", "x",
                   "99999999999999999999999999", "8 GiB", "1e9", "", "1KB", "0x10"]


def _params_case(rng: random.Random, index: int) -> Case:
    path = rng.choice(LIBRARY)
    text = path.read_text(encoding="utf-8")
    names = [line.split("(", 1)[1] for line in text.splitlines() if line.startswith("protocol")]
    declared = [p.split(":")[0].strip() for p in names[0].split(",")] if names else []
    params = tuple(f"{rng.choice([*declared, 'nope'])}={rng.choice(_HOSTILE_VALUES)}"
                   for _ in range(rng.randint(1, 3))) if declared else ()
    ranks = (rng.choice([1, 2, 3, 5, 64, 65, 1000, 50_000]),)
    return Case("params", index, text.encode(), ranks=ranks, params=params)


_PROTOCOL = (ROOT / "protocols" / "alltoall.cco").read_bytes()
_SUBCOMMANDS = ["lint", "fmt", "simulate", "compile", "explain", "run", "bench", "build",
                "nope", "--version"]
_FLAGS = ["--ranks", "--param", "--target", "--format", "--color", "--strict", "--check",
          "--seeds", "--seed", "--exhaustive", "--epochs", "--max-schedules", "--time-limit",
          "--trace", "-o", "--force", "--limit", "--arch", "--debug", "--sweep", "--help"]
_VALUES = ["2", "0", "-1", "abc", "1,2", "x=1", "block=2**62", "block=1GiB", "mori-sdma",
           "nccl-cft", "nvshmem", "nccl-lsa", "nope", "json", "sarif", "full", "E021", "W999",
           "0.0", "1e-9", "nan", "ranks=2", "sim-bytes=1", "findings=1", "op-instances=x",
           "p.cco", "out.json", "out", "missing/x.json", "dir", "fifo", "/dev/zero", "ro.cco",
           "latin1.cco", "link", "99999999999999999999"]


def _cli_case(rng: random.Random, index: int) -> Case:
    argv = [rng.choice(_SUBCOMMANDS)]
    if rng.random() < 0.9:
        argv.append(rng.choice(["p.cco", "p.cco", "latin1.cco", "ro.cco", "missing.cco", "dir",
                                "fifo", "/dev/zero", "link", "p.cco"]))
    for _ in range(rng.randint(0, 4)):
        flag = rng.choice(_FLAGS)
        argv.append(flag)
        if rng.random() < 0.85 and flag not in ("--strict", "--check", "--exhaustive",
                                                 "--force", "--debug", "--help"):
            argv.append(rng.choice(_VALUES))
    if argv[0] in ("run", "bench", "build") and "--help" not in argv:
        argv.append("--help")  # these need GPUs or toolchains: only their argument checks
    if argv[0] == "simulate" and not {"--seed", "--seeds", "--exhaustive"} & set(argv):
        argv += ["--seeds", "2"]  # 20 seeds on 4 team sizes cost a second an input
    if argv[0] == "simulate" and "--ranks" not in argv:
        argv += ["--ranks", "2"]
    files = {"p.cco": _PROTOCOL, "ro.cco": _PROTOCOL,
             "latin1.cco": _PROTOCOL.replace(b"# Every", b"# caf\xe9 Every")}
    return Case("cli", index, argv=argv, files=files)


# ============================================================================= running


# A wall-clock window in which the input used less than this share of one CPU: it is
# blocked (a read of a FIFO), not slow.  A loaded machine slows an input down (at load
# 13 on 2 cores each process still gets ~15 % of a CPU); it does not stop it.
BLOCKED_SHARE = 0.01


def _cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Timeout after `seconds` of CPU time (a loop), or when a whole wall-clock window of
    `seconds` passes in which the input used almost no CPU (`BLOCKED_SHARE`: a blocked
    read).  No wall-clock limit on work: a shared, busy machine does not turn a slow input
    into a timeout."""
    mark = [_cpu()]

    def fire(signum: int, frame: object) -> None:
        raise Timeout(f"over {seconds:g} s of CPU")

    def window(signum: int, frame: object) -> None:
        now = _cpu()
        used, mark[0] = now - mark[0], now
        if used < BLOCKED_SHARE * seconds:
            raise Timeout(f"blocked: {used:.2g} s of CPU in {seconds:g} s")

    old = signal.signal(signal.SIGALRM, window), signal.signal(signal.SIGPROF, fire)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    signal.setitimer(signal.ITIMER_REAL, seconds, seconds)  # every window, until cleared
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old[0])
        signal.signal(signal.SIGPROF, old[1])


def _well_formed(diags: tuple[Diagnostic, ...] | list[Diagnostic], text: str) -> None:
    if not diags:
        raise AssertionError("an error was raised without a diagnostic")
    for d in diags:
        if d.code not in RULES:
            raise AssertionError(f"unregistered code {d.code}")
        if d.span is not None and not 0 <= d.span.start <= d.span.end <= len(d.span.file.text):
            raise AssertionError(f"span {d.span.start}:{d.span.end} outside the text")


def check_text(data: bytes, ranks: tuple[int, ...] = (2,), params: tuple[str, ...] = (),
               index: int = 0) -> None:
    """Decode, parse, format twice, lint and (sometimes) simulate one input."""
    from ccogen.driver import CheckOptions, check_protocol
    from ccogen.fileio import decode_source
    from ccogen.instantiate import parse_params
    from ccogen.syntax import parse_ir
    from ccogen.syntax.format import format_text

    try:
        text = decode_source(data, "fuzz.cco")
    except DiagnosticError as exc:
        _well_formed(exc.diagnostics, "")
        return
    STAGES["decoded"] += 1
    try:
        protocol = parse_ir(text, "fuzz.cco")
    except DiagnosticError as exc:
        _well_formed(exc.diagnostics, text)
        return
    STAGES["parsed"] += 1
    once = format_text(text, "fuzz.cco")
    if format_text(once, "fuzz.cco") != once:
        raise AssertionError("fmt is not idempotent")
    if comments(once) != comments(text):
        raise AssertionError(f"fmt lost comments: {comments(text) - comments(once)}")
    try:
        values = parse_params(params, protocol)
    except ValueError:
        return  # a usage error: the CLI says so (the cli cases cover it)
    result = check_protocol(protocol, CheckOptions(ranks=ranks, params=values, limits=LIMITS))
    for d in result.diagnostics:
        _well_formed([d], text)
    STAGES["linted"] += 1
    if result.instances:
        STAGES["instantiated"] += 1
    if (index * 2654435761 >> 7) % SIM_EVERY == 0:  # mixed, so that every shard simulates
        from ccogen.sim import simulate

        report = simulate(protocol, ranks, values, seeds=1, epochs=1, limits=LIMITS)
        for d in report.diagnostics:
            _well_formed([d], text)
        STAGES["simulated"] += 1


def comments(text: str) -> Counter[str]:
    """The comments of a text (as `fmt` finds them), counted."""
    from ccogen.source import SourceFile
    from ccogen.syntax.format import scan_comments

    found = scan_comments(SourceFile("c.cco", text))
    return Counter([body for _, body in found.own_line] + list(found.trailing.values()))


def run_cli(c: Case) -> None:
    """Run one command line in a scratch directory; exit 0-2 and no internal error."""
    from ccogen.cli.main import main

    with tempfile.TemporaryDirectory(prefix="ccogen-fuzz-") as tmp:
        _scratch(Path(tmp), c.files)
        before = {n: (Path(tmp) / n).read_bytes() for n in ("p.cco", "ro.cco", "latin1.cco")}
        out, err = io.StringIO(), io.StringIO()
        cwd = os.getcwd()
        try:
            os.chdir(tmp)
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    code = main(c.argv)
                except SystemExit as exc:  # argparse: usage errors and --help
                    code = exc.code if isinstance(exc.code, int) else 2
        finally:
            os.chdir(cwd)
        if code not in (0, 1, 2) or "internal error" in err.getvalue():
            raise AssertionError(f"exit {code}\n{err.getvalue()[-3000:]}")
        if code == 2 and not err.getvalue().strip():
            raise AssertionError("exit 2 without a message")
        for name, data in before.items():
            path = Path(tmp) / name
            if not path.is_file() or stat.S_ISLNK(path.lstat().st_mode):
                raise AssertionError(f"{name} was removed or replaced")
            asked = name in c.argv or (name == "p.cco" and "link" in c.argv)  # link -> p.cco
            if path.read_bytes() != data and not (c.argv[0] == "fmt" and "--check" not in c.argv
                                                  and asked):
                raise AssertionError(f"{name} was changed by a command not asked to write it")


def _scratch(tmp: Path, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        (tmp / name).write_bytes(data)
    os.chmod(tmp / "ro.cco", 0o444)
    (tmp / "dir").mkdir()
    os.mkfifo(tmp / "fifo")
    (tmp / "link").symlink_to(tmp / "p.cco")


def run_case(c: Case, timeout: float = TIMEOUT_S) -> Failure | None:
    """Run one input; a Failure for a traceback, a timeout or a broken property."""
    try:
        with deadline(timeout):
            if c.kind == "cli":
                run_cli(c)
            else:
                check_text(c.data, c.ranks, c.params, c.index)
    except Timeout as exc:
        return Failure(c.kind, c.index, "timeout", str(exc), _shown(c), c.argv)
    except AssertionError as exc:
        return Failure(c.kind, c.index, "property", str(exc), _shown(c), c.argv)
    except Exception:
        return Failure(c.kind, c.index, "traceback", traceback.format_exc(), _shown(c), c.argv)
    return None


def _shown(c: Case) -> str:
    return c.data.decode("utf-8", errors="backslashreplace")


def ir_cases(count: int, on_failure: Callable[[Failure], None], seed: int = 0) -> int:
    """`count` random IR protocols from the hypothesis strategies, printed and checked;
    returns how many ran."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import seed as hseed

    from ccogen.syntax import to_source
    from tests.strategies import protocols

    ran = 0

    @hseed(seed)
    @settings(max_examples=count, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(protocols())
    def one(p: object) -> None:
        nonlocal ran
        text = to_source(p)  # type: ignore[arg-type]
        c = Case("ir", ran, text.encode())
        ran += 1
        failure = run_case(c)
        if failure is not None:
            on_failure(failure)

    one()
    return ran


__all__ = ["KINDS", "LIMITS", "Case", "Failure", "case", "check_text", "ir_cases", "run_case"]
