"""Element values: element views of raw bytes, `reduce`, and value comparison.

The one definition of what a value is, shared by the simulator (whose memory stays
bytes: `sim.state.Memory`), instantiation's run-time values and the runtime's `ensure`
check (`rt.data`).  It reads and writes elements:

* `decode(raw, dtype)` gives the elements in their accumulation type (`f32` for f16
  and bf16, the type itself otherwise); `encode(values, dtype)` rounds once to the
  element type (round to nearest even, bf16 by bit manipulation: numpy has none).
* `combine(op, terms, weights, dtype)` is `reduce`: the terms in list order,
  `acc = w0*t0; acc = acc op w_i*t_i`, each step rounded in the accumulation type
  (integers wrap around), stored once.
* `compare(actual, expected, terms, weights, dtype, op)`: integers and `max`/`min`
  bit-exact; float sums within `tolerance`: twice the error bound of summing `n`
  terms in the accumulation type (`n * u * sum|w_i t_i|`, both sides may sum in a
  different order) plus one unit of the element type in the last place (each side
  is rounded once when stored).
* `random_values(rng, count, dtype)`: what a launch's caller fills a typed window or
  buffer with: floats are finite, in ±[0.5, 2) (never zero, never NaN); integers
  random bytes 1..255.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ccogen.ir.dtype import DType
from ccogen.ir.nodes import ReduceOp

_STORAGE: dict[DType, type] = {
    DType.U8: np.uint8, DType.I32: np.int32, DType.U32: np.uint32, DType.I64: np.int64,
    DType.U64: np.uint64, DType.F16: np.float16, DType.BF16: np.uint16, DType.F32: np.float32,
}


def storage(dtype: DType) -> type:
    """The numpy type that holds one element's bits."""
    return _STORAGE[dtype]


def bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16(values: np.ndarray) -> np.ndarray:
    """Round float32 to bfloat16 bits, to nearest even (NaN stays a quiet NaN)."""
    u = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    rounded = ((u + (np.uint32(0x7FFF) + ((u >> 16) & np.uint32(1)))) >> 16).astype(np.uint16)
    nan = np.isnan(values)
    if nan.any():
        rounded[nan] = ((u[nan] >> 16) | np.uint32(0x40)).astype(np.uint16)
    return rounded


def decode(raw: np.ndarray, dtype: DType) -> np.ndarray:
    """Elements of a byte array, in the accumulation type (`DType.accumulator`)."""
    data: np.ndarray = np.ascontiguousarray(raw).view(storage(dtype))
    if dtype is DType.BF16:
        return bf16_to_f32(data)
    return data.astype(storage(dtype.accumulator))


def encode(values: np.ndarray, dtype: DType) -> np.ndarray:
    """Elements (accumulation type) stored as the element type: raw bytes."""
    out = (f32_to_bf16(values) if dtype is DType.BF16
           else np.asarray(values).astype(storage(dtype)))
    return out.view(np.uint8)


def _weight(w: int | float, acc: type) -> np.generic:
    if np.issubdtype(acc, np.integer):
        return np.array(int(w), dtype=np.int64).astype(acc)[()]  # type: ignore[return-value]
    return acc(w)  # type: ignore[no-any-return]


def accumulate(op: ReduceOp, terms: Sequence[np.ndarray], weights: Sequence[int | float],
               dtype: DType, src_dtypes: Sequence[DType] = ()) -> np.ndarray:
    """The combination in the accumulation type, in list order (unrounded to `dtype`).
    `src_dtypes`: each term's element type where it is not `dtype` (a converting
    `reduce`: float terms are widened to f32 exactly)."""
    values = [decode(t, d) for t, d in zip(terms, src_dtypes or [dtype] * len(terms),
                                           strict=True)]
    if src_dtypes and any(d is not dtype for d in src_dtypes):
        values = [v.astype(np.float32) for v in values]
    acc_type = values[0].dtype.type
    if weights:
        values = [v * _weight(w, acc_type) for v, w in zip(values, weights, strict=True)]
    acc = values[0].copy()
    with np.errstate(over="ignore"):
        for v in values[1:]:
            if op is ReduceOp.SUM:
                acc = acc + v
            elif op is ReduceOp.MAX:
                acc = np.maximum(acc, v)
            else:
                acc = np.minimum(acc, v)
    return acc


def combine(op: ReduceOp, terms: Sequence[np.ndarray], weights: Sequence[int | float],
            dtype: DType, src_dtypes: Sequence[DType] = ()) -> np.ndarray:
    """`reduce`: the raw bytes of the combination of `terms` (raw bytes each, of
    `src_dtypes` where given), rounded once to `dtype`."""
    return encode(accumulate(op, terms, weights, dtype, src_dtypes), dtype)


def tolerance(terms: Sequence[np.ndarray], weights: Sequence[int | float], dtype: DType,
              result: np.ndarray) -> np.ndarray:
    """Per element: how far two float sums of `terms` in different orders may lie apart."""
    n = len(terms)
    scale = np.zeros(result.shape, dtype=np.float64)
    for i, t in enumerate(terms):
        w = abs(float(weights[i])) if weights else 1.0
        scale += w * np.abs(decode(t, dtype).astype(np.float64))
    unit = 2.0 ** -(dtype.accumulator.mantissa_bits + 1)  # of the accumulation type
    last_place = 2.0 ** -dtype.mantissa_bits
    return 2 * n * unit * scale + last_place * np.abs(result.astype(np.float64)) + 1e-30


def compare(actual: np.ndarray, op: ReduceOp, terms: Sequence[np.ndarray],
            weights: Sequence[int | float], dtype: DType) -> np.ndarray:
    """A boolean per element: whether `actual` (raw bytes) is the reduction of `terms`."""
    expected = combine(op, terms, weights, dtype)
    if not dtype.is_float or op is not ReduceOp.SUM:
        a: np.ndarray = np.ascontiguousarray(actual).view(storage(dtype))
        e: np.ndarray = expected.view(storage(dtype))
        return a == e  # type: ignore[no-any-return]
    got = decode(actual, dtype).astype(np.float64)
    want = decode(expected, dtype).astype(np.float64)
    return np.abs(got - want) <= tolerance(terms, weights, dtype, want)  # type: ignore[no-any-return]


# (bits of the exponent of 0.5, mantissa bits) of the float types drawn bit by bit
_BINADES = {DType.BF16: (np.uint16, 126, 7), DType.F16: (np.uint16, 14, 10),
            DType.F32: (np.uint32, 126, 23)}


def random_values(rng: np.random.Generator, count: int, dtype: DType) -> np.ndarray:
    """A caller's data for `count` elements of `dtype`, as raw bytes.

    Floats are finite, of magnitude in [0.5, 2) and either sign.  bf16, f16 and f32 are
    drawn as bits (`random_values_into`), not through float64: a MoE prefill draw is 10^8
    elements per epoch, where going through float64 took seconds."""
    if not dtype.is_float:
        return rng.integers(1, 256, size=count * dtype.size, dtype=np.uint8)
    if dtype in _BINADES:
        out = np.empty(count * dtype.size, dtype=np.uint8)
        random_values_into(rng, out, dtype)
        return out
    magnitude = rng.uniform(0.5, 2.0, size=count).astype(np.float32)
    sign = np.where(rng.integers(0, 2, size=count) == 0, -1.0, 1.0).astype(np.float32)
    return encode(magnitude * sign, dtype)


def random_values_into(rng: np.random.Generator, out: np.ndarray, dtype: DType) -> None:
    """`random_values` written into `out` (raw bytes, a whole number of elements).

    For bf16, f16 and f32: random bits with the exponent set to that of 0.5 but for its
    lowest bit, which stays random (the binade [0.5, 1) or [1, 2)); sign and mantissa
    random.  Three passes over `out`: a draw of whole 64-bit words, two masks in place."""
    binade = _BINADES.get(dtype)
    if binade is None:
        out[:] = random_values(rng, out.size // dtype.size, dtype)
        return
    kind, half, mantissa = binade
    width = 8 * np.dtype(kind).itemsize
    words = -(-out.size // 8)
    bits = out.view(kind)
    bits[:] = rng.bit_generator.random_raw(words).view(kind)[:bits.size]
    keep = (1 << (width - 1)) | (1 << mantissa) | ((1 << mantissa) - 1)  # sign, bit, mantissa
    bits &= kind(keep)
    bits |= kind(half << mantissa)  # `half` is even: its lowest bit is the random one


KEY_LANES = 64  # elements of one chunk's key (`keyed_values_into`)
_POOLS: dict[DType, np.ndarray] = {}


def keyed_values_into(rng: np.random.Generator, out: np.ndarray, dtype: DType) -> None:
    """`random_values` of a bf16/f16/f32 memory written into `out` in one pass: a pool of
    random values (`random_values_into`, the same in every process, up to 4 MiB) with
    element i's random bits (sign, binade, mantissa) flipped by lane i % KEY_LANES of a
    key that `rng` draws.  Every value stays in range; elements of one chunk differ as
    the pool's do, two chunks (of other memories, ranks or launches) by their keys (all
    KEY_LANES lanes equal by chance: 2^-576 for bf16).  The data of `ccogen run`'s
    launches at the real MoE shapes: drawing every byte afresh is 10^9 bytes per rank and
    launch (docs/performance.md, "host preparation at the real shapes")."""
    kind, _, mantissa = _BINADES[dtype]
    width = 8 * np.dtype(kind).itemsize
    keep = (1 << (width - 1)) | (1 << mantissa) | ((1 << mantissa) - 1)
    pool = _POOLS.get(dtype)
    count = out.size // dtype.size
    if pool is None or pool.size < count:
        pool = np.empty(max(count, (1 << 22) // dtype.size) * dtype.size, dtype=np.uint8)
        random_values_into(np.random.default_rng([0x5EED, dtype.size]), pool, dtype)
        _POOLS[dtype] = pool
    words = -(-KEY_LANES * dtype.size // 8)
    key = rng.bit_generator.random_raw(words).view(kind)[:KEY_LANES] & kind(keep)
    src, dst = pool.view(kind)[:count], out.view(kind)
    whole = count - count % KEY_LANES
    np.bitwise_xor(src[:whole].reshape(-1, KEY_LANES), key,
                   out=dst[:whole].reshape(-1, KEY_LANES))
    np.bitwise_xor(src[whole:], key[:count - whole], out=dst[whole:])


def show(raw: np.ndarray, dtype: DType) -> str:
    """One element as a person reads it (`1.25`, `-3`)."""
    value = decode(raw, dtype)[0]
    return f"{float(value):.9g}" if dtype.is_float else str(int(value))


__all__ = ["accumulate", "combine", "compare", "decode", "encode", "keyed_values_into",
           "random_values", "random_values_into", "show", "storage", "tolerance"]
