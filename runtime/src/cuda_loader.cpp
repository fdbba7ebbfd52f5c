// Lazy dlopen of libcuda.so.1; see ccogen_rt/cuda_loader.hpp.
#include "ccogen_rt/cuda_loader.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <string>

namespace ccogen_rt::cuda {
namespace {

constexpr const char* kDefaultLibrary = "libcuda.so.1";
constexpr const char* kNoDriverHint = "this machine has no NVIDIA GPU or driver";

struct LoadState {
  void* handle = nullptr;
  Driver driver;
  std::string error;  // non-empty when the library could not be loaded
};

struct InitState {
  CUresult result = CUDA_SUCCESS;
  std::string error;  // non-empty when cuInit failed
};

LoadState load() {
  LoadState state;
  // CCOGEN_LIBCUDA overrides the library (tests, unusual installs).
  const char* override_path = std::getenv("CCOGEN_LIBCUDA");
  const char* name = (override_path != nullptr && *override_path != '\0') ? override_path
                                                                          : kDefaultLibrary;
  dlerror();
  state.handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (state.handle == nullptr) {
    const char* why = dlerror();
    state.error = std::string("no CUDA driver found (") + name + "): " +
                  (why != nullptr ? why : "dlopen failed") + "; " + kNoDriverHint;
    return state;
  }
#define CCOGEN_CUDA_RESOLVE(member, symbol, signature) \
  state.driver.member = reinterpret_cast<FnPtr<signature>>(dlsym(state.handle, symbol));
  CCOGEN_CUDA_DRIVER_SYMBOLS(CCOGEN_CUDA_RESOLVE)
#undef CCOGEN_CUDA_RESOLVE
  if (state.driver.cuInit == nullptr) {
    state.error = std::string("no CUDA driver found (") + name +
                  "): the library has no cuInit, so it is not the NVIDIA driver; " +
                  kNoDriverHint;
  }
  return state;
}

// Loaded once per process; function-local statics are initialised thread-safely.
const LoadState& load_state() {
  static const LoadState state = load();
  return state;
}

const InitState& init_state() {
  static const InitState state = [] {
    InitState s;
    const Driver& drv = library();
    s.result = drv.cuInit(0);
    if (s.result != CUDA_SUCCESS) {
      s.error = "CUDA driver found but cuInit(0) failed: " + describe(s.result) +
                "; no usable NVIDIA GPU (check nvidia-smi and CUDA_VISIBLE_DEVICES)";
    }
    return s;
  }();
  return state;
}

}  // namespace

bool library_loaded() noexcept { return load_state().error.empty(); }

const Driver& library() {
  const LoadState& state = load_state();
  if (!state.error.empty()) throw CudaUnavailable(state.error);
  return state.driver;
}

const Driver* initialized(bool allow_no_device) {
  const InitState& state = init_state();
  if (state.result == CUDA_ERROR_NO_DEVICE && allow_no_device) return nullptr;
  if (!state.error.empty()) throw CudaUnavailable(state.error);
  return &load_state().driver;
}

std::string describe(CUresult result) {
  const Driver& drv = load_state().driver;
  const char* name = nullptr;
  const char* text = nullptr;
  if (drv.cuGetErrorName == nullptr || drv.cuGetErrorName(result, &name) != CUDA_SUCCESS) {
    name = nullptr;
  }
  if (drv.cuGetErrorString == nullptr || drv.cuGetErrorString(result, &text) != CUDA_SUCCESS) {
    text = nullptr;
  }
  std::string out = name != nullptr ? name : "CUresult " + std::to_string(result);
  if (text != nullptr) out += std::string(" (") + text + ")";
  return out;
}

void check(CUresult result, const char* what) {
  if (result != CUDA_SUCCESS) throw CudaError(result, std::string(what) + ": " + describe(result));
}

}  // namespace ccogen_rt::cuda
