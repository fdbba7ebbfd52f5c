// hang.cco on nvshmem, written by hand: every rank waits for a signal nobody sends.
#include <nvshmem.h>
#include <nvshmemx.h>
// ---- shared test support: kernels.cu must be self-contained, like generated code ----
#include <stdint.h>

#ifndef CCOGEN_TIMEOUT_CYCLES
#define CCOGEN_TIMEOUT_CYCLES 4000000000ULL  // about 2 s
#endif

struct ccogen_debug_record {
  uint32_t hit;
  int32_t rank, line, src, queue, kind;
  uint64_t expected, observed, epoch, reserved[2];
};

// Spin until *slot >= target (acquire); debug builds give up after CCOGEN_TIMEOUT_CYCLES and
// report (rank, line, src, queue) in the record before trapping.
__device__ __forceinline__ void test_wait(volatile uint64_t* slot, uint64_t target,
                                          ccogen_debug_record* dbg, int rank, int line,
                                          int src, int queue, uint64_t epoch) {
#ifdef CCOGEN_DEBUG
  const long long start = clock64();
#endif
  uint64_t seen;
  while ((seen = *slot) < target) {
#ifdef CCOGEN_DEBUG
    if ((uint64_t)(clock64() - start) > CCOGEN_TIMEOUT_CYCLES) {
      if (dbg != nullptr && atomicCAS(&dbg->hit, 0u, 1u) == 0u) {
        volatile ccogen_debug_record* r = dbg;
        r->rank = rank; r->line = line; r->src = src; r->queue = queue; r->kind = 1;
        r->expected = target; r->observed = seen; r->epoch = epoch;
        __threadfence_system();
      }
      __trap();
    }
#endif
  }
  __threadfence();
}

__device__ __forceinline__ void test_copy(char* dst, const char* src, uint64_t bytes) {
  // this CTA's share of `bytes`, 16-byte vectors (sizes are multiples of 16 * gridDim.x)
  const uint64_t share = bytes / gridDim.x;
  const int4* s = reinterpret_cast<const int4*>(src + blockIdx.x * share);
  int4* d = reinterpret_cast<int4*>(dst + blockIdx.x * share);
  for (uint64_t i = threadIdx.x; i < share / 16; i += blockDim.x) d[i] = s[i];
}

#define SIG_OFF 256ull

extern "C" __global__ void hang(char* heap, uint64_t epoch, ccogen_debug_record* dbg) {
  const int me = nvshmem_my_pe(), peer = 1 - me;
  if (threadIdx.x == 0) {
    // hang.cco:7
    test_wait(reinterpret_cast<volatile uint64_t*>(heap + SIG_OFF) + peer, epoch + 1, dbg, me,
              7, peer, 0, epoch);
  }
}
