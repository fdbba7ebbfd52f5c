// A kernel launch prepared once and issued many times on any stream: what the PyTorch
// binding (ccogen.torch) calls per step, so its per-call cost is one cuLaunchKernel.
//
// Everything that does not change between calls is decided at construction: the function,
// grid, block, dynamic shared memory (the attribute raised once when above 48 KiB), the
// parameter bytes, the primary context, and the check of every parameter's size against the
// cubin (cuFuncGetParamInfo).  A call passes the stream as a raw CUstream handle (e.g.
// torch.cuda's current stream) and the device pointers of the "slots": the 8-byte
// parameters that change per call (the caller's `buffer` tensors).  The kernel parameters
// are copied by the driver at launch, so a prepared launch can be issued from several
// threads and captured in a CUDA graph like any launch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ccogen_rt/driver_objects.hpp"

namespace ccogen_rt::cuda {

class PreparedLaunch {
 public:
  // `slots` are indices into `params` of 8-byte parameters replaced at each launch, in the
  // order launch() receives their values.  `context` is the CUcontext the module lives in
  // (made current before launching when the calling thread has another one).
  PreparedLaunch(Function fn, Dim3 grid, Dim3 block, unsigned shared_mem,
                 std::vector<KernelParam> params, std::vector<std::size_t> slots,
                 bool cooperative, std::uintptr_t context);

  // Launch on `stream` (a CUstream as an integer; 0 is the legacy default stream) with
  // `slot_values[i]` as parameter `slots[i]`.  Throws CudaError when the driver refuses.
  void launch(std::uintptr_t stream, const std::vector<std::uint64_t>& slot_values) const;

  std::size_t slot_count() const noexcept { return slots_.size(); }
  const std::string& name() const noexcept { return fn_.name(); }

 private:
  Function fn_;
  Dim3 grid_, block_;
  unsigned shared_mem_;
  std::vector<KernelParam> params_;
  std::vector<std::size_t> slots_;
  bool cooperative_;
  CUcontext context_;
};

// cuStreamQuery on a raw stream handle: true when idle, false when busy; throws CudaError
// for an error (a trapped kernel, e.g.).
bool stream_query(std::uintptr_t stream);

}  // namespace ccogen_rt::cuda
