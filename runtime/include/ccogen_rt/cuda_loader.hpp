// Lazy loader for the CUDA driver API (libcuda.so.1).
//
// The extension never links libcuda: `import ccogen` must work on a machine with no NVIDIA
// GPU or driver.  The driver is dlopen()ed on first use and every entry point is resolved
// from the table below.  cuda.h is deliberately not included, so the module builds without
// the CUDA toolkit; the few driver types and signatures are declared here by hand (they are
// part of the driver's stable C ABI).
//
// Adding a driver function is one line in CCOGEN_CUDA_DRIVER_SYMBOLS:
//     X(member, "exported_symbol", return_type(args...))
// Use the exported (possibly versioned, e.g. "cuCtxCreate_v2") symbol name; the member is
// the unversioned API name.  Missing symbols are reported when first called, not at load.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

namespace ccogen_rt::cuda {

// ---- driver ABI types (subset of cuda.h) ------------------------------------------------
using CUresult = int;
using CUdevice = int;
using CUcontext = struct CUctx_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUstream = struct CUstream_st*;
using CUevent = struct CUevent_st*;
using CUgraph = struct CUgraph_st*;
using CUgraphExec = struct CUgraphExec_st*;
using CUdeviceptr = unsigned long long;  // 64-bit on every supported platform

inline constexpr CUresult CUDA_SUCCESS = 0;
inline constexpr CUresult CUDA_ERROR_NO_DEVICE = 100;
inline constexpr CUresult CUDA_ERROR_INVALID_VALUE = 1;
inline constexpr CUresult CUDA_ERROR_NOT_READY = 600;

// Enum values used by the runtime (cuda.h, stable driver ABI).
inline constexpr int CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16;
inline constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
inline constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
inline constexpr int CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH = 95;
inline constexpr int CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0;
inline constexpr int CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1;
inline constexpr int CU_FUNC_ATTRIBUTE_NUM_REGS = 4;
inline constexpr int CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8;
inline constexpr unsigned CU_MEMHOSTALLOC_PORTABLE = 0x01;
inline constexpr unsigned CU_MEMHOSTALLOC_DEVICEMAP = 0x02;
inline constexpr unsigned CU_STREAM_NON_BLOCKING = 0x1;
inline constexpr unsigned CU_EVENT_DEFAULT = 0x0;
inline constexpr int CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1;

template <typename Signature>
using FnPtr = Signature*;

// ---- the symbol table --------------------------------------------------------------------
// clang-format off
#define CCOGEN_CUDA_DRIVER_SYMBOLS(X)                                                        \
  X(cuGetErrorName,     "cuGetErrorName",     CUresult(CUresult, const char**))              \
  X(cuGetErrorString,   "cuGetErrorString",   CUresult(CUresult, const char**))              \
  X(cuInit,             "cuInit",             CUresult(unsigned int))                        \
  X(cuDriverGetVersion, "cuDriverGetVersion", CUresult(int*))                                \
  X(cuDeviceGetCount,   "cuDeviceGetCount",   CUresult(int*))                                \
  X(cuDeviceGet,        "cuDeviceGet",        CUresult(CUdevice*, int))                      \
  X(cuDeviceGetName,    "cuDeviceGetName",    CUresult(char*, int, CUdevice))                \
  X(cuDeviceGetAttribute, "cuDeviceGetAttribute", CUresult(int*, int, CUdevice))             \
  X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", CUresult(CUcontext*, CUdevice))    \
  X(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", CUresult(CUdevice))           \
  X(cuCtxSetCurrent,    "cuCtxSetCurrent",    CUresult(CUcontext))                           \
  X(cuCtxGetCurrent,    "cuCtxGetCurrent",    CUresult(CUcontext*))                          \
  X(cuCtxSynchronize,   "cuCtxSynchronize",   CUresult())                                    \
  X(cuModuleLoadData,   "cuModuleLoadData",   CUresult(CUmodule*, const void*))              \
  X(cuModuleUnload,     "cuModuleUnload",     CUresult(CUmodule))                            \
  X(cuModuleGetFunction, "cuModuleGetFunction", CUresult(CUfunction*, CUmodule, const char*)) \
  X(cuFuncGetAttribute, "cuFuncGetAttribute", CUresult(int*, int, CUfunction))               \
  X(cuFuncSetAttribute, "cuFuncSetAttribute", CUresult(CUfunction, int, int))                \
  X(cuFuncGetParamInfo, "cuFuncGetParamInfo", CUresult(CUfunction, size_t, size_t*, size_t*)) \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessor,                                             \
    "cuOccupancyMaxActiveBlocksPerMultiprocessor", CUresult(int*, CUfunction, int, size_t))  \
  X(cuLaunchKernel,     "cuLaunchKernel",                                                    \
    CUresult(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,         \
             unsigned, CUstream, void**, void**))                                            \
  X(cuLaunchCooperativeKernel, "cuLaunchCooperativeKernel",                                  \
    CUresult(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,         \
             unsigned, CUstream, void**))                                                    \
  X(cuMemcpyHtoD,       "cuMemcpyHtoD_v2",    CUresult(CUdeviceptr, const void*, size_t))    \
  X(cuMemcpyDtoH,       "cuMemcpyDtoH_v2",    CUresult(void*, CUdeviceptr, size_t))          \
  X(cuMemsetD8,         "cuMemsetD8_v2",      CUresult(CUdeviceptr, unsigned char, size_t))  \
  X(cuMemHostAlloc,     "cuMemHostAlloc",     CUresult(void**, size_t, unsigned))            \
  X(cuMemHostGetDevicePointer, "cuMemHostGetDevicePointer_v2",                               \
    CUresult(CUdeviceptr*, void*, unsigned))                                                 \
  X(cuMemFreeHost,      "cuMemFreeHost",      CUresult(void*))                               \
  X(cuStreamCreate,     "cuStreamCreate",     CUresult(CUstream*, unsigned))                 \
  X(cuStreamDestroy,    "cuStreamDestroy_v2", CUresult(CUstream))                            \
  X(cuStreamSynchronize, "cuStreamSynchronize", CUresult(CUstream))                          \
  X(cuStreamQuery,      "cuStreamQuery",      CUresult(CUstream))                            \
  X(cuEventCreate,      "cuEventCreate",      CUresult(CUevent*, unsigned))                  \
  X(cuEventDestroy,     "cuEventDestroy_v2",  CUresult(CUevent))                             \
  X(cuEventRecord,      "cuEventRecord",      CUresult(CUevent, CUstream))                   \
  X(cuEventSynchronize, "cuEventSynchronize", CUresult(CUevent))                             \
  X(cuEventQuery,       "cuEventQuery",       CUresult(CUevent))                             \
  X(cuEventElapsedTime, "cuEventElapsedTime", CUresult(float*, CUevent, CUevent))         \
  X(cuEventElapsedTime_v2, "cuEventElapsedTime_v2", CUresult(float*, CUevent, CUevent))   \
  X(cuStreamBeginCapture, "cuStreamBeginCapture_v2", CUresult(CUstream, int))               \
  X(cuStreamEndCapture, "cuStreamEndCapture", CUresult(CUstream, CUgraph*))                  \
  X(cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags",                              \
    CUresult(CUgraphExec*, CUgraph, unsigned long long))                                     \
  X(cuGraphLaunch,      "cuGraphLaunch",      CUresult(CUgraphExec, CUstream))               \
  X(cuGraphExecDestroy, "cuGraphExecDestroy", CUresult(CUgraphExec))                         \
  X(cuGraphDestroy,     "cuGraphDestroy",     CUresult(CUgraph))
// clang-format on

// ---- errors ------------------------------------------------------------------------------
// No usable driver: libcuda missing, a symbol missing, or cuInit failed.
// Bound to Python as ccogen._ccogen_rt.CudaUnavailable (a RuntimeError).
class CudaUnavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A driver call returned an error.  Bound as ccogen._ccogen_rt.CudaError (a RuntimeError).
class CudaError : public std::runtime_error {
 public:
  CudaError(CUresult code, const std::string& message)
      : std::runtime_error(message), code_(code) {}
  CUresult code() const noexcept { return code_; }

 private:
  CUresult code_;
};

// ---- the loaded driver ---------------------------------------------------------------------
struct Driver {
#define CCOGEN_CUDA_DECLARE_MEMBER(member, symbol, signature) FnPtr<signature> member = nullptr;
  CCOGEN_CUDA_DRIVER_SYMBOLS(CCOGEN_CUDA_DECLARE_MEMBER)
#undef CCOGEN_CUDA_DECLARE_MEMBER
};

// True when libcuda.so.1 could be opened (does not call cuInit).
bool library_loaded() noexcept;

// The driver table, after dlopen; throws CudaUnavailable if libcuda cannot be loaded.
// Entry points that the installed driver lacks are nullptr; use require().
const Driver& library();

// The driver table, after dlopen and a successful cuInit(0) (done once, result cached);
// throws CudaUnavailable otherwise.  `allow_no_device` makes CUDA_ERROR_NO_DEVICE from cuInit
// a non-error (the caller then treats the machine as having zero devices); it returns nullptr
// in that case.
const Driver* initialized(bool allow_no_device = false);

// Throws CudaError("<what>: CUDA_ERROR_X (description)") unless `result` is CUDA_SUCCESS.
void check(CUresult result, const char* what);

// "CUDA_ERROR_X (description)" for a driver result code.
std::string describe(CUresult result);

// Throws CudaUnavailable if `fn` (a table entry named `name`) was not found in libcuda.
template <typename Fn>
Fn require(Fn fn, const char* name) {
  if (fn == nullptr) {
    throw CudaUnavailable(std::string("the CUDA driver (libcuda.so.1) has no symbol ") + name +
                          "; update the NVIDIA driver");
  }
  return fn;
}

}  // namespace ccogen_rt::cuda

// Call a driver entry point through the table, checking the result:
//     CCOGEN_CU_CHECK(drv, cuDeviceGetCount, &n);
#define CCOGEN_CU_CHECK(drv, fn, ...) \
  ::ccogen_rt::cuda::check(::ccogen_rt::cuda::require((drv).fn, #fn)(__VA_ARGS__), #fn)
