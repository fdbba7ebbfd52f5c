// ccogen engine shim for the `nccl-lsa` target: bootstrap, symmetric heap and device
// communicator through NCCL's host API, behind a small C ABI that Python loads with ctypes.
//
// Compiled AT RUN TIME by ccogen.rt.engines against the headers of the NCCL whose
// libnccl.so.2 the process loads (rpath to that library), cached on disk:
//   nvcc -O2 -std=c++17 -arch=sm_XX -Xcompiler -fPIC -shared -I$NCCL/include nccl_host.cu
//        -o libccogen_nccl.so -L$NCCL/lib -l:libnccl.so.2 -Xlinker -rpath,$NCCL/lib
// Comm, windows, devComms and the barrier stream are process globals (one engine per process),
// so Python never mirrors version-dependent struct layouts: it gets sizeof(ncclDevComm) and
// the devComm bytes, which kernels take by value.
//
// Every function returns 0 on success and sets ccogen_last_error() otherwise.
#include <cuda_runtime.h>
#include <nccl.h>
#include <nccl_device.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#if NCCL_VERSION_CODE < NCCL_VERSION(2, 28, 0)
#error "the NCCL device API (nccl-lsa) needs NCCL >= 2.28"
#endif

#define CCOGEN_SHIM_ABI 1

namespace {

struct Engine {
  bool initialized = false;
  int rank = -1;
  int nranks = 0;
  int device = -1;
  ncclComm_t comm = nullptr;
  // Heaps (each registered as one window) and device communicators: `ccogen run` makes one
  // of each; ccogen.torch makes one per loaded protocol.  Freed in reverse at finalize.
  std::vector<std::pair<void*, ncclWindow_t>> heaps;
  std::vector<ncclDevComm_t> devcomms;
  cudaStream_t stream = nullptr;
  float* barrier_buf = nullptr;
};

Engine g;
std::string g_error;

int fail(const std::string& what) {
  g_error = what;
  return 1;
}

int nccl_fail(const char* call, ncclResult_t r) {
  std::string msg = std::string(call) + " failed: " + ncclGetErrorString(r);
  if (g.comm != nullptr) {
    const char* last = ncclGetLastError(g.comm);
    if (last != nullptr && *last != '\0') msg += std::string(" (") + last + ")";
  }
  return fail(msg);
}

int cuda_fail(const char* call, cudaError_t e) {
  return fail(std::string(call) + " failed: " + cudaGetErrorName(e) + " (" +
              cudaGetErrorString(e) + ")");
}

#define NCCL_TRY(call)                                \
  do {                                                \
    ncclResult_t r_ = (call);                         \
    if (r_ != ncclSuccess) return nccl_fail(#call, r_); \
  } while (0)
#define CUDA_TRY(call)                                \
  do {                                                \
    cudaError_t e_ = (call);                          \
    if (e_ != cudaSuccess) return cuda_fail(#call, e_); \
  } while (0)

// Polls the barrier stream: 0 done, 2 timed out, 1 error.
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
int ccogen_header_version() { return NCCL_VERSION_CODE; }

int ccogen_runtime_version(int* version) {
  NCCL_TRY(ncclGetVersion(version));
  return 0;
}

size_t ccogen_devcomm_size() { return sizeof(ncclDevComm_t); }
size_t ccogen_unique_id_size() { return sizeof(ncclUniqueId); }

int ccogen_unique_id(void* out, size_t size) {
  if (size != sizeof(ncclUniqueId)) return fail("unique id buffer has the wrong size");
  ncclUniqueId id;
  NCCL_TRY(ncclGetUniqueId(&id));
  std::memcpy(out, &id, sizeof id);
  return 0;
}

int ccogen_init(int rank, int nranks, int device, const void* uid, size_t uid_size) {
  if (g.initialized) return fail("the NCCL engine is already initialized in this process");
  if (uid_size != sizeof(ncclUniqueId)) return fail("unique id has the wrong size");
  CUDA_TRY(cudaSetDevice(device));
  ncclUniqueId id;
  std::memcpy(&id, uid, sizeof id);
  NCCL_TRY(ncclCommInitRank(&g.comm, nranks, id, rank));
  g.rank = rank;
  g.nranks = nranks;
  g.device = device;
  g.initialized = true;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 29, 0)
  ncclCommProperties_t props = NCCL_COMM_PROPERTIES_INITIALIZER;
  NCCL_TRY(ncclCommQueryProperties(g.comm, &props));
  if (!props.deviceApiSupport) {
    return fail("NCCL reports no device API support on this communicator (needs CUDA P2P "
                "between all GPUs and cuMem; NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT says why)");
  }
#endif
  CUDA_TRY(cudaStreamCreateWithFlags(&g.stream, cudaStreamNonBlocking));
  CUDA_TRY(cudaMalloc(reinterpret_cast<void**>(&g.barrier_buf), sizeof(float)));
  CUDA_TRY(cudaMemset(g.barrier_buf, 0, sizeof(float)));
  return 0;
}

// A symmetric heap: ncclMemAlloc + ncclCommWindowRegister(NCCL_WIN_COLL_SYMMETRIC)
// (collective: every rank allocates its heaps in the same order).
int ccogen_heap_alloc(size_t bytes, uint64_t* ptr_out, uint64_t* window_out) {
  if (!g.initialized) return fail("ccogen_heap_alloc before ccogen_init");
  void* heap = nullptr;
  NCCL_TRY(ncclMemAlloc(&heap, bytes));
  ncclWindow_t window = nullptr;
  const ncclResult_t r = ncclCommWindowRegister(g.comm, heap, bytes, &window,
                                                NCCL_WIN_COLL_SYMMETRIC);
  if (r != ncclSuccess) {
    (void)ncclMemFree(heap);
    return nccl_fail("ncclCommWindowRegister", r);
  }
  g.heaps.emplace_back(heap, window);
  *ptr_out = reinterpret_cast<uint64_t>(heap);
  *window_out = reinterpret_cast<uint64_t>(window);
  return 0;
}

// ncclDevCommCreate with exactly the manifest's requirements: lsaBarrierCount only
// (never multimem, never barrierCount, which is a GIN resource).
int ccogen_devcomm_create(int lsa_barrier_count, void* out, size_t out_size) {
  if (!g.initialized) return fail("ccogen_devcomm_create before ccogen_init");
  if (out_size != sizeof(ncclDevComm_t)) return fail("devComm buffer has the wrong size");
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 29, 0)
  ncclDevCommRequirements_t reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
#else
  ncclDevCommRequirements_t reqs;
  std::memset(&reqs, 0, sizeof reqs);
#endif
  reqs.lsaMultimem = false;
  reqs.barrierCount = 0;
  reqs.lsaBarrierCount = lsa_barrier_count;
  ncclDevComm_t devcomm;
  NCCL_TRY(ncclDevCommCreate(g.comm, &reqs, &devcomm));
  g.devcomms.push_back(devcomm);
  std::memcpy(out, &devcomm, sizeof devcomm);
  return 0;
}

// All ranks meet: a one-element ncclAllReduce on the engine's stream, polled with a timeout.
int ccogen_barrier(double timeout_s) {
  if (!g.initialized) return fail("ccogen_barrier before ccogen_init");
  NCCL_TRY(ncclAllReduce(g.barrier_buf, g.barrier_buf, 1, ncclFloat, ncclSum, g.comm, g.stream));
  return wait_stream(timeout_s);
}

int ccogen_finalize() {
  if (!g.initialized) return 0;
  while (!g.devcomms.empty()) {
    NCCL_TRY(ncclDevCommDestroy(g.comm, &g.devcomms.back()));
    g.devcomms.pop_back();
  }
  while (!g.heaps.empty()) {
    const auto [heap, window] = g.heaps.back();
    g.heaps.pop_back();
    NCCL_TRY(ncclCommWindowDeregister(g.comm, window));
    NCCL_TRY(ncclMemFree(heap));
  }
  if (g.barrier_buf != nullptr) CUDA_TRY(cudaFree(g.barrier_buf));
  g.barrier_buf = nullptr;
  if (g.stream != nullptr) CUDA_TRY(cudaStreamDestroy(g.stream));
  g.stream = nullptr;
  NCCL_TRY(ncclCommFinalize(g.comm));
  NCCL_TRY(ncclCommDestroy(g.comm));
  g.comm = nullptr;
  g.initialized = false;
  return 0;
}

}  // extern "C"
