// The local-reduce micro-benchmark's timing program (benchmarks/reduce/README.md; run.py
// builds and drives it).  On one GPU, for k bf16 sources of n elements each:
//
//   copy       cudaMemcpyAsync of the k sources (k * n * 2 bytes) device to device:
//              bytes read + written = 2 * k * n * 2
//   hand-*     a hand-written vectorised reduce (dst = src0 + ... + src{k-1}, f32
//              accumulation, rounded once): bytes read + written = (k + 1) * n * 2
//   generated  the kernel ccogen generated for benchmarks/reduce/local_reduce.cco, loaded
//              from its cubin with the driver API (--gen-*): the same bytes
//
// Each is timed in samples of back-to-back launches between two CUDA events (at least 5 ms
// a sample, two warm-up samples, the median of --iters samples, default 5; the method of
// benchmarks/copy), reported as one JSON line per measurement on stdout.  Both reduces are checked
// element by element against the sum computed on the host (bit-exact: f32 accumulation
// in source order, rounded to nearest even once).
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#define CHECK(call)                                                                     \
  do {                                                                                  \
    cudaError_t err_ = (call);                                                          \
    if (err_ != cudaSuccess) {                                                          \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,                \
                   cudaGetErrorString(err_));                                           \
      std::exit(1);                                                                     \
    }                                                                                   \
  } while (0)
#define CHECK_CU(call)                                                                  \
  do {                                                                                  \
    CUresult err_ = (call);                                                             \
    if (err_ != CUDA_SUCCESS) {                                                         \
      const char* msg_ = "?";                                                           \
      cuGetErrorString(err_, &msg_);                                                    \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, msg_);         \
      std::exit(1);                                                                     \
    }                                                                                   \
  } while (0)

// ---- data ----------------------------------------------------------------------------------

// A finite bf16 of magnitude in [0.5, 2) and either sign, from the element's index.
__host__ __device__ inline uint16_t value_bits(uint64_t i) {
  uint64_t h = i * 0x9E3779B97F4A7C15ULL;
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9ULL;
  h ^= h >> 32;
  const uint16_t sign = static_cast<uint16_t>((h & 1) << 15);
  const uint16_t exponent = (h >> 1) & 1 ? 0x3F00 : 0x3F80;  // 2^-1 or 2^0
  return static_cast<uint16_t>(sign | exponent | ((h >> 8) & 0x7F));
}

__global__ void fill(uint16_t* data, uint64_t count) {
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x)
    data[i] = value_bits(i);
}

static float bf16_to_float(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

static uint16_t float_to_bf16(float f) {  // round to nearest even (finite values only)
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7FFF + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}

// ---- the hand-written reduce ------------------------------------------------------------------

// dst[i] = src[0 * n + i] + ... + src[(K - 1) * n + i], f32 accumulation in source order;
// 16-byte vectors, U of every source in flight per thread (16 loads), grid-stride.
// STREAM: loads and stores with the streaming cache hint (ld.global.cs / st.global.cs).
template <int K, bool STREAM>
__global__ void __launch_bounds__(512) hand_reduce(uint4* dst, const uint4* src, uint64_t n) {
  constexpr int U = K >= 16 ? 1 : 16 / K;
  const uint64_t nv = n / 8, t = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x;
  const uint64_t nt = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  for (uint64_t i = t; i < nv; i += U * nt) {
    uint4 v[U][K];
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int s = 0; s < K; ++s) {
        const uint64_t j = i + u * nt;
        if (j < nv) v[u][s] = STREAM ? __ldcs(src + s * nv + j) : src[s * nv + j];
      }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const uint64_t j = i + u * nt;
      if (j >= nv) break;
      float a[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) a[e] = __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(&v[u][0])[e]);
#pragma unroll
      for (int s = 1; s < K; ++s)
#pragma unroll
        for (int e = 0; e < 8; ++e) a[e] += __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(&v[u][s])[e]);
      uint4 r;
#pragma unroll
      for (int e = 0; e < 8; ++e) reinterpret_cast<__nv_bfloat16*>(&r)[e] = __float2bfloat16_rn(a[e]);
      if (STREAM) __stcs(dst + j, r); else dst[j] = r;
    }
  }
}

template <int K, bool STREAM>
static void launch_hand(int grid, uint4* dst, const uint4* src, uint64_t n, cudaStream_t s) {
  hand_reduce<K, STREAM><<<grid, 512, 0, s>>>(dst, src, n);
}

typedef void (*HandLaunch)(int, uint4*, const uint4*, uint64_t, cudaStream_t);

static HandLaunch hand_for(int k, bool stream, const void** func) {
#define HAND_CASE(K)                                                                  \
  if (k == K) {                                                                       \
    *func = stream ? reinterpret_cast<const void*>(hand_reduce<K, true>)              \
                   : reinterpret_cast<const void*>(hand_reduce<K, false>);            \
    return stream ? launch_hand<K, true> : launch_hand<K, false>;                     \
  }
  HAND_CASE(2) HAND_CASE(3) HAND_CASE(4) HAND_CASE(6) HAND_CASE(8)
#undef HAND_CASE
  std::fprintf(stderr, "the hand-written reduce takes k = 2, 3, 4, 6 or 8, not %d\n", k);
  std::exit(2);
}

// ---- timing -------------------------------------------------------------------------------------

// Milliseconds per launch: a sample is `reps` launches back to back between two CUDA events
// (reps so a sample lasts at least 5 ms), after `warmup` samples; the median of `samples`.
// `launch(i)` is told the launch's index (the epoch of a generated kernel).
template <typename F>
static double median_ms(F&& launch, int warmup, int samples, cudaStream_t stream) {
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  int index = 0;
  auto sample = [&](int reps) {
    CHECK(cudaEventRecord(start, stream));
    for (int r = 0; r < reps; ++r) launch(index++);
    CHECK(cudaEventRecord(stop, stream));
    CHECK(cudaEventSynchronize(stop));
    CHECK(cudaGetLastError());
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, start, stop));
    return static_cast<double>(ms);
  };
  const double once = sample(1);
  const int reps = std::max(1, static_cast<int>(5.0 / std::max(once, 1e-3)));
  for (int i = 0; i < warmup; ++i) sample(reps);
  std::vector<double> ms(samples);
  for (int i = 0; i < samples; ++i) ms[i] = sample(reps) / reps;
  CHECK(cudaEventDestroy(start));
  CHECK(cudaEventDestroy(stop));
  std::sort(ms.begin(), ms.end());
  return ms[samples / 2];
}

static void report(const char* name, int k, uint64_t n, double bytes, double ms,
                   long long mismatches, int grid, int block) {
  std::printf("{\"name\": \"%s\", \"k\": %d, \"n\": %llu, \"bytes\": %.0f, \"ms\": %.6f, "
              "\"gbps\": %.3f, \"mismatches\": %lld, \"grid\": %d, \"block\": %d}\n",
              name, k, static_cast<unsigned long long>(n), bytes, ms, bytes / ms / 1e6, mismatches,
              grid, block);
  std::fflush(stdout);
}

// Elements of dst (device) that differ from the host's sum, with the first printed.
static long long mismatches(const uint16_t* dst_d, const std::vector<uint16_t>& expected) {
  std::vector<uint16_t> got(expected.size());
  CHECK(cudaMemcpy(got.data(), dst_d, got.size() * 2, cudaMemcpyDeviceToHost));
  long long bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != expected[i]) {
      if (bad == 0)
        std::fprintf(stderr, "element %zu: 0x%04x, expected 0x%04x\n", i, got[i], expected[i]);
      ++bad;
    }
  }
  return bad;
}

// ---- main ----------------------------------------------------------------------------------

struct Args {
  int k = 2, iters = 5, warmup = 2;
  uint64_t mib = 64;
  bool info = false;
  std::string gen_cubin, gen_symbol, gen_params;
  int gen_grid = 0, gen_block = 0;
  bool gen_cooperative = false;
  uint64_t gen_heap = 0;
};

static Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string key = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", key.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (key == "--info") a.info = true;
    else if (key == "--k") a.k = std::atoi(next().c_str());
    else if (key == "--mib") a.mib = std::strtoull(next().c_str(), nullptr, 10);
    else if (key == "--iters") a.iters = std::atoi(next().c_str());
    else if (key == "--warmup") a.warmup = std::atoi(next().c_str());
    else if (key == "--gen-cubin") a.gen_cubin = next();
    else if (key == "--gen-symbol") a.gen_symbol = next();
    else if (key == "--gen-params") a.gen_params = next();
    else if (key == "--gen-grid") a.gen_grid = std::atoi(next().c_str());
    else if (key == "--gen-block") a.gen_block = std::atoi(next().c_str());
    else if (key == "--gen-cooperative") a.gen_cooperative = true;
    else if (key == "--gen-heap") a.gen_heap = std::strtoull(next().c_str(), nullptr, 10);
    else {
      std::fprintf(stderr, "unknown argument %s (see benchmarks/reduce/README.md)\n", key.c_str());
      std::exit(2);
    }
  }
  return a;
}

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  if (a.info) {
    std::printf("{\"name\": \"%s\", \"sms\": %d, \"arch\": \"sm_%d%d\"}\n", prop.name,
                prop.multiProcessorCount, prop.major, prop.minor);
    return 0;
  }
  const uint64_t n = a.mib * (1ULL << 20) / 2;  // bf16 elements per source
  const uint64_t src_bytes = a.k * n * 2;
  std::fprintf(stderr, "%s, %d SMs: k = %d sources of %llu MiB\n", prop.name,
               prop.multiProcessorCount, a.k, static_cast<unsigned long long>(a.mib));
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  uint16_t *src, *dst, *copy;
  CHECK(cudaMalloc(&src, src_bytes));
  CHECK(cudaMalloc(&dst, n * 2));
  CHECK(cudaMalloc(&copy, src_bytes));
  fill<<<prop.multiProcessorCount * 4, 512>>>(src, a.k * n);
  CHECK(cudaDeviceSynchronize());

  std::vector<uint16_t> expected(n);
  for (uint64_t i = 0; i < n; ++i) {
    float acc = bf16_to_float(value_bits(i));
    for (int s = 1; s < a.k; ++s) acc += bf16_to_float(value_bits(s * n + i));
    expected[i] = float_to_bf16(acc);
  }

  // device-to-device copy of every source: 2 * src_bytes read + written
  const double copy_ms = median_ms([&](int) {
    CHECK(cudaMemcpyAsync(copy, src, src_bytes, cudaMemcpyDeviceToDevice, stream));
  }, a.warmup, a.iters, stream);
  report("copy", a.k, n, 2.0 * src_bytes, copy_ms, 0, 0, 0);

  const double reduce_bytes = (a.k + 1.0) * n * 2;
  for (bool stream_hint : {false, true}) {
    const void* func = nullptr;
    HandLaunch launch = hand_for(a.k, stream_hint, &func);
    int per_sm = 0;
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, func, 512, 0));
    const int grid = prop.multiProcessorCount * std::max(1, per_sm);
    CHECK(cudaMemset(dst, 0, n * 2));
    const double ms = median_ms([&](int) {
      launch(grid, reinterpret_cast<uint4*>(dst), reinterpret_cast<const uint4*>(src), n, stream);
    }, a.warmup, a.iters, stream);
    report(stream_hint ? "hand-streaming" : "hand", a.k, n, reduce_bytes, ms,
           mismatches(dst, expected), grid, 512);
  }

  if (!a.gen_cubin.empty()) {  // the generated kernel, its parameters as the manifest lists them
    CUmodule module;
    CUfunction function;
    CHECK_CU(cuModuleLoad(&module, a.gen_cubin.c_str()));
    CHECK_CU(cuModuleGetFunction(&function, module, a.gen_symbol.c_str()));
    void* heap = nullptr;
    CHECK(cudaMalloc(&heap, std::max<uint64_t>(a.gen_heap, 256)));
    CHECK(cudaMemset(heap, 0, std::max<uint64_t>(a.gen_heap, 256)));
    std::vector<std::string> kinds;
    for (size_t start = 0; start <= a.gen_params.size();) {
      size_t comma = a.gen_params.find(',', start);
      if (comma == std::string::npos) comma = a.gen_params.size();
      if (comma > start) kinds.push_back(a.gen_params.substr(start, comma - start));
      start = comma + 1;
    }
    std::vector<uint64_t> values(kinds.size());
    std::vector<void*> params(kinds.size());
    size_t epoch_index = kinds.size();
    for (size_t i = 0; i < kinds.size(); ++i) {
      const std::string& kind = kinds[i];
      if (kind == "heap") values[i] = reinterpret_cast<uint64_t>(heap);
      else if (kind == "epoch") epoch_index = i;
      else if (kind == "debug") values[i] = 0;
      else if (kind == "buffer:src") values[i] = reinterpret_cast<uint64_t>(src);
      else if (kind == "buffer:dst") values[i] = reinterpret_cast<uint64_t>(dst);
      else {
        std::fprintf(stderr, "parameter kind %s: the micro-benchmark runs nvshmem code with "
                     "buffers src and dst only\n", kind.c_str());
        return 2;
      }
      params[i] = &values[i];
    }
    CHECK(cudaMemset(dst, 0, n * 2));
    const double ms = median_ms([&](int launch_index) {
      if (epoch_index < kinds.size()) values[epoch_index] = static_cast<uint64_t>(launch_index);
      if (a.gen_cooperative)
        CHECK_CU(cuLaunchCooperativeKernel(function, a.gen_grid, 1, 1, a.gen_block, 1, 1, 0,
                                           stream, params.data()));
      else
        CHECK_CU(cuLaunchKernel(function, a.gen_grid, 1, 1, a.gen_block, 1, 1, 0, stream,
                                params.data(), nullptr));
    }, a.warmup, a.iters, stream);
    report("generated", a.k, n, reduce_bytes, ms, mismatches(dst, expected), a.gen_grid,
           a.gen_block);
    CHECK_CU(cuModuleUnload(module));
    CHECK(cudaFree(heap));
  }
  CHECK(cudaFree(src));
  CHECK(cudaFree(dst));
  CHECK(cudaFree(copy));
  return 0;
}
