// ccogen engine shim for the `nvshmem` target: unique-id bootstrap, symmetric heap and
// module registration through NVSHMEM's host API, behind a small C ABI loaded with ctypes.
//
// Compiled AT RUN TIME by ccogen.rt.engines against the NVSHMEM whose libnvshmem_host.so.3
// the process loads, cached on disk:
//   nvcc -O2 -std=c++17 -rdc=true -arch=sm_XX -Xcompiler -fPIC -shared -I$NV/include
//        nvshmem_host.cu -o libccogen_nvshmem.so -L$NV/lib -l:libnvshmem_host.so.3
//        -lnvshmem_device -Xlinker -rpath,$NV/lib
// `nvshmemx_init_attr` and `nvshmem_finalize` are inline wrappers around functions that live
// in libnvshmem_device.a, hence -rdc and the device archive.  Only ONE NVSHMEM runtime may
// exist per process: load this library once, and load kernels as cubins registered with
// ccogen_module_init (nvshmemx_cumodule_init), never as a second library embedding NVSHMEM.
//
// Every function returns 0 on success and sets ccogen_last_error() otherwise.
#include <cuda.h>
#include <cuda_runtime.h>
// The host API only: the umbrella headers' device API was ~3/4 of this file's nvcc time,
// for the same exported and imported symbols (docs/performance.md, "Test-run cost: builds").
#if __has_include(<nvshmem_host.h>)
#include <nvshmem_host.h>
#else
#include <nvshmem.h>
#include <nvshmemx.h>
#endif

#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#define CCOGEN_SHIM_ABI 1

namespace {

struct Engine {
  bool initialized = false;
  int rank = -1;
  int nranks = 0;
  std::vector<void*> heaps;  // `ccogen run`: one; ccogen.torch: one per loaded protocol
  cudaStream_t stream = nullptr;
};

Engine g;
std::string g_error;

int fail(const std::string& what) {
  g_error = what;
  return 1;
}

int cuda_fail(const char* call, cudaError_t e) {
  return fail(std::string(call) + " failed: " + cudaGetErrorName(e) + " (" +
              cudaGetErrorString(e) + ")");
}

#define CUDA_TRY(call)                                  \
  do {                                                  \
    cudaError_t e_ = (call);                            \
    if (e_ != cudaSuccess) return cuda_fail(#call, e_); \
  } while (0)

int wait_stream(double timeout_s) {
  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + std::chrono::duration<double>(timeout_s);
  auto pause = std::chrono::microseconds(20);
  for (;;) {
    cudaError_t e = cudaStreamQuery(g.stream);
    if (e == cudaSuccess) return 0;
    if (e != cudaErrorNotReady) return cuda_fail("cudaStreamQuery (host barrier)", e);
    if (clock::now() >= deadline) {
      return fail("host barrier timed out after " + std::to_string(timeout_s) + " s");
    }
    std::this_thread::sleep_for(pause);
    if (pause < std::chrono::microseconds(2000)) pause *= 2;
  }
}

}  // namespace

extern "C" {

const char* ccogen_last_error() { return g_error.c_str(); }
int ccogen_shim_abi() { return CCOGEN_SHIM_ABI; }
int ccogen_header_version() {
  return NVSHMEM_VENDOR_MAJOR_VERSION * 10000 + NVSHMEM_VENDOR_MINOR_VERSION * 100 +
         NVSHMEM_VENDOR_PATCH_VERSION;
}

int ccogen_runtime_version(int* version) {
  int major = 0, minor = 0, patch = 0;
  nvshmemx_vendor_get_version_info(&major, &minor, &patch);
  *version = major * 10000 + minor * 100 + patch;
  return 0;
}

size_t ccogen_devcomm_size() { return 0; }  // NVSHMEM kernels take no device communicator
size_t ccogen_unique_id_size() { return sizeof(nvshmemx_uniqueid_t); }

int ccogen_unique_id(void* out, size_t size) {
  if (size != sizeof(nvshmemx_uniqueid_t)) return fail("unique id buffer has the wrong size");
  nvshmemx_uniqueid_t id = NVSHMEMX_UNIQUEID_INITIALIZER;
  const int r = nvshmemx_get_uniqueid(&id);
  if (r != 0) return fail("nvshmemx_get_uniqueid failed: " + std::to_string(r));
  std::memcpy(out, &id, sizeof id);
  return 0;
}

int ccogen_init(int rank, int nranks, int device, const void* uid, size_t uid_size) {
  if (g.initialized) return fail("the NVSHMEM engine is already initialized in this process");
  if (uid_size != sizeof(nvshmemx_uniqueid_t)) return fail("unique id has the wrong size");
  CUDA_TRY(cudaSetDevice(device));
  nvshmemx_uniqueid_t id = NVSHMEMX_UNIQUEID_INITIALIZER;
  std::memcpy(&id, uid, sizeof id);
  nvshmemx_init_attr_t attr = NVSHMEMX_INIT_ATTR_INITIALIZER;
  int r = nvshmemx_set_attr_uniqueid_args(rank, nranks, &id, &attr);
  if (r != 0) return fail("nvshmemx_set_attr_uniqueid_args failed: " + std::to_string(r));
  r = nvshmemx_init_attr(NVSHMEMX_INIT_WITH_UNIQUEID, &attr);
  if (r != 0) return fail("nvshmemx_init_attr(NVSHMEMX_INIT_WITH_UNIQUEID) failed: " +
                          std::to_string(r) + " (NVSHMEM_DEBUG=INFO says why)");
  g.initialized = true;
  g.rank = nvshmem_my_pe();
  g.nranks = nvshmem_n_pes();
  if (g.rank != rank || g.nranks != nranks) {
    return fail("NVSHMEM assigned PE " + std::to_string(g.rank) + " of " +
                std::to_string(g.nranks) + ", expected " + std::to_string(rank) + " of " +
                std::to_string(nranks));
  }
  CUDA_TRY(cudaStreamCreateWithFlags(&g.stream, cudaStreamNonBlocking));
  return 0;
}

// A symmetric heap: nvshmem_malloc (collective: every rank allocates its heaps in the same
// order).  There is no window handle.
int ccogen_heap_alloc(size_t bytes, uint64_t* ptr_out, uint64_t* window_out) {
  if (!g.initialized) return fail("ccogen_heap_alloc before ccogen_init");
  void* heap = nvshmem_malloc(bytes);
  if (heap == nullptr) {
    return fail("nvshmem_malloc(" + std::to_string(bytes) +
                ") returned NULL (raise NVSHMEM_SYMMETRIC_SIZE)");
  }
  g.heaps.push_back(heap);
  *ptr_out = reinterpret_cast<uint64_t>(heap);
  *window_out = 0;
  return 0;
}

int ccogen_devcomm_create(int, void*, size_t) {
  return fail("the nvshmem target has no device communicator");
}

int ccogen_module_init(uint64_t module) {
  const int r = nvshmemx_cumodule_init(reinterpret_cast<CUmodule>(module));
  if (r != 0) {
    return fail("nvshmemx_cumodule_init failed: " + std::to_string(r) +
                " (was the cubin linked against the libnvshmem_device.a of the loaded "
                "NVSHMEM? device minor version must be <= host minor version)");
  }
  return 0;
}

int ccogen_module_finalize(uint64_t module) {
  const int r = nvshmemx_cumodule_finalize(reinterpret_cast<CUmodule>(module));
  if (r != 0) return fail("nvshmemx_cumodule_finalize failed: " + std::to_string(r));
  return 0;
}

int ccogen_barrier(double timeout_s) {
  if (!g.initialized) return fail("ccogen_barrier before ccogen_init");
  nvshmemx_barrier_all_on_stream(g.stream);
  return wait_stream(timeout_s);
}

int ccogen_finalize() {
  if (!g.initialized) return 0;
  while (!g.heaps.empty()) {
    nvshmem_free(g.heaps.back());
    g.heaps.pop_back();
  }
  if (g.stream != nullptr) CUDA_TRY(cudaStreamDestroy(g.stream));
  g.stream = nullptr;
  nvshmem_finalize();
  g.initialized = false;
  return 0;
}

}  // extern "C"
