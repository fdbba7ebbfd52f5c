// Hand-written reference for protocols/allreduce_oneshot.cco on nvshmem
// (benchmarks/reference/README.md).  CTA c owns slice c of the elements on every PE.  It
// tells CTA c of every peer that this PE's `x` is ready (a release add on its own slot
// there, through nvshmem_ptr) and waits for theirs; then it loads slice c of every PE's
// `x` straight over the link (nvshmem_ptr pointers: `team lsa` guarantees them; 16-byte
// loads, 16 in flight per thread), sums them in PE order (f32 for bf16/f16, rounded once)
// into the caller's `out`, and tells the peers' CTA c it is done reading their `x`,
// waiting for the same from them before it returns (the protocol's second barrier).  Two
// signals per slot per launch: targets 2e+1 and 2e+2.  Sizes, offsets and the element
// type are macros from the manifest's nvcc_flags (ccogen/bench/reference.py).
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
#include <cuda_bf16.h>
#include <cuda_fp16.h>
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

// ---- reduction support (the same in every allreduce reference; kernels.cu is self-contained) ----
// Element types by number (REF_T_<NAME> = REF_<DTYPE> from the manifest's nvcc_flags;
// ccogen/bench/reference.py DTYPE_CODES).
#define REF_U8 1
#define REF_I32 2
#define REF_U32 3
#define REF_I64 4
#define REF_U64 5
#define REF_F16 6
#define REF_BF16 7
#define REF_F32 8
#define REF_FP8E4M3 9
#if REF_T_X == REF_BF16
typedef __nv_bfloat16 ref_t;
#elif REF_T_X == REF_F16
typedef __half ref_t;
#elif REF_T_X == REF_F32
typedef float ref_t;
#elif REF_T_X == REF_I32
typedef int32_t ref_t;
#elif REF_T_X == REF_U32
typedef uint32_t ref_t;
#elif REF_T_X == REF_I64
typedef int64_t ref_t;
#elif REF_T_X == REF_U64
typedef uint64_t ref_t;
#else
#error "the allreduce references sum bf16, f16, f32, i32, u32, i64 and u64 windows"
#endif

// Accumulation in f32 for f16/bf16, rounded once when stored (language v2 §2); other types
// in themselves (integers wrap).
template <typename T> struct ref_acc { typedef T type; };
template <> struct ref_acc<__nv_bfloat16> { typedef float type; };
template <> struct ref_acc<__half> { typedef float type; };
template <typename T> __device__ __forceinline__ T ref_up(T v) { return v; }
__device__ __forceinline__ float ref_up(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float ref_up(__half v) { return __half2float(v); }
template <typename T> __device__ __forceinline__ T ref_down(typename ref_acc<T>::type a) { return a; }
template <> __device__ __forceinline__ __nv_bfloat16 ref_down<__nv_bfloat16>(float a) {
  return __float2bfloat16_rn(a);
}
template <> __device__ __forceinline__ __half ref_down<__half>(float a) { return __float2half_rn(a); }

// The element-wise sum of NS 16-byte vectors, in source order.
template <typename T, int NS>
__device__ __forceinline__ uint4 ref_sum(const uint4 (&v)[NS]) {
  constexpr int E = 16 / sizeof(T);
  typename ref_acc<T>::type a[E];
#pragma unroll
  for (int e = 0; e < E; ++e) a[e] = ref_up(reinterpret_cast<const T*>(&v[0])[e]);
#pragma unroll
  for (int s = 1; s < NS; ++s)
#pragma unroll
    for (int e = 0; e < E; ++e) a[e] += ref_up(reinterpret_cast<const T*>(&v[s])[e]);
  uint4 r;
#pragma unroll
  for (int e = 0; e < E; ++e) reinterpret_cast<T*>(&r)[e] = ref_down<T>(a[e]);
  return r;
}

// Elements [lo, hi) of every dst[d] := src[0] + src[1] + ... + src[NS - 1] (in that order),
// by threads t of nt.  16-byte loads with 16 of them in flight per thread (16 / NS vectors
// of every source) when every pointer and lo allow, then the scalar tail.
template <typename T, int NS, int ND>
__device__ __forceinline__ void ref_reduce(T* const (&dst)[ND], const T* const (&src)[NS],
                                           uint64_t lo, uint64_t hi, uint64_t t, uint64_t nt) {
  constexpr int E = 16 / sizeof(T);
  constexpr int U = NS >= 16 ? 1 : 16 / NS;
  uintptr_t align = static_cast<uintptr_t>(lo * sizeof(T));
#pragma unroll
  for (int s = 0; s < NS; ++s) align |= reinterpret_cast<uintptr_t>(src[s]);
#pragma unroll
  for (int d = 0; d < ND; ++d) align |= reinterpret_cast<uintptr_t>(dst[d]);
  uint64_t done = lo;
  if ((align & 15) == 0) {
    const uint64_t nv = (hi - lo) / E;
    const uint4* s4[NS];
    uint4* d4[ND];
#pragma unroll
    for (int s = 0; s < NS; ++s) s4[s] = reinterpret_cast<const uint4*>(src[s] + lo);
#pragma unroll
    for (int d = 0; d < ND; ++d) d4[d] = reinterpret_cast<uint4*>(dst[d] + lo);
    uint64_t i = t;
    for (; i + (U - 1) * nt < nv; i += U * nt) {
      uint4 v[U][NS];
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int s = 0; s < NS; ++s) v[u][s] = s4[s][i + u * nt];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const uint4 r = ref_sum<T, NS>(v[u]);
#pragma unroll
        for (int d = 0; d < ND; ++d) d4[d][i + u * nt] = r;
      }
    }
    for (; i < nv; i += nt) {
      uint4 v[NS];
#pragma unroll
      for (int s = 0; s < NS; ++s) v[s] = s4[s][i];
      const uint4 r = ref_sum<T, NS>(v);
#pragma unroll
      for (int d = 0; d < ND; ++d) d4[d][i] = r;
    }
    done = lo + nv * E;
  }
  for (uint64_t i = done + t; i < hi; i += nt) {
    typename ref_acc<T>::type a = ref_up(src[0][i]);
#pragma unroll
    for (int s = 1; s < NS; ++s) a += ref_up(src[s][i]);
#pragma unroll
    for (int d = 0; d < ND; ++d) dst[d][i] = ref_down<T>(a);
  }
}
// ---- end of the reduction support ----

// +1 on my slot at CTA `cta` of every peer (the whole CTA calls), then thread 0 waits
// until every peer's CTA `cta` has signalled `target` times here.
__device__ __forceinline__ void ref_exchange(char* heap, int me, int cta, uint64_t target) {
  for (int p = 0; p < REF_NRANKS; ++p)
    if (p != me) ref_put_signal(heap, heap, 0, ref_slot(heap, me, cta), p);
  if (threadIdx.x == 0)
    for (int p = 0; p < REF_NRANKS; ++p)
      if (p != me) ref_wait(ref_slot(heap, p, cta), target);
  __syncthreads();
}

// `x` of PE p as a pointer to load from (`team lsa`: every peer has one).
__device__ __forceinline__ char* ref_lsa(char* local, int p) {
  char* ptr = static_cast<char*>(nvshmem_ptr(local, p));
  if (ptr == nullptr) __trap();  // not load/store reachable: not a `team lsa` instance
  return ptr;
}

extern "C" __global__ void __launch_bounds__(REF_THREADS)
ref_allreduce_oneshot(char* heap, uint64_t, ccogen_debug_record*, ref_t* out) {
  const uint64_t epoch = ref_epoch(heap);
  const int me = nvshmem_my_pe(), cta = blockIdx.x;
  ref_exchange(heap, me, cta, 2 * epoch + 1);  // every PE's `x` is written
  uint64_t lo, hi;
  ref_slice(REF_S_X, cta, gridDim.x, &lo, &hi);
  const ref_t* src[REF_NRANKS];
#pragma unroll
  for (int p = 0; p < REF_NRANKS; ++p)
    src[p] = reinterpret_cast<const ref_t*>(p == me ? heap + REF_W_X : ref_lsa(heap + REF_W_X, p));
  ref_t* const dst[1] = {out};
  ref_reduce<ref_t, REF_NRANKS, 1>(dst, src, lo / sizeof(ref_t), hi / sizeof(ref_t), threadIdx.x,
                                   blockDim.x);
  __syncthreads();
  ref_exchange(heap, me, cta, 2 * epoch + 2);  // nobody reads slice `cta` of `x` any more
}
