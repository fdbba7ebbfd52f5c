// Hand-written reference for protocols/moe_dispatch.cco on nccl-lsa
// (benchmarks/reference/README.md).  A call sends the caller's first `ntok[0]` tokens
// (read on the device each launch; the routing rows past it are not read), dealt
// round-robin over the CTAs (token t to CTA t % gridDim.x: a small count still spreads
// over the grid), one token per warp at a time.  CTA c first tells CTA c of every peer
// that this rank's `recv` and `got` are free (the protocol's credit: +1 on its own slot
// there) and waits for theirs.  A warp reads its token's k routing entries once (one lane
// each), ORs the ranks into a mask, and copies the token's row from the caller's `x` to
// every rank in the mask at once: 8 16-byte loads in flight per lane, each stored to every
// destination's row `me * tokens + t` of `recv` (my own, or the peer's through its LSA
// pointer).  Then CTA c adds 1 to its slot on every peer (a release add after the CTA's
// stores) and waits for every peer's CTA c to do the same.  Two signals per slot per
// launch: targets 2e+1 (free) and 2e+2 (landed).  CTA 0 also writes `got[me]` on every
// rank.  The launch rule counts tokens, not bytes: `bytes_per_cta` is tokens per CTA,
// `small_max` 0.  Sizes and offsets are macros from the manifest's nvcc_flags
// (ccogen/bench/reference.py).
#include <nccl.h>
#include <nccl_device.h>
#include <stdint.h>
#include <cuda/atomic>

// ---- reference support (the same in every nccl-lsa reference; kernels.cu is self-contained) ----
struct ccogen_debug_record {  // docs/runtime-abi.md; unused: references never time out
  uint32_t hit;
  int32_t rank, line, src, queue, kind;
  uint64_t expected, observed, epoch, reserved[2];
};

// The reference's own heap words, in the zeroed bytes the bench appends (REF_SCRATCH):
// +0 launch counter, +8 / +16 timer (sum of ns, one-way trips), +256 signal slots.
#define REF_SLOTS (REF_SCRATCH + 256ULL)
#define REF_MAX_CTAS 128

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

// Heap offset of the slot counting the signals CTA `cta` of rank `src` sent to this rank.
__device__ __forceinline__ uint64_t ref_slot(int src, int cta) {
  return REF_SLOTS + 8ULL * (static_cast<uint64_t>(src) * REF_MAX_CTAS + cta);
}

// [lo, hi) of part `part` of `parts` of n bytes, 16-byte aligned slices.
__device__ __forceinline__ void ref_slice(uint64_t n, uint64_t part, uint64_t parts, uint64_t* lo,
                                          uint64_t* hi) {
  const uint64_t per = ((n + parts - 1) / parts + 15) / 16 * 16;
  *lo = per * part < n ? per * part : n;
  *hi = *lo + per < n ? *lo + per : n;
}

template <typename T>
__device__ __forceinline__ void ref_copy_words(char* dst, const char* src, uint64_t n, uint64_t t,
                                               uint64_t nt) {
  T* d = reinterpret_cast<T*>(dst);
  const T* s = reinterpret_cast<const T*>(src);
  for (uint64_t i = t; i < n / sizeof(T); i += nt) d[i] = s[i];
}

// n bytes with threads t of nt: 16-byte vectors with 8 loads in flight per thread when
// both ends and n allow, else the widest word they allow.
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
    ref_copy_words<uint64_t>(dst, src, n, t, nt);
  } else if ((align & 3) == 0) {
    ref_copy_words<uint32_t>(dst, src, n, t, nt);
  } else {
    ref_copy_words<char>(dst, src, n, t, nt);
  }
}

// A signal: a release reduction (add 1) at system scope on the peer's word.  Release is
// cumulative over the CTA's stores that the caller's __syncthreads ordered before it; no
// separate fence (measured on 2 x H200: 1.70 us one way against 2.32 us with
// __threadfence_system() + atomic add; benchmarks/latency).
__device__ __forceinline__ void ref_signal(void* remote_word) {
  asm volatile("red.release.sys.add.u64 [%0], %1;" ::"l"(remote_word), "l"(1ULL) : "memory");
}

// Acquire-spin until my word reaches target.
__device__ __forceinline__ void ref_wait(void* local_word, uint64_t target) {
  cuda::atomic_ref<uint64_t, cuda::thread_scope_system> word(*static_cast<uint64_t*>(local_word));
  while (word.load(cuda::memory_order_acquire) < target) {
  }
}

__device__ __forceinline__ uint64_t ref_now() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ char* ref_peer(ncclWindow_t win, uint64_t off, int peer) {
  return static_cast<char*>(ncclGetLsaPointer(win, off, peer));
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
ref_moe_dispatch(ncclDevComm dc, ncclWindow_t win, uint64_t, ccogen_debug_record*, const char* x,
                 const int32_t* topk_rank, const int32_t* rank_counts, const int32_t* ntok) {
  char* heap = static_cast<char*>(ncclGetLocalPointer(win, 0));
  const uint64_t epoch = ref_epoch(heap);
  const int me = dc.lsaRank, cta = blockIdx.x;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  __shared__ char* recv_of[REF_NRANKS];  // each rank's `recv` (LSA pointers)
  // the barrier: my `recv` and `got` are free for every peer's CTA `cta`, and theirs for me
  const int p0 = threadIdx.x;
  if (p0 < REF_NRANKS) {
    recv_of[p0] = p0 == me ? heap + REF_W_RECV : ref_peer(win, REF_W_RECV, p0);
    if (p0 != me) {
      ref_signal(ref_peer(win, ref_slot(me, cta), p0));
      ref_wait(heap + ref_slot(p0, cta), 2 * epoch + 1);
    }
  }
  __syncthreads();
  if (cta == 0 && p0 < REF_NRANKS)  // got[me] on every rank p (me too)
    *reinterpret_cast<int32_t*>(p0 == me ? heap + REF_W_GOT + 4ULL * me
                                         : ref_peer(win, REF_W_GOT + 4ULL * me, p0)) = rank_counts[p0];
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
      if (mask >> p & 1) dst[nd++] = recv_of[p] + row;
    }
    ref_row_multicast(dst, nd, x + t * REF_ROW, REF_ROW, lane);
  }
  __syncthreads();  // the CTA's rows are stored: release adds after them, then wait
  if (p0 < REF_NRANKS && p0 != me) {
    ref_signal(ref_peer(win, ref_slot(me, cta), p0));
    ref_wait(heap + ref_slot(p0, cta), 2 * epoch + 2);
  }
  __syncthreads();
}
