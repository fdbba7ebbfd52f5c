// Hand-written reference for protocols/moe_combine.cco on nccl-lsa
// (benchmarks/reference/README.md).  A call combines the caller's first `ntok[0]` tokens
// (read on the device each launch; `tokens` is the capacity the grid is sized from).  Token
// t belongs to CTA t % gridDim.x on every rank, so the tokens of any count spread over the
// whole grid and CTA c waits only for CTA c of each peer.  "Ready": CTA c writes my count
// into its count slot on every peer and adds 1 to its signal slot there (a release add
// after the count, target 2e+1), then waits for theirs: each peer's caller wrote its
// `topk_rank` and `ntok`, and its `back` rows of CTA c's tokens are free.  The rows back:
// the CTA's (token, rank, chunk) items of every rank p's tokens below p's count go over its
// warps; an item reads p's k routing entries of its token (a lane each, through its LSA pointer)
// and, if one names me, stores its chunk of my expert output row `p * tokens + t` into p's
// `back` row `me * tokens + t` (16-byte vectors, 8 loads in flight per lane; a row is cut
// into chunks only when the CTA has fewer rows than warps).  "Landed": CTA c adds 1 to its
// slot on every peer (a release add after the CTA's stores and its reads of the peer's
// routing: also the protocol's "done reading", target 2e+2) and waits for the same from
// every peer's CTA c.  Last it sums, for each of my tokens of its share below my count,
// the rows of the ranks the token went to, weighted with the sum of the token's top-k
// weights on that rank, in rank order in f32, rounded once into the caller's `y` (rows
// of `y` past the count are not written).  A rank the token did not go to has weight 0 and is
// skipped, so its stale row is never read and `zeros` is not needed.  Back to back by
// these credits as the generated kernel (no barrier): a peer's count slot is rewritten
// only after its reader's "landed" add, which comes after the read.  The launch rule
// counts tokens: `bytes_per_cta` is tokens per CTA, `small_max` 0.  Sizes, offsets and the
// element type are macros from the manifest's nvcc_flags (ccogen/bench/reference.py).
#include <nccl.h>
#include <nccl_device.h>
#include <stdint.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
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

// The element type of `back` and `y` (REF_T_BACK = REF_<DTYPE>; DTYPE_CODES in
// ccogen/bench/reference.py).
#define REF_F16 6
#define REF_BF16 7
#define REF_F32 8
#if REF_T_BACK == REF_BF16
typedef __nv_bfloat16 ref_t;
#elif REF_T_BACK == REF_F16
typedef __half ref_t;
#elif REF_T_BACK == REF_F32
typedef float ref_t;
#else
#error "the moe_combine reference sums bf16, f16 and f32 rows"
#endif
__device__ __forceinline__ float ref_up(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float ref_up(__half v) { return __half2float(v); }
__device__ __forceinline__ float ref_up(float v) { return v; }
template <typename T> __device__ __forceinline__ T ref_down(float a);
template <> __device__ __forceinline__ __nv_bfloat16 ref_down<__nv_bfloat16>(float a) {
  return __float2bfloat16_rn(a);
}
template <> __device__ __forceinline__ __half ref_down<__half>(float a) { return __float2half_rn(a); }
template <> __device__ __forceinline__ float ref_down<float>(float a) { return a; }

// The target's signals for the combine below (slot offsets are the same on every rank).
__device__ __forceinline__ uint64_t ref_slot_at(int src, int cta) { return ref_slot(src, cta); }
__device__ __forceinline__ void ref_credit(char* word) { ref_signal(word); }
__device__ __forceinline__ void ref_await(char* word, uint64_t target) { ref_wait(word, target); }

#define REF_ROW (REF_S_BACK / (REF_NRANKS * REF_P_TOKENS))  // bytes of one row
#define REF_E (16 / sizeof(ref_t))                        // elements per 16-byte vector
static_assert(REF_ROW % 16 == 0, "rows are whole 16-byte vectors");
// The counts the "ready" credits carry, [src][cta] u64 words after the signal slots (the
// rule's 64 KiB of scratch holds both tables up to 31 ranks).
#define REF_COUNTS (REF_SLOTS + static_cast<uint64_t>(REF_NRANKS) * REF_MAX_CTAS * 8ULL)
static_assert(256 + 2 * REF_NRANKS * REF_MAX_CTAS * 8 <= 65536, "the counts fit the scratch");

__device__ __forceinline__ uint64_t ref_count_slot(int src, int cta) {
  return REF_COUNTS + (static_cast<uint64_t>(src) * REF_MAX_CTAS + cta) * 8ULL;
}

// ---- combine schedule (host and device: tests/bench/test_reference.py runs it on the CPU) ----
// A row is cut into at most this many chunks (at least 4 KiB each: one pass of a warp's 8
// vectors in flight) when a CTA has fewer (token, rank) rows than warps; the sums' chunks
// are at least 2 KiB (one pass of its 4 vectors of every source).
#define REF_COPY_CHUNKS (REF_ROW >= 8192 ? REF_ROW / 4096 : 1)
#define REF_SUM_CHUNKS (REF_ROW >= 4096 ? REF_ROW / 2048 : 1)

// How many of the first `count` tokens CTA `cta` of `ctas` owns (token t is CTA t % ctas's,
// on every rank: the tokens of a small count still spread over the whole grid).
__host__ __device__ __forceinline__ uint64_t ref_share(uint64_t count, uint64_t cta, uint64_t ctas) {
  return count > cta ? (count - cta - 1) / ctas + 1 : 0;
}

// Pieces per row for `items` rows over `warps` warps: enough to busy every warp, at most
// `most`.
__host__ __device__ __forceinline__ uint64_t ref_pieces(uint64_t items, uint64_t warps, uint64_t most) {
  const uint64_t x = items == 0 ? 1 : warps / items;
  return x < 1 ? 1 : x > most ? most : x;
}

// [lo, hi) of piece `part` of `parts` of a row: 16-byte aligned (as ref_slice).
__host__ __device__ __forceinline__ void ref_piece(uint64_t part, uint64_t parts, uint64_t* lo,
                                                   uint64_t* hi) {
  const uint64_t per = ((REF_ROW + parts - 1) / parts + 15) / 16 * 16;
  *lo = per * part < REF_ROW ? per * part : REF_ROW;
  *hi = *lo + per < REF_ROW ? *lo + per : REF_ROW;
}

// Item j of CTA `cta`'s rows back (`chunks` pieces a row; share[p] of rank p's tokens):
// rank p (me first, then the peers in ring order), token t, bytes [lo, hi) of the row.
__host__ __device__ __forceinline__ void ref_row_item(uint64_t j, uint64_t chunks, const uint64_t* share,
                                                      int me, int cta, int ctas, int* p, uint64_t* t,
                                                      uint64_t* lo, uint64_t* hi) {
  uint64_t u = j / chunks;
  *p = me;
  for (int s = 0; s < REF_NRANKS; ++s) {
    *p = (me + s) % REF_NRANKS;
    if (u < share[*p]) break;
    u -= share[*p];
  }
  *t = cta + u * ctas;
  ref_piece(j % chunks, chunks, lo, hi);
}

// Item j of CTA `cta`'s sums (`parts` pieces a row): my token t, bytes [lo, hi) of its row.
__host__ __device__ __forceinline__ void ref_sum_item(uint64_t j, uint64_t parts, int cta, int ctas,
                                                      uint64_t* t, uint64_t* lo, uint64_t* hi) {
  *t = cta + (j / parts) * ctas;
  ref_piece(j % parts, parts, lo, hi);
}
// ---- end of the combine schedule ----

// y_row[v0, v1) (16-byte vectors) := sum over ranks p with w[p] != 0 (in rank order) of
// w[p] * rows[p], by the 32 lanes of a warp: 4 vectors of every such row in flight per
// lane, f32 accumulation.
__device__ __forceinline__ void ref_weighted_row(ref_t* y_row, const char* const* rows, const float* w,
                                                 uint64_t v0, uint64_t v1, int lane) {
  constexpr uint64_t U = 4;
  for (uint64_t i = v0 + lane; i < v1; i += U * 32) {
    float acc[U][REF_E];
#pragma unroll
    for (uint64_t u = 0; u < U; ++u)
#pragma unroll
      for (uint64_t e = 0; e < REF_E; ++e) acc[u][e] = 0.0f;
#pragma unroll
    for (int p = 0; p < REF_NRANKS; ++p) {
      if (w[p] == 0.0f) continue;
      uint4 v[U];
#pragma unroll
      for (uint64_t u = 0; u < U; ++u)
        if (i + u * 32 < v1) v[u] = reinterpret_cast<const uint4*>(rows[p])[i + u * 32];
#pragma unroll
      for (uint64_t u = 0; u < U; ++u)
#pragma unroll
        for (uint64_t e = 0; e < REF_E; ++e)
          acc[u][e] += w[p] * ref_up(reinterpret_cast<const ref_t*>(&v[u])[e]);
    }
#pragma unroll
    for (uint64_t u = 0; u < U; ++u) {
      if (i + u * 32 >= v1) break;
      uint4 r;
#pragma unroll
      for (uint64_t e = 0; e < REF_E; ++e) reinterpret_cast<ref_t*>(&r)[e] = ref_down<ref_t>(acc[u][e]);
      reinterpret_cast<uint4*>(y_row)[i + u * 32] = r;
    }
  }
}

// The combine once every rank's heap is known (`heap_of[p]`; mine is `heap`): `ntok` is
// the caller's count.  ref_slot_at, ref_credit and ref_await are the target's.
__device__ __forceinline__ void ref_combine(char* heap, char* const* heap_of, uint64_t epoch,
                                            int me, const float* topk_weight, ref_t* y,
                                            const int32_t* ntok) {
  const int cta = blockIdx.x;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  __shared__ uint64_t count_of[REF_NRANKS];  // each rank's count (mine from `ntok`)
  if (threadIdx.x == 0) {
    const int32_t n = ntok[0];  // `require`: 0 <= n <= tokens (clamped all the same)
    count_of[me] = n < 0 ? 0ULL : (static_cast<uint64_t>(n) < REF_P_TOKENS ? static_cast<uint64_t>(n) : REF_P_TOKENS);
  }
  __syncthreads();
  // "ready" to every peer's CTA `cta`: my count into its count slot, then a release add on
  // my signal slot there (target 2e+1).  My caller wrote `topk_rank` and `ntok`, and my
  // `back` rows of this CTA's tokens are free (my last launch's reduce of them is done).
  if (threadIdx.x < REF_NRANKS && threadIdx.x != me) {
    char* there = heap_of[threadIdx.x];
    cuda::atomic_ref<uint64_t, cuda::thread_scope_system> count(
        *reinterpret_cast<uint64_t*>(there + ref_count_slot(me, cta)));
    count.store(count_of[me], cuda::memory_order_relaxed);
    ref_credit(there + ref_slot_at(me, cta));  // release: after the count, by the same thread
  }
  if (threadIdx.x == 0)
    for (int p = 0; p < REF_NRANKS; ++p)
      if (p != me) ref_await(heap + ref_slot_at(p, cta), 2 * epoch + 1);
  __syncthreads();
  if (threadIdx.x < REF_NRANKS && threadIdx.x != me)
    count_of[threadIdx.x] = *reinterpret_cast<volatile uint64_t*>(heap + ref_count_slot(threadIdx.x, cta));
  __syncthreads();
  // The rows back: (token, rank, chunk) items of this CTA's tokens over its warps, rank p's
  // tokens to p's count; each item reads p's k routing entries of its token (a lane each,
  // through p's pointer) and, if one names me, stores its chunk of my expert output row
  // `p * tokens + t` into p's `back` row `me * tokens + t` (16-byte vectors, 8 in flight).
  uint64_t share[REF_NRANKS], pairs = 0;
#pragma unroll
  for (int p = 0; p < REF_NRANKS; ++p) {
    share[p] = ref_share(count_of[p], cta, gridDim.x);
    pairs += share[p];
  }
  const uint64_t chunks = ref_pieces(pairs, warps, REF_COPY_CHUNKS);
  for (uint64_t j = warp; j < pairs * chunks; j += warps) {
    int p;
    uint64_t t, lo, hi;
    ref_row_item(j, chunks, share, me, cta, gridDim.x, &p, &t, &lo, &hi);
    const int32_t* route = reinterpret_cast<const int32_t*>(heap_of[p] + REF_W_TOPK_RANK) + t * REF_P_K;
    bool mine = false;
    for (uint64_t i = lane; i < REF_P_K; i += 32) mine = mine || route[i] == me;
    if (!__any_sync(0xffffffffu, mine)) continue;
    ref_copy(heap_of[p] + REF_W_BACK + (static_cast<uint64_t>(me) * REF_P_TOKENS + t) * REF_ROW + lo,
             heap + REF_W_EXPERT_OUT + (static_cast<uint64_t>(p) * REF_P_TOKENS + t) * REF_ROW + lo,
             hi - lo, lane, 32);
  }
  // "landed" (and "done reading"): a release add after the CTA's rows and its reads of the
  // peer's `topk_rank` (target 2e+2); the same from every peer's CTA `cta` before my sums.
  __syncthreads();
  if (threadIdx.x < REF_NRANKS && threadIdx.x != me) ref_credit(heap_of[threadIdx.x] + ref_slot_at(me, cta));
  if (threadIdx.x == 0)
    for (int p = 0; p < REF_NRANKS; ++p)
      if (p != me) ref_await(heap + ref_slot_at(p, cta), 2 * epoch + 2);
  __syncthreads();
  // The sums: (token, chunk) items of my tokens of this CTA, to my count.  A rank the token
  // did not go to has weight 0 and is skipped: its stale row is never read, `zeros` unused.
  const uint64_t mine_n = share[me];
  const uint64_t parts = ref_pieces(mine_n, warps, REF_SUM_CHUNKS);
  for (uint64_t j = warp; j < mine_n * parts; j += warps) {
    uint64_t t, lo, hi;
    ref_sum_item(j, parts, cta, gridDim.x, &t, &lo, &hi);
    const int32_t* route = reinterpret_cast<const int32_t*>(heap + REF_W_TOPK_RANK) + t * REF_P_K;
    float w[REF_NRANKS];  // the token's weight on each rank, in top-k order (every lane alike)
    const char* rows[REF_NRANKS];
#pragma unroll
    for (int p = 0; p < REF_NRANKS; ++p) {
      w[p] = 0.0f;
      rows[p] = heap + REF_W_BACK + (static_cast<uint64_t>(p) * REF_P_TOKENS + t) * REF_ROW;
    }
    for (uint64_t i = 0; i < REF_P_K; ++i) {
      const int32_t r = route[i];
      const float wi = topk_weight[t * REF_P_K + i];
#pragma unroll
      for (int p = 0; p < REF_NRANKS; ++p) w[p] += r == p ? wi : 0.0f;
    }
    ref_weighted_row(y + t * (REF_ROW / sizeof(ref_t)), rows, w, lo / 16, hi / 16, lane);
  }
}

extern "C" __global__ void __launch_bounds__(REF_THREADS)
ref_moe_combine(ncclDevComm dc, ncclWindow_t win, uint64_t, ccogen_debug_record*,
                const float* topk_weight, const char*, ref_t* y, const int32_t* ntok) {
  char* heap = static_cast<char*>(ncclGetLocalPointer(win, 0));
  const uint64_t epoch = ref_epoch(heap);
  const int me = dc.lsaRank;
  __shared__ char* heap_of[REF_NRANKS];  // every rank's heap (LSA pointers)
  if (threadIdx.x < REF_NRANKS)
    heap_of[threadIdx.x] = static_cast<int>(threadIdx.x) == me ? heap : ref_peer(win, 0, threadIdx.x);
  __syncthreads();
  ref_combine(heap, heap_of, epoch, me, topk_weight, y, ntok);
}
