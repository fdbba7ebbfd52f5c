// Hand-written reference for protocols/moe_dispatch.cco on nvshmem
// (benchmarks/reference/README.md).  A call sends the caller's first `ntok[0]` tokens
// (read on the device each launch; the routing rows past it are not read), dealt
// round-robin over the CTAs (token t to CTA t % gridDim.x: a small count still spreads
// over the grid), one token per warp at a time.  CTA c first tells CTA c of every peer
// that this PE's `recv` and `got` are free (the protocol's credit: +1 on its own slot
// there) and waits for theirs.  A warp reads its token's k routing entries once (one lane
// each), ORs the ranks into a mask, and copies the token's row from the caller's `x` to
// every rank in the mask at once: 8 16-byte loads in flight per lane, each stored to every
// destination's row `me * tokens + t` of `recv` (my own, or the peer's through
// nvshmem_ptr; NVSHMEM's warp put for a peer without one).  Then CTA c adds 1 to its slot
// on every peer (after a quiet where NVSHMEM carried data), and waits for every peer's CTA
// c to do the same.  Two signals per slot per launch: targets 2e+1 (free) and 2e+2
// (landed).  CTA 0 also writes `got[me]` on every rank.  The launch rule counts tokens,
// not bytes: `bytes_per_cta` is tokens per CTA, `small_max` 0.  Sizes and offsets are
// macros from the manifest's nvcc_flags (ccogen/bench/reference.py).
// The host and point-to-point device API only (no collectives: ~60 % of nvcc's time in the
// umbrella headers; docs/performance.md, "Test-run cost: builds"), as generated code has.
#if __has_include(<device/nvshmemx_defines.h>) && __has_include(<nvshmem_host.h>)
#include <nvshmem_host.h>
#include <device/nvshmem_defines.h>
#include <device/nvshmemx_defines.h>
#else
#include <nvshmem.h>
#include <nvshmemx.h>
#endif
#include <stdint.h>
#include <cuda/atomic>

// ---- reference support (the same in every nvshmem reference; kernels.cu is self-contained) ----
struct ccogen_debug_record {  // docs/runtime-abi.md; unused: references never time out
  uint32_t hit;
  int32_t rank, line, src, queue, kind;
  uint64_t expected, observed, epoch, reserved[2];
};

// The reference's own heap words, in the zeroed bytes the bench appends (REF_SCRATCH):
// +0 launch counter, +8 / +16 timer (sum of ns, one-way trips), +256 signal slots.
#define REF_SLOTS (REF_SCRATCH + 256ULL)
#define REF_MAX_CTAS 128
// Transfers of at most this many bytes in a one-warp launch go out as one thread's
// put-with-signal; larger ones as the CTA's.
#define REF_THREAD_PUT_MAX 64

// The epoch is this launch's index: a ticket from the launch counter / gridDim.x (launches
// on one stream are ordered), so CUDA-graph replays advance it.
__device__ __forceinline__ uint64_t ref_epoch(char* heap) {
  __shared__ uint64_t epoch;
  if (threadIdx.x == 0) {
    cuda::atomic_ref<uint64_t, cuda::thread_scope_device> ticket(
        *reinterpret_cast<uint64_t*>(heap + REF_SCRATCH));
    epoch = ticket.fetch_add(1, cuda::memory_order_relaxed) / gridDim.x;
  }
  __syncthreads();
  return epoch;
}

// The (symmetric) slot counting the signals CTA `cta` of PE `src` sent to a PE.
__device__ __forceinline__ uint64_t* ref_slot(char* heap, int src, int cta) {
  return reinterpret_cast<uint64_t*>(heap + REF_SLOTS) + static_cast<uint64_t>(src) * REF_MAX_CTAS + cta;
}

// [lo, hi) of part `part` of `parts` of n bytes, 16-byte aligned slices.
__device__ __forceinline__ void ref_slice(uint64_t n, uint64_t part, uint64_t parts, uint64_t* lo,
                                          uint64_t* hi) {
  const uint64_t per = ((n + parts - 1) / parts + 15) / 16 * 16;
  *lo = per * part < n ? per * part : n;
  *hi = *lo + per < n ? *lo + per : n;
}

// This CTA's n bytes at dst on `pe`, then +1 on the PE's `sig` after them (one call: NVSHMEM
// orders the signal after the data).  Every thread of the CTA calls it.
// n bytes with threads t of nt: 16-byte vectors with 8 loads in flight per thread when
// both ends and n allow, else 8-byte or single-byte words.
__device__ __forceinline__ void ref_copy(char* dst, const char* src, uint64_t n, uint64_t t,
                                         uint64_t nt) {
  const uint64_t align = reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src) | n;
  if ((align & 15) == 0) {
    int4* d = reinterpret_cast<int4*>(dst);
    const int4* s = reinterpret_cast<const int4*>(src);
    const uint64_t n16 = n / 16;
    uint64_t i = t;
    for (; i + 7 * nt < n16; i += 8 * nt) {
      int4 v[8];
#pragma unroll
      for (int k = 0; k < 8; ++k) v[k] = s[i + k * nt];
#pragma unroll
      for (int k = 0; k < 8; ++k) d[i + k * nt] = v[k];
    }
    for (; i < n16; i += nt) d[i] = s[i];
  } else if ((align & 7) == 0) {
    for (uint64_t i = t; i < n / 8; i += nt)
      reinterpret_cast<uint64_t*>(dst)[i] = reinterpret_cast<const uint64_t*>(src)[i];
  } else {
    for (uint64_t i = t; i < n; i += nt) dst[i] = src[i];
  }
}

// Put n bytes and add 1 to the PE's signal word, by the whole CTA.  An NVLink peer
// (nvshmem_ptr) gets the CTA's own 16-byte stores, then thread 0's release reduction
// (cumulative over the __syncthreads); other peers NVSHMEM's put-with-signal.
__device__ __forceinline__ void ref_put_signal(char* dst, const char* src, uint64_t n, uint64_t* sig,
                                               int pe) {
  if (char* peer_dst = static_cast<char*>(nvshmem_ptr(dst, pe))) {
    uint64_t* peer_sig = static_cast<uint64_t*>(nvshmem_ptr(sig, pe));
    if (REF_THREADS == 32 && n <= REF_THREAD_PUT_MAX) {
      if (threadIdx.x == 0) ref_copy(peer_dst, src, n, 0, 1);
    } else {
      ref_copy(peer_dst, src, n, threadIdx.x, blockDim.x);
    }
    __syncthreads();
    if (threadIdx.x == 0)
      asm volatile("red.release.sys.add.u64 [%0], %1;" ::"l"(peer_sig), "l"(1ULL) : "memory");
  } else if (n == 0) {
    if (threadIdx.x == 0) nvshmemx_signal_op(sig, 1, NVSHMEM_SIGNAL_ADD, pe);
  } else if (REF_THREADS == 32 && n <= REF_THREAD_PUT_MAX) {
    if (threadIdx.x == 0) nvshmem_putmem_signal_nbi(dst, src, n, sig, 1, NVSHMEM_SIGNAL_ADD, pe);
  } else {
    nvshmemx_putmem_signal_nbi_block(dst, src, n, sig, 1, NVSHMEM_SIGNAL_ADD, pe);
  }
}

__device__ __forceinline__ void ref_wait(uint64_t* slot, uint64_t target) {
  nvshmem_signal_wait_until(slot, NVSHMEM_CMP_GE, target);
}

__device__ __forceinline__ uint64_t ref_now() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
// ---- end of the reference support ----

#define REF_ROW (REF_S_RECV / (REF_NRANKS * REF_P_TOKENS))  // bytes of one token's row
static_assert(REF_NRANKS <= 32, "the routing mask is 32 bits");

// One row of n bytes from src to each of the nd dsts, by the 32 lanes of a warp: every
// vector is loaded once and stored to every destination.
__device__ __forceinline__ void ref_row_multicast(char* const* dst, int nd, const char* src,
                                                  uint64_t n, int lane) {
  uintptr_t align = reinterpret_cast<uintptr_t>(src) | n;
  for (int d = 0; d < nd; ++d) align |= reinterpret_cast<uintptr_t>(dst[d]);
  if ((align & 15) != 0) {
    for (int d = 0; d < nd; ++d) ref_copy(dst[d], src, n, lane, 32);
    return;
  }
  const int4* s = reinterpret_cast<const int4*>(src);
  const uint64_t n16 = n / 16;
  uint64_t i = lane;
  for (; i + 7 * 32 < n16; i += 8 * 32) {
    int4 v[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) v[u] = s[i + u * 32];
    for (int d = 0; d < nd; ++d)
#pragma unroll
      for (int u = 0; u < 8; ++u) reinterpret_cast<int4*>(dst[d])[i + u * 32] = v[u];
  }
  for (; i < n16; i += 32) {
    const int4 v = s[i];
    for (int d = 0; d < nd; ++d) reinterpret_cast<int4*>(dst[d])[i] = v;
  }
}

extern "C" __global__ void __launch_bounds__(REF_THREADS)
ref_moe_dispatch(char* heap, uint64_t, ccogen_debug_record*, const char* x, const int32_t* topk_rank,
                 const int32_t* rank_counts, const int32_t* ntok) {
  const uint64_t epoch = ref_epoch(heap);
  const int me = nvshmem_my_pe(), cta = blockIdx.x;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  __shared__ char* recv_of[REF_NRANKS];  // each PE's `recv` (nullptr: NVSHMEM carries it)
  __shared__ bool proxied;
  if (threadIdx.x == 0) proxied = false;
  __syncthreads();
  if (threadIdx.x < REF_NRANKS) {
    recv_of[threadIdx.x] = static_cast<char*>(nvshmem_ptr(heap + REF_W_RECV, threadIdx.x));
    if (recv_of[threadIdx.x] == nullptr) proxied = true;
  }
  // the barrier: my `recv` and `got` are free for every peer's CTA `cta`, and theirs for me
  for (int p = 0; p < REF_NRANKS; ++p)
    if (p != me) ref_put_signal(heap, heap, 0, ref_slot(heap, me, cta), p);
  if (threadIdx.x == 0)
    for (int p = 0; p < REF_NRANKS; ++p)
      if (p != me) ref_wait(ref_slot(heap, p, cta), 2 * epoch + 1);
  __syncthreads();
  if (cta == 0 && threadIdx.x < REF_NRANKS) {  // got[me] on every rank p (me too)
    int32_t* got = reinterpret_cast<int32_t*>(heap + REF_W_GOT) + me;
    if (int32_t* there = static_cast<int32_t*>(nvshmem_ptr(got, threadIdx.x)))
      *there = rank_counts[threadIdx.x];
    else
      nvshmem_int32_p(got, rank_counts[threadIdx.x], threadIdx.x);
  }
  const int32_t count = ntok[0];  // `require`: 0 <= count <= tokens (clamped all the same)
  const uint64_t n = count < 0 ? 0ULL : static_cast<uint64_t>(count) < REF_P_TOKENS
                                             ? static_cast<uint64_t>(count) : REF_P_TOKENS;
  for (uint64_t t = cta + static_cast<uint64_t>(gridDim.x) * warp; t < n;
       t += static_cast<uint64_t>(gridDim.x) * warps) {
    uint32_t mask = 0;  // the distinct ranks of the token's k experts
    for (uint64_t j = lane; j < REF_P_K; j += 32) mask |= 1u << topk_rank[t * REF_P_K + j];
    mask = __reduce_or_sync(0xffffffffu, mask);
    const uint64_t row = (static_cast<uint64_t>(me) * REF_P_TOKENS + t) * REF_ROW;
    char* dst[REF_NRANKS];
    int nd = 0;
    for (int i = 0; i < REF_NRANKS; ++i) {
      const int p = (me + i) % REF_NRANKS;  // me first, then the peers in ring order
      if (!(mask >> p & 1)) continue;
      if (char* base = p == me ? heap + REF_W_RECV : recv_of[p]) {
        dst[nd++] = base + row;
      } else {
        nvshmemx_putmem_nbi_warp(heap + REF_W_RECV + row, x + t * REF_ROW, REF_ROW, p);
      }
    }
    ref_row_multicast(dst, nd, x + t * REF_ROW, REF_ROW, lane);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    if (proxied) nvshmem_quiet();  // NVSHMEM's puts of the CTA (and got) have landed
    for (int p = 0; p < REF_NRANKS; ++p)  // release adds: after the CTA's stores
      if (p != me) {
        if (uint64_t* there = static_cast<uint64_t*>(nvshmem_ptr(ref_slot(heap, me, cta), p)))
          asm volatile("red.release.sys.add.u64 [%0], %1;" ::"l"(there), "l"(1ULL) : "memory");
        else
          nvshmemx_signal_op(ref_slot(heap, me, cta), 1, NVSHMEM_SIGNAL_ADD, p);
      }
    for (int p = 0; p < REF_NRANKS; ++p)
      if (p != me) ref_wait(ref_slot(heap, p, cta), 2 * epoch + 2);
  }
  __syncthreads();
}
