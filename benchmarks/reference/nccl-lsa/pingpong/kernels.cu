// Hand-written reference for protocols/pingpong.cco on nccl-lsa (benchmarks/reference/README.md).
// Rank 0 stores `ping` into rank 1's `ping` and signals; rank 1 waits, stores its `ping` into
// rank 0's `pong` and signals back; `rounds` times.  Small messages: one warp, thread 0
// stores and signals.  Rank 0's CTA 0 reads %globaltimer around the rounds and accumulates
// the nanoseconds and the number of one-way trips at REF_SCRATCH + 8 / + 16: the one-way
// put + signal latency measured in-kernel, without launch overhead.
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

extern "C" __global__ void __launch_bounds__(REF_THREADS)
ref_pingpong(ncclDevComm dc, ncclWindow_t win, uint64_t, ccogen_debug_record*) {
  char* heap = static_cast<char*>(ncclGetLocalPointer(win, 0));
  const uint64_t epoch = ref_epoch(heap);
  const int me = dc.lsaRank, peer = 1 - me;
  const uint64_t base = epoch * REF_P_ROUNDS;
  uint64_t lo, hi;
  ref_slice(REF_P_SIZE, blockIdx.x, gridDim.x, &lo, &hi);
  // The protocol sends the whole message back once it has arrived: every CTA adds 1 to
  // one slot on the peer, and each waits for all of them (gridDim.x per round).
  char* to_peer = ref_peer(win, ref_slot(me, 0), peer);
  char* mine = heap + ref_slot(peer, 0);
  const uint64_t per_round = gridDim.x;
  if (me == 0) {
    char* dst = ref_peer(win, REF_W_PING + lo, peer);
    const char* src = heap + REF_W_PING + lo;
    const uint64_t t0 = ref_now();
    for (uint64_t r = 0; r < REF_P_ROUNDS; ++r) {
      ref_copy(dst, src, hi - lo, threadIdx.x, blockDim.x);
      __syncthreads();
      if (threadIdx.x == 0) {
        ref_signal(to_peer);
        ref_wait(mine, (base + r + 1) * per_round);
      }
      __syncthreads();
    }
    if (threadIdx.x == 0 && blockIdx.x == 0) {
      uint64_t* timer = reinterpret_cast<uint64_t*>(heap + REF_SCRATCH + 8);
      timer[0] += ref_now() - t0;
      timer[1] += 2 * REF_P_ROUNDS;
    }
  } else {
    char* dst = ref_peer(win, REF_W_PONG + lo, peer);
    const char* src = heap + REF_W_PING + lo;
    for (uint64_t r = 0; r < REF_P_ROUNDS; ++r) {
      if (threadIdx.x == 0) ref_wait(mine, (base + r + 1) * per_round);
      __syncthreads();
      ref_copy(dst, src, hi - lo, threadIdx.x, blockDim.x);
      __syncthreads();
      if (threadIdx.x == 0) ref_signal(to_peer);
    }
  }
}
