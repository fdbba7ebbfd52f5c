"""How long `instantiate` takes for ~20k op instances.

The protocol (built with `ccogen.ir.nodes`, no parser needed) is, in `.cco` terms::

    protocol bench(chunk: bytes = 4 KiB, iters: int = 2500):
        team lsa
        queues 1
        window send: iters * chunk
        window recv: iters * chunk

        kernel ring(threads=32):
            for i in range(iters):
                put((me + 1) % nranks, dst=recv[i*chunk : (i+1)*chunk],
                    src=send[i*chunk : (i+1)*chunk], queue=0, signal="remote")
            quiet((me + 1) % nranks)
            wait_signal((me - 1) % nranks, queue=0, expected=iters)

instantiated for 8 ranks: 8 * (2500 + 2) = 20,016 op instances.

Run: `python benchmarks/bench_instantiate.py [--repeat N]`.
"""

from __future__ import annotations

import argparse
import statistics
import time

from ccogen.instantiate import instantiate
from ccogen.ir import nodes as ir

NRANKS = 8
ITERATIONS = 2500
CHUNK = 4096


def _bin(op: str, left: ir.Expr, right: ir.Expr) -> ir.Expr:
    return ir.BinOp(op=op, left=left, right=right)


def _slice(window: str, i: ir.Expr, chunk: ir.Expr) -> ir.Region:
    one = ir.Const(value=1)
    return ir.Region(window=window, start=_bin("*", i, chunk),
                     stop=_bin("*", _bin("+", i, one), chunk))


def build_protocol() -> ir.Protocol:
    chunk, iters, i = ir.ParamRef(name="chunk"), ir.ParamRef(name="iters"), ir.Var(name="i")
    right = _bin("%", _bin("+", ir.Me(), ir.Const(value=1)), ir.NRanks())
    left = _bin("%", _bin("-", ir.Me(), ir.Const(value=1)), ir.NRanks())
    put = ir.Put(peer=right, dst=_slice("recv", i, chunk), src=_slice("send", i, chunk),
                 queue=ir.Const(value=0), signal=ir.SignalKind.REMOTE)
    body: tuple[ir.Stmt, ...] = (
        ir.For(var="i", iter=ir.Call(func="range", args=(iters,)), body=(put,)),
        ir.Quiet(peer=right),
        ir.WaitSignal(src=left, queue=ir.Const(value=0), expected=iters),
    )
    return ir.Protocol(
        name="bench",
        params=(ir.Param(name="chunk", type=ir.ParamType.BYTES, default=ir.Const(value=CHUNK)),
                ir.Param(name="iters", type=ir.ParamType.INT, default=ir.Const(value=ITERATIONS))),
        windows=(ir.Window(name="send", size=_bin("*", iters, chunk)),
                 ir.Window(name="recv", size=_bin("*", iters, chunk))),
        kernels=(ir.Kernel(name="ring", threads=ir.Const(value=32), blocks=None, body=body),),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    protocol = build_protocol()
    times = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        instance, diags = instantiate(protocol, NRANKS)
        times.append(time.perf_counter() - start)
        assert instance is not None and not diags, diags
    count = instance.op_count
    best, median = min(times), statistics.median(times)
    print(f"instantiate: {count:,} op instances on {NRANKS} ranks: best {best * 1e3:.1f} ms, "
          f"median {median * 1e3:.1f} ms ({count / best / 1e3:.0f}k op instances/s)")


if __name__ == "__main__":
    main()
