// Hand-written reference for protocols/alltoallv.cco on nccl-lsa (benchmarks/reference/README.md).
// One unit of CTAs per peer, sized from `cap` (the most a peer can get).  Each CTA reads the
// peer's count from the caller's `counts` once, tells its counterpart on the peer that this
// rank's `recv` and `got` are free (the protocol's barrier: +1 on its own slot there, a
// release add through the LSA pointer), waits for the peer's word, then stores its
// 16-byte-aligned slice of the `counts[peer]` elements straight into the peer's
// `recv[me * cap ...]` and adds 1 to the same slot after them; CTA 0 also writes `got[me]`
// there first.  Every CTA copies its slice of my own part locally.  Two signals per slot
// per launch: targets 2e+1 (free) and 2e+2 (landed).  Sizes and offsets are macros from the
// manifest's nvcc_flags (ccogen/bench/reference.py); the element size is
// REF_S_RECV / (REF_NRANKS * REF_P_CAP).
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

#define REF_ELEM (REF_S_RECV / (REF_NRANKS * REF_P_CAP))

extern "C" __global__ void __launch_bounds__(REF_THREADS)
ref_alltoallv(ncclDevComm dc, ncclWindow_t win, uint64_t, ccogen_debug_record*, const char* send,
              const int32_t* counts) {
  char* heap = static_cast<char*>(ncclGetLocalPointer(win, 0));
  const uint64_t epoch = ref_epoch(heap);
  const int me = dc.lsaRank;
  const int unit = blockIdx.x / REF_CTAS, cta = blockIdx.x % REF_CTAS;
  const int peer = (me + 1 + unit) % REF_NRANKS;
  __shared__ int32_t count[2];  // counts[peer], counts[me]: read once per launch
  if (threadIdx.x < 2) count[threadIdx.x] = counts[threadIdx.x == 0 ? peer : me];
  // the barrier: my `recv` and `got` are free for this peer's CTA `cta`, and its are for me
  if (threadIdx.x == 0) {
    ref_signal(ref_peer(win, ref_slot(me, cta), peer));
    ref_wait(heap + ref_slot(peer, cta), 2 * epoch + 1);
  }
  __syncthreads();
  // send[peer * cap + lo, + hi) of mine -> recv[me * cap + lo, + hi) of the peer, then +1
  uint64_t lo, hi;
  ref_slice(static_cast<uint64_t>(count[0]) * REF_ELEM, cta, REF_CTAS, &lo, &hi);
  ref_copy(ref_peer(win, REF_W_RECV + me * REF_P_CAP * REF_ELEM + lo, peer),
           send + peer * REF_P_CAP * REF_ELEM + lo, hi - lo, threadIdx.x, blockDim.x);
  if (cta == 0 && threadIdx.x == 0)
    *reinterpret_cast<int32_t*>(ref_peer(win, REF_W_GOT + me * sizeof(int32_t), peer)) = count[0];
  __syncthreads();
  if (threadIdx.x == 0) ref_signal(ref_peer(win, ref_slot(me, cta), peer));
  // my own part, while the peers' data comes: every CTA of the grid copies its slice
  ref_slice(static_cast<uint64_t>(count[1]) * REF_ELEM, blockIdx.x, gridDim.x, &lo, &hi);
  ref_copy(heap + REF_W_RECV + me * REF_P_CAP * REF_ELEM + lo,
           send + me * REF_P_CAP * REF_ELEM + lo, hi - lo, threadIdx.x, blockDim.x);
  if (blockIdx.x == 0 && threadIdx.x == 0)
    reinterpret_cast<int32_t*>(heap + REF_W_GOT)[me] = count[1];
  if (threadIdx.x == 0) ref_wait(heap + ref_slot(peer, cta), 2 * epoch + 2);
  __syncthreads();
}
