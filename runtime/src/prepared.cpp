// Prepared launches; see ccogen_rt/prepared.hpp.
#include "ccogen_rt/prepared.hpp"

#include <utility>

namespace ccogen_rt::cuda {
namespace {

const Driver& drv() { return *initialized(); }

std::string dims(Dim3 d) {
  return std::to_string(d.x) + "x" + std::to_string(d.y) + "x" + std::to_string(d.z);
}

}  // namespace

PreparedLaunch::PreparedLaunch(Function fn, Dim3 grid, Dim3 block, unsigned shared_mem,
                               std::vector<KernelParam> params, std::vector<std::size_t> slots,
                               bool cooperative, std::uintptr_t context)
    : fn_(std::move(fn)),
      grid_(grid),
      block_(block),
      shared_mem_(shared_mem),
      params_(std::move(params)),
      slots_(std::move(slots)),
      cooperative_(cooperative),
      context_(reinterpret_cast<CUcontext>(context)) {
  for (std::size_t slot : slots_) {
    if (slot >= params_.size() || params_[slot].value.size() != sizeof(std::uint64_t)) {
      throw CudaError(CUDA_ERROR_INVALID_VALUE,
                      "kernel " + fn_.name() + ": slot " + std::to_string(slot) +
                          " is not an 8-byte parameter");
    }
  }
  const std::vector<std::size_t> expected = fn_.param_sizes(params_.size());
  if (!expected.empty()) {  // the driver knows the kernel's parameters: check the ABI once
    if (expected.size() != params_.size()) {
      throw CudaError(CUDA_ERROR_INVALID_VALUE,
                      "kernel " + fn_.name() + " takes " + std::to_string(expected.size()) +
                          " parameters, the manifest lists " + std::to_string(params_.size()));
    }
    for (std::size_t i = 0; i < expected.size(); ++i) {
      if (expected[i] != params_[i].value.size()) {
        throw CudaError(CUDA_ERROR_INVALID_VALUE,
                        "kernel " + fn_.name() + " parameter " + std::to_string(i) + " (" +
                            params_[i].kind + ") is " + std::to_string(expected[i]) +
                            " bytes in the cubin, the runtime passes " +
                            std::to_string(params_[i].value.size()) +
                            " (built against other headers than the loaded library?)");
      }
    }
  }
  if (shared_mem_ > 48 * 1024) {
    fn_.set_attribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                      static_cast<int>(shared_mem_));
  }
}

void PreparedLaunch::launch(std::uintptr_t stream,
                            const std::vector<std::uint64_t>& slot_values) const {
  if (slot_values.size() != slots_.size()) {
    throw CudaError(CUDA_ERROR_INVALID_VALUE,
                    "kernel " + fn_.name() + " takes " + std::to_string(slots_.size()) +
                        " per-call pointers, got " + std::to_string(slot_values.size()));
  }
  const Driver& d = drv();
  if (context_ != nullptr) {
    CUcontext current = nullptr;
    if (require(d.cuCtxGetCurrent, "cuCtxGetCurrent")(&current) != CUDA_SUCCESS ||
        current != context_) {
      check(require(d.cuCtxSetCurrent, "cuCtxSetCurrent")(context_), "cuCtxSetCurrent");
    }
  }
  // Parameter pointers: the prepared bytes, except the slots, which point at this call's
  // values (the driver copies them before cuLaunchKernel returns).
  constexpr std::size_t kInline = 16;
  void* inline_ptrs[kInline];
  std::vector<void*> heap_ptrs;
  void** ptrs = inline_ptrs;
  if (params_.size() > kInline) {
    heap_ptrs.resize(params_.size());
    ptrs = heap_ptrs.data();
  }
  for (std::size_t i = 0; i < params_.size(); ++i) {
    ptrs[i] = const_cast<char*>(params_[i].value.data());
  }
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    ptrs[slots_[i]] = const_cast<std::uint64_t*>(&slot_values[i]);
  }
  void** kernel_params = params_.empty() ? nullptr : ptrs;
  CUstream s = reinterpret_cast<CUstream>(stream);
  CUresult result;
  const char* what;
  if (cooperative_) {
    what = "cuLaunchCooperativeKernel";
    result = require(d.cuLaunchCooperativeKernel, what)(
        fn_.raw(), grid_.x, grid_.y, grid_.z, block_.x, block_.y, block_.z, shared_mem_, s,
        kernel_params);
  } else {
    what = "cuLaunchKernel";
    result = require(d.cuLaunchKernel, what)(fn_.raw(), grid_.x, grid_.y, grid_.z, block_.x,
                                             block_.y, block_.z, shared_mem_, s, kernel_params,
                                             nullptr);
  }
  if (result != CUDA_SUCCESS) {
    throw CudaError(result, std::string(what) + "(" + fn_.name() + ", grid " + dims(grid_) +
                                ", block " + dims(block_) + "): " + describe(result));
  }
}

bool stream_query(std::uintptr_t stream) {
  const CUresult result =
      require(drv().cuStreamQuery, "cuStreamQuery")(reinterpret_cast<CUstream>(stream));
  if (result == CUDA_ERROR_NOT_READY) return false;
  check(result, "cuStreamQuery");
  return true;
}

}  // namespace ccogen_rt::cuda
