// flag_latency.cu -- one-way latency of a small "put + signal" between two
// NVLink-connected GPUs (written for 2x H200, sm_90), under several ways of
// ordering the payload store before the signal.
//
// Build and run (one process drives both GPUs; whole run takes well under 20 s):
//   nvcc -O3 -std=c++17 -arch=sm_90 -o /tmp/flag_latency benchmarks/latency/flag_latency.cu
//   /tmp/flag_latency
//
// Method. Peer access is enabled both ways; each GPU owns a small zeroed buffer
// (data word, flag word, 16-byte LL slot, 16-byte data+flag pair), and each
// kernel gets its local buffer and the peer's. GPU1's kernel is launched first,
// then GPU0's; both are one block whose thread 0 runs a ping-pong: for rounds
// r = 1..W+R, GPU0 puts an 8-byte payload derived from r into GPU1's buffer and
// signals; GPU1 waits, checks the payload and puts + signals back the same way;
// GPU0 waits and checks. Flags carry the round number (monotonic, never reset),
// so the waiter spins until flag >= r (== r for LL16). GPU0 reads %globaltimer
// after W warm-up rounds and after the last round; one-way latency =
// elapsed / (2 R). Each side counts payload mismatches. Waits are bounded by a
// ~2 s deadline so a broken variant reports TIMEOUT instead of hanging.
// The waiter side is the same for every flag variant (acquire spin at system
// scope), so differences between lines come from the signalling side.
//
// Variants:
//   V0 flag-only       no data; relaxed sys-scope store of r (floor: store + spin)
//   V1 fence+add       data; __threadfence_system(); fetch_add(1, release) at sys scope
//   V2 release-store   data; store(r, release) at sys scope
//   V3 release-red     data; red.release.sys.global.add.u64
//   V4 gpu-fence       data; __threadfence() (gpu scope); relaxed sys store of r
//   V5 LL16            one 16-byte st.volatile.v2.u64 {payload, r}; waiter spins on
//                      ld.volatile.v2.u64 and checks the payload of that same load
//   V6 fence.acq_rel   data; fence.acq_rel.sys; relaxed sys store of r
//   V7 same-16B        payload then relaxed flag store to the adjacent 8-byte word
//                      of one 16-byte slot, no fence
// V4 and V7 are NOT valid orderings under the PTX memory model (V4's fence has
// gpu scope only, V7 has no fence at all); V5 relies on a 16-byte vector store
// being seen whole, which PTX does not promise either. They are measured only to
// bound what the hardware does; their mismatch counts are the interesting part.
#include <cuda/atomic>
#include <cuda_runtime.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#define CK(call)                                                                    \
  do {                                                                              \
    cudaError_t e_ = (call);                                                        \
    if (e_ != cudaSuccess) {                                                        \
      fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,          \
              cudaGetErrorString(e_));                                              \
      exit(1);                                                                      \
    }                                                                               \
  } while (0)

typedef unsigned long long u64;
constexpr u64 kWarmup = 200, kRounds = 2000;
constexpr u64 kTimeoutNs = 2000000000ull;   // per kernel, from its start
constexpr int kNumVariants = 8;
constexpr size_t kBufBytes = 4096;
static const char* kNames[kNumVariants] = {
    "V0 flag-only",        "V1 fence+atomic-add (current)", "V2 release-store",
    "V3 release-red",      "V4 gpu-fence+relaxed (INVALID)", "V5 LL16",
    "V6 fence.acq_rel.sys+relaxed", "V7 data+flag same 16B (INVALID)"};

// Layout of each GPU's buffer; data and flag live in different 128-byte lines.
struct Buf {
  alignas(128) u64 data;
  alignas(128) u64 flag;
  alignas(128) u64 ll[2];    // V5: {payload, round}
  alignas(128) u64 pair[2];  // V7: {payload, round}
};
static_assert(sizeof(Buf) <= kBufBytes, "buffer too small");

struct Result {
  u64 elapsed_ns;   // GPU0 only
  u64 mismatches;
  u64 timed_out;
  u64 rounds_done;
};

using sys_ref = cuda::atomic_ref<u64, cuda::thread_scope_system>;

__device__ __forceinline__ u64 gtimer() {
  u64 t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Payload for round r sent by side `side` (0 or 1): distinct per side and round.
__device__ __forceinline__ u64 payload_of(int side, u64 r) {
  return ((u64)(0xA0 + side) << 56) | (0x1000 + r);
}

template <int V>
__device__ __forceinline__ void put_signal(Buf* peer, u64 r, u64 payload) {
  if constexpr (V == 5) {
    asm volatile("st.volatile.global.v2.u64 [%0], {%1, %2};"
                 :: "l"(peer->ll), "l"(payload), "l"(r) : "memory");
    return;
  } else if constexpr (V == 7) {
    *(volatile u64*)&peer->pair[0] = payload;
    sys_ref(peer->pair[1]).store(r, cuda::memory_order_relaxed);
    return;
  } else {
    if constexpr (V != 0) *(volatile u64*)&peer->data = payload;
    if constexpr (V == 0) {
      sys_ref(peer->flag).store(r, cuda::memory_order_relaxed);
    } else if constexpr (V == 1) {
      __threadfence_system();
      sys_ref(peer->flag).fetch_add(1, cuda::memory_order_release);
    } else if constexpr (V == 2) {
      sys_ref(peer->flag).store(r, cuda::memory_order_release);
    } else if constexpr (V == 3) {
      asm volatile("red.release.sys.global.add.u64 [%0], 1;" :: "l"(&peer->flag) : "memory");
    } else if constexpr (V == 4) {
      __threadfence();
      sys_ref(peer->flag).store(r, cuda::memory_order_relaxed);
    } else if constexpr (V == 6) {
      asm volatile("fence.acq_rel.sys;" ::: "memory");
      sys_ref(peer->flag).store(r, cuda::memory_order_relaxed);
    }
  }
}

// Returns 0 on success, 1 on payload mismatch, -1 on timeout.
template <int V>
__device__ __forceinline__ int wait_check(Buf* local, u64 r, u64 expected, u64 deadline) {
  unsigned it = 0;
  if constexpr (V == 5) {
    u64 a, b;
    for (;;) {
      asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];"
                   : "=l"(a), "=l"(b) : "l"(local->ll) : "memory");
      if (b == r) break;
      if ((++it & 1023u) == 0 && gtimer() > deadline) return -1;
    }
    return a == expected ? 0 : 1;
  } else {
    u64* f = (V == 7) ? &local->pair[1] : &local->flag;
    while (sys_ref(*f).load(cuda::memory_order_acquire) < r)
      if ((++it & 1023u) == 0 && gtimer() > deadline) return -1;
    if constexpr (V == 0) return 0;
    u64 got = (V == 7) ? *(volatile u64*)&local->pair[0] : *(volatile u64*)&local->data;
    return got == expected ? 0 : 1;
  }
}

template <int V>
__global__ void pingpong(Buf* local, Buf* peer, int side, Result* res) {
  if (threadIdx.x != 0) return;
  const u64 deadline = gtimer() + kTimeoutNs;
  u64 mism = 0, t0 = 0, r = 1, timed_out = 0;
  for (; r <= kWarmup + kRounds; ++r) {
    if (side == 0) {
      if (r == kWarmup + 1) t0 = gtimer();
      put_signal<V>(peer, r, payload_of(0, r));
      int s = wait_check<V>(local, r, payload_of(1, r), deadline);
      if (s < 0) { timed_out = 1; break; }
      mism += s;
    } else {
      int s = wait_check<V>(local, r, payload_of(0, r), deadline);
      if (s < 0) { timed_out = 1; break; }
      mism += s;
      put_signal<V>(peer, r, payload_of(1, r));
    }
  }
  const u64 t1 = gtimer();
  res->elapsed_ns = (side == 0) ? t1 - t0 : 0;
  res->mismatches = mism;
  res->timed_out = timed_out;
  res->rounds_done = r - 1;
}

typedef void (*Kernel)(Buf*, Buf*, int, Result*);
static const Kernel kKernels[kNumVariants] = {pingpong<0>, pingpong<1>, pingpong<2>,
                                              pingpong<3>, pingpong<4>, pingpong<5>,
                                              pingpong<6>, pingpong<7>};

int main() {
  int ndev = 0;
  CK(cudaGetDeviceCount(&ndev));
  if (ndev < 2) { fprintf(stderr, "need 2 GPUs, found %d\n", ndev); return 1; }
  for (int d = 0; d < 2; ++d) {
    int can = 0;
    CK(cudaDeviceCanAccessPeer(&can, d, 1 - d));
    if (!can) { fprintf(stderr, "GPU%d cannot access GPU%d as a peer\n", d, 1 - d); return 1; }
    cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, d));
    printf("# GPU%d: %s (sm_%d%d)\n", d, p.name, p.major, p.minor);
  }

  Buf* buf[2];
  Result* res[2];
  cudaStream_t stream[2];
  for (int d = 0; d < 2; ++d) {
    CK(cudaSetDevice(d));
    CK(cudaDeviceEnablePeerAccess(1 - d, 0));
    CK(cudaMalloc(&buf[d], kBufBytes));
    CK(cudaMalloc(&res[d], sizeof(Result)));
    CK(cudaStreamCreateWithFlags(&stream[d], cudaStreamNonBlocking));
  }
  printf("# one-way latency = GPU0 elapsed / (2 * %llu rounds), after %llu warm-up rounds\n",
         kRounds, kWarmup);

  for (int v = 0; v < kNumVariants; ++v) {
    for (int d = 0; d < 2; ++d) {
      CK(cudaSetDevice(d));
      CK(cudaMemset(buf[d], 0, kBufBytes));
      CK(cudaMemset(res[d], 0, sizeof(Result)));
      CK(cudaDeviceSynchronize());
    }
    for (int d = 1; d >= 0; --d) {  // responder (GPU1) first
      CK(cudaSetDevice(d));
      kKernels[v]<<<1, 32, 0, stream[d]>>>(buf[d], buf[1 - d], d, res[d]);
      CK(cudaGetLastError());
    }
    Result h[2];
    for (int d = 0; d < 2; ++d) {
      CK(cudaSetDevice(d));
      CK(cudaStreamSynchronize(stream[d]));
      CK(cudaMemcpy(&h[d], res[d], sizeof(Result), cudaMemcpyDeviceToHost));
    }
    if (h[0].timed_out || h[1].timed_out) {
      printf("%-34s TIMEOUT (rounds done: gpu0=%llu gpu1=%llu)   mismatches gpu0=%llu gpu1=%llu\n",
             kNames[v], h[0].rounds_done, h[1].rounds_done, h[0].mismatches, h[1].mismatches);
    } else {
      double us = (double)h[0].elapsed_ns / (2.0 * kRounds) / 1000.0;
      printf("%-34s one-way %8.3f us   mismatches gpu0=%llu gpu1=%llu\n", kNames[v], us,
             h[0].mismatches, h[1].mismatches);
    }
    fflush(stdout);
  }
  for (int d = 0; d < 2; ++d) {
    CK(cudaSetDevice(d));
    CK(cudaStreamDestroy(stream[d]));
    CK(cudaFree(buf[d]));
    CK(cudaFree(res[d]));
  }
  return 0;
}
