// Hand-written reference for protocols/alltoallv.cco on nvshmem (benchmarks/reference/README.md).
// One unit of CTAs per peer, sized from `cap` (the most a peer can get).  Each CTA reads the
// peer's count from the caller's `counts` once, tells its counterpart on the peer that this
// PE's `recv` and `got` are free (the protocol's barrier: +1 on its own slot there), waits
// for the peer's word, then stores its 16-byte-aligned slice of the `counts[peer]` elements
// straight into the peer's `recv[me * cap ...]` (nvshmem_ptr; put-with-signal for a peer
// without a pointer) and adds 1 to the same slot after them; CTA 0 also writes `got[me]`
// there first.  Then every CTA copies its slice of my own part locally.  Two signals per slot
// per launch: targets 2e+1 (free) and 2e+2 (landed).  Sizes and offsets are macros from the
// manifest's nvcc_flags (ccogen/bench/reference.py); the element size is
// REF_S_RECV / (REF_NRANKS * REF_P_CAP).
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

#define REF_ELEM (REF_S_RECV / (REF_NRANKS * REF_P_CAP))

extern "C" __global__ void __launch_bounds__(REF_THREADS)
ref_alltoallv(char* heap, uint64_t, ccogen_debug_record*, const char* send, const int32_t* counts) {
  const uint64_t epoch = ref_epoch(heap);
  const int me = nvshmem_my_pe();
  const int unit = blockIdx.x / REF_CTAS, cta = blockIdx.x % REF_CTAS;
  const int peer = (me + 1 + unit) % REF_NRANKS;
  __shared__ int32_t count[2];  // counts[peer], counts[me]: read once per launch
  if (threadIdx.x < 2) count[threadIdx.x] = counts[threadIdx.x == 0 ? peer : me];
  // the barrier: my `recv` and `got` are free for this peer's CTA `cta`, and its are for me
  uint64_t* mine = ref_slot(heap, me, cta);
  ref_put_signal(heap, heap, 0, mine, peer);
  if (threadIdx.x == 0) ref_wait(ref_slot(heap, peer, cta), 2 * epoch + 1);
  __syncthreads();
  // send[peer * cap + lo, + hi) of mine -> recv[me * cap + lo, + hi) of the peer, then +1
  int32_t* got = reinterpret_cast<int32_t*>(heap + REF_W_GOT) + me;
  if (cta == 0 && threadIdx.x == 0) {
    if (int32_t* peer_got = static_cast<int32_t*>(nvshmem_ptr(got, peer))) {
      *peer_got = count[0];  // ordered before the signal by the __syncthreads and release add
    } else {
      nvshmem_int32_p(got, count[0], peer);
      nvshmem_fence();  // before the put-with-signal below
    }
  }
  __syncthreads();
  uint64_t lo, hi;
  ref_slice(static_cast<uint64_t>(count[0]) * REF_ELEM, cta, REF_CTAS, &lo, &hi);
  ref_put_signal(heap + REF_W_RECV + me * REF_P_CAP * REF_ELEM + lo,
                 send + peer * REF_P_CAP * REF_ELEM + lo, hi - lo, mine, peer);
  // my own part, while the peers' data comes: every CTA of the grid copies its slice
  ref_slice(static_cast<uint64_t>(count[1]) * REF_ELEM, blockIdx.x, gridDim.x, &lo, &hi);
  ref_copy(heap + REF_W_RECV + me * REF_P_CAP * REF_ELEM + lo,
           send + me * REF_P_CAP * REF_ELEM + lo, hi - lo, threadIdx.x, blockDim.x);
  if (blockIdx.x == 0 && threadIdx.x == 0)
    reinterpret_cast<int32_t*>(heap + REF_W_GOT)[me] = count[1];
  if (threadIdx.x == 0) {
    ref_wait(ref_slot(heap, peer, cta), 2 * epoch + 2);
    if (!nvshmem_ptr(heap, peer)) nvshmem_quiet();  // my puts have read `send`
  }
  __syncthreads();
}
