// copy_shape.cu -- how fast can one GPU's SMs (or its bulk-copy unit) write into a peer's
// memory over NVLink, by launch shape: the evidence for ccogen's launch shape for large
// copies (ccogen/codegen/backends/sm.py) and for the SM-store ceiling in docs/performance.md.
//
// Build and run (one process drives GPUs 0 and 1; peer access both ways):
//   nvcc -O3 -std=c++17 -arch=sm_90 -o /tmp/copy_shape benchmarks/copy/copy_shape.cu
//   /tmp/copy_shape sweep sm       # copy engine + SM-store kernels, every shape
//   /tmp/copy_shape sweep tma      # bulk-copy (TMA) kernels (a fault here spares the sm sweep)
//   /tmp/copy_shape one KERNEL BYTES GRID BLOCK [CHUNK STAGES]   # one shape, one way, for ncu
//
// Kernels (each copies BYTES from a local buffer into the peer's buffer):
//   slice   what generated code runs: CTA b copies the b-th contiguous 16-byte-aligned slice,
//           16-byte words, 8 loads in flight per thread (ccogen_copy_range in
//           templates/common/sm_device.cuh.j2, restated here)
//   stride  the issue's "naive SM-store copy": one grid-stride loop of 16-byte words
//   tma     thread 0 of each CTA moves its slice in CHUNK-byte pieces through shared memory
//           with the bulk-copy unit: cp.async.bulk global->shared (mbarrier, STAGES
//           buffers in flight), then cp.async.bulk shared->global into the peer
//   ce      cudaMemcpyPeerAsync (the copy engine)
// Each shape runs one way (GPU 0 -> 1) and both ways at once (0 -> 1 on GPU 0, 1 -> 0 on
// GPU 1; time = the slower GPU's).  A sample is K back-to-back copies between two events
// (K so that a sample lasts >= 5 ms); 2 warm-up samples, then the median of 5.
// Output: one line per shape: kernel, direction, bytes, grid, block, chunk, stages, GB/s
// per direction (1e9 B/s), and the copy engine's GB/s for the same bytes and direction.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

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

// ---------------------------------------------------------------- SM stores
__device__ __forceinline__ void copy16(char* dst, const char* src, u64 n, u64 t, u64 nt) {
  int4* d = reinterpret_cast<int4*>(dst);
  const int4* s = reinterpret_cast<const int4*>(src);
  const u64 n16 = n / 16;
  u64 i = t;
  for (; i + 7 * nt < n16; i += 8 * nt) {
    int4 v[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) v[k] = s[i + k * nt];
#pragma unroll
    for (int k = 0; k < 8; ++k) d[i + k * nt] = v[k];
  }
  for (; i < n16; i += nt) d[i] = s[i];
}

__device__ __forceinline__ u64 min_u64(u64 a, u64 b) { return a < b ? a : b; }

__device__ __forceinline__ void cta_slice(u64 n, u64* lo, u64* hi) {
  const u64 slice = ((n + gridDim.x - 1) / gridDim.x + 15) / 16 * 16;
  *lo = min_u64(slice * blockIdx.x, n);
  *hi = min_u64(*lo + slice, n);
}

__global__ void k_slice(char* dst, const char* src, u64 n) {
  u64 lo, hi;
  cta_slice(n, &lo, &hi);
  copy16(dst + lo, src + lo, hi - lo, threadIdx.x, blockDim.x);
}

__global__ void k_stride(char* dst, const char* src, u64 n) {
  int4* d = reinterpret_cast<int4*>(dst);
  const int4* s = reinterpret_cast<const int4*>(src);
  const u64 stride = static_cast<u64>(gridDim.x) * blockDim.x;
  for (u64 i = static_cast<u64>(blockIdx.x) * blockDim.x + threadIdx.x; i < n / 16; i += stride)
    d[i] = s[i];
}

// ---------------------------------------------------------------- bulk copy (TMA)
__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__global__ void k_tma(char* dst, const char* src, u64 n, unsigned chunk, unsigned stages) {
  extern __shared__ __align__(128) char buf[];
  __shared__ __align__(8) u64 bar[8];
  if (threadIdx.x != 0) return;
  u64 lo, hi;
  cta_slice(n, &lo, &hi);
  const u64 bytes = hi - lo;
  const u64 chunks = (bytes + chunk - 1) / chunk;
  for (unsigned s = 0; s < stages; ++s)
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(&bar[s])) : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  auto size_of = [&](u64 i) { return static_cast<unsigned>(min_u64(static_cast<u64>(chunk), bytes - i * chunk)); };
  auto load = [&](u64 i) {
    const unsigned s = i % stages, sz = size_of(i);
    asm volatile(
        "{ .reg .b64 st; mbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1; }" ::"r"(
            smem_addr(&bar[s])),
        "r"(sz)
        : "memory");
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::
            "r"(smem_addr(buf + static_cast<u64>(s) * chunk)),
        "l"(src + lo + i * chunk), "r"(sz), "r"(smem_addr(&bar[s]))
        : "memory");
  };
  auto wait = [&](u64 i) {
    const unsigned s = i % stages, parity = (i / stages) & 1;
    unsigned done = 0;
    while (!done)
      asm volatile(
          "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
          : "=r"(done)
          : "r"(smem_addr(&bar[s])), "r"(parity)
          : "memory");
  };
  for (u64 i = 0; i < min_u64(static_cast<u64>(stages), chunks); ++i) load(i);
  for (u64 i = 0; i < chunks; ++i) {
    wait(i);
    const unsigned s = i % stages;
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(
                     dst + lo + i * chunk),
                 "r"(smem_addr(buf + static_cast<u64>(s) * chunk)), "r"(size_of(i))
                 : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    if (i + stages < chunks) {
      // the stage is reused: its store must have read it
      asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
      load(i + stages);
    }
  }
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

// ---------------------------------------------------------------- driver
struct Shape {
  std::string kernel;
  unsigned grid = 0, block = 0, chunk = 0, stages = 0;
};

struct Gpu {
  int dev;
  char* src;
  char* dst;
  cudaStream_t stream;
  cudaEvent_t start, stop;
};

static Gpu g[2];

static void launch(const Shape& sh, int from, u64 n) {
  Gpu& a = g[from];
  Gpu& b = g[1 - from];
  CK(cudaSetDevice(a.dev));
  if (sh.kernel == "ce") {
    CK(cudaMemcpyPeerAsync(b.dst, b.dev, a.src, a.dev, n, a.stream));
  } else if (sh.kernel == "slice") {
    k_slice<<<sh.grid, sh.block, 0, a.stream>>>(b.dst, a.src, n);
  } else if (sh.kernel == "stride") {
    k_stride<<<sh.grid, sh.block, 0, a.stream>>>(b.dst, a.src, n);
  } else {
    const size_t smem = static_cast<size_t>(sh.chunk) * sh.stages;
    k_tma<<<sh.grid, sh.block, smem, a.stream>>>(b.dst, a.src, n, sh.chunk, sh.stages);
  }
  CK(cudaGetLastError());
}

// GB/s per direction: median over samples of (K copies / slower GPU's interval).
static double measure(const Shape& sh, u64 n, bool bidir) {
  const int dirs = bidir ? 2 : 1;
  const double est_ms = 3e-3 + n / 350e6;  // ~350 GB/s
  const int k = std::max(1, std::min(200, static_cast<int>(5.0 / est_ms)));
  std::vector<double> gbs;
  for (int sample = 0; sample < 7; ++sample) {
    for (int d = 0; d < dirs; ++d) {
      CK(cudaSetDevice(g[d].dev));
      CK(cudaEventRecord(g[d].start, g[d].stream));
    }
    for (int i = 0; i < k; ++i)
      for (int d = 0; d < dirs; ++d) launch(sh, d, n);
    double worst = 0;
    for (int d = 0; d < dirs; ++d) {
      CK(cudaSetDevice(g[d].dev));
      CK(cudaEventRecord(g[d].stop, g[d].stream));
    }
    for (int d = 0; d < dirs; ++d) {
      CK(cudaSetDevice(g[d].dev));
      CK(cudaEventSynchronize(g[d].stop));
      float ms = 0;
      CK(cudaEventElapsedTime(&ms, g[d].start, g[d].stop));
      worst = std::max(worst, static_cast<double>(ms));
    }
    if (sample >= 2) gbs.push_back(static_cast<double>(n) * k / (worst * 1e-3) / 1e9);
  }
  std::sort(gbs.begin(), gbs.end());
  return gbs[gbs.size() / 2];
}

static bool check(u64 n) {  // GPU 1's dst holds GPU 0's src (one-way copies ran last)
  std::vector<unsigned char> a(1 << 20), b(1 << 20);
  const u64 probe[3] = {0, n / 2, n - (1 << 20)};
  for (u64 off : probe) {
    CK(cudaSetDevice(0));
    CK(cudaMemcpy(a.data(), g[0].src + off, a.size(), cudaMemcpyDeviceToHost));
    CK(cudaSetDevice(1));
    CK(cudaMemcpy(b.data(), g[1].dst + off, b.size(), cudaMemcpyDeviceToHost));
    if (memcmp(a.data(), b.data(), a.size()) != 0) return false;
  }
  return true;
}

static void setup(u64 bytes) {
  for (int d = 0; d < 2; ++d) {
    g[d].dev = d;
    CK(cudaSetDevice(d));
    int can = 0;
    CK(cudaDeviceCanAccessPeer(&can, d, 1 - d));
    if (!can) {
      fprintf(stderr, "GPU %d cannot access GPU %d\n", d, 1 - d);
      exit(1);
    }
    CK(cudaDeviceEnablePeerAccess(1 - d, 0));
    CK(cudaMalloc(&g[d].src, bytes));
    CK(cudaMalloc(&g[d].dst, bytes));
    CK(cudaMemset(g[d].dst, 0, bytes));
    std::vector<unsigned> pattern(bytes / 4 < (64u << 20) ? bytes / 4 : (64u << 20));
    for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = static_cast<unsigned>(i * 2654435761u + d);
    for (u64 off = 0; off < bytes; off += pattern.size() * 4)
      CK(cudaMemcpy(g[d].src + off, pattern.data(), std::min<u64>(pattern.size() * 4, bytes - off),
                    cudaMemcpyHostToDevice));
    CK(cudaStreamCreateWithFlags(&g[d].stream, cudaStreamNonBlocking));
    CK(cudaEventCreate(&g[d].start));
    CK(cudaEventCreate(&g[d].stop));
    CK(cudaFuncSetAttribute(k_tma, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 << 10));
  }
}

static std::vector<Shape> shapes(const std::string& family) {
  std::vector<Shape> out;
  if (family == "sm") {
    for (unsigned grid : {16u, 32u, 64u, 128u, 132u, 264u})
      for (unsigned block : {256u, 512u, 1024u}) out.push_back({"slice", grid, block, 0, 0});
    for (unsigned grid : {132u, 264u, 528u}) out.push_back({"stride", grid, 512, 0, 0});
    out.push_back({"stride", 132, 1024, 0, 0});
  } else {
    for (unsigned grid : {16u, 32u, 64u, 132u})
      for (auto cs : {std::pair<unsigned, unsigned>{16u << 10, 4u}, {32u << 10, 4u}, {64u << 10, 2u},
                      {32u << 10, 6u}})
        out.push_back({"tma", grid, 32, cs.first, cs.second});
    for (auto cs : {std::pair<unsigned, unsigned>{16u << 10, 4u}, {32u << 10, 3u}})
      out.push_back({"tma", 264, 32, cs.first, cs.second});
  }
  return out;
}

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "sweep";
  if (mode == "one" && argc >= 6) {
    Shape sh{argv[2], 0, 0, 0, 0};
    const u64 n = strtoull(argv[3], nullptr, 0);
    sh.grid = atoi(argv[4]);
    sh.block = atoi(argv[5]);
    if (argc >= 8) {
      sh.chunk = atoi(argv[6]);
      sh.stages = atoi(argv[7]);
    }
    setup(n);
    for (int i = 0; i < 4; ++i) launch(sh, 0, n);
    CK(cudaSetDevice(0));
    CK(cudaStreamSynchronize(g[0].stream));
    printf("%s one-way %llu B grid %u block %u chunk %u stages %u: %.1f GB/s, %s\n",
           sh.kernel.c_str(), n, sh.grid, sh.block, sh.chunk, sh.stages, measure(sh, n, false),
           check(n) ? "verified" : "MISMATCH");
    return 0;
  }
  const std::string family = argc > 2 ? argv[2] : "sm";
  const std::vector<u64> sizes = {16ull << 20, 64ull << 20, 256ull << 20, 1ull << 30};
  setup(sizes.back());
  printf("%-7s %-6s %11s %5s %5s %6s %6s %8s %8s %6s %s\n", "kernel", "dir", "bytes", "grid",
         "block", "chunk", "stages", "GB/s", "ce GB/s", "of ce", "check");
  for (u64 n : sizes) {
    for (bool bidir : {false, true}) {
      const double ce = measure({"ce"}, n, bidir);
      printf("%-7s %-6s %11llu %5s %5s %6s %6s %8.1f %8.1f %6.3f\n", "ce", bidir ? "bidir" : "oneway",
             n, "-", "-", "-", "-", ce, ce, 1.0);
      for (const Shape& sh : shapes(family)) {
        const double v = measure(sh, n, bidir);
        const bool ok = bidir || check(n);
        printf("%-7s %-6s %11llu %5u %5u %6u %6u %8.1f %8.1f %6.3f %s\n", sh.kernel.c_str(),
               bidir ? "bidir" : "oneway", n, sh.grid, sh.block, sh.chunk, sh.stages, v, ce, v / ce,
               ok ? "ok" : "MISMATCH");
        fflush(stdout);
        if (!bidir) CK(cudaMemset(g[1].dst, 0, n));  // the next one-way check sees fresh bytes
      }
    }
  }
  return 0;
}
