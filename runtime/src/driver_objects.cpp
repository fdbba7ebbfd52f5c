// Driver object wrappers; see ccogen_rt/driver_objects.hpp.
#include "ccogen_rt/driver_objects.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

namespace ccogen_rt::cuda {
namespace {

const Driver& drv() { return *initialized(); }

CUdevice device_of(int ordinal) {
  int count = 0;
  CCOGEN_CU_CHECK(drv(), cuDeviceGetCount, &count);
  if (ordinal < 0 || ordinal >= count) {
    throw CudaError(CUDA_ERROR_INVALID_VALUE,
                    "device ordinal " + std::to_string(ordinal) + " out of range (" +
                        std::to_string(count) + " CUDA devices)");
  }
  CUdevice device = 0;
  CCOGEN_CU_CHECK(drv(), cuDeviceGet, &device, ordinal);
  return device;
}

}  // namespace

// ---- device -------------------------------------------------------------------------------

int device_attribute(int ordinal, int attribute) {
  const CUdevice device = device_of(ordinal);
  int value = 0;
  CCOGEN_CU_CHECK(drv(), cuDeviceGetAttribute, &value, attribute, device);
  return value;
}

std::pair<int, int> compute_capability(int ordinal) {
  return {device_attribute(ordinal, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
          device_attribute(ordinal, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)};
}

// ---- context ------------------------------------------------------------------------------

Context::Context(int ordinal) : ordinal_(ordinal), device_(device_of(ordinal)) {
  CCOGEN_CU_CHECK(drv(), cuDevicePrimaryCtxRetain, &ctx_, device_);
  retained_ = true;
  make_current();
}

void Context::make_current() const { CCOGEN_CU_CHECK(drv(), cuCtxSetCurrent, ctx_); }

void Context::synchronize() const {
  make_current();
  check(require(drv().cuCtxSynchronize, "cuCtxSynchronize")(), "cuCtxSynchronize");
}

void Context::release() {
  if (!retained_) return;
  retained_ = false;
  CCOGEN_CU_CHECK(drv(), cuDevicePrimaryCtxRelease, device_);
}

// ---- module and function --------------------------------------------------------------------

struct ModuleHandle {
  CUmodule module = nullptr;
  ~ModuleHandle() {
    if (module != nullptr && drv().cuModuleUnload != nullptr) {
      (void)drv().cuModuleUnload(module);  // may fail on a broken context: ignored
    }
  }
};

Module::Module(const std::string& image) : module_(std::make_shared<ModuleHandle>()) {
  if (image.empty()) throw CudaError(CUDA_ERROR_INVALID_VALUE, "cuModuleLoadData: empty image");
  CCOGEN_CU_CHECK(drv(), cuModuleLoadData, &module_->module, image.data());
}

Function Module::function(const std::string& name) const {
  if (module_->module == nullptr) {
    throw CudaError(CUDA_ERROR_INVALID_VALUE, "cuModuleGetFunction: the module was unloaded");
  }
  CUfunction fn = nullptr;
  const CUresult result = require(drv().cuModuleGetFunction, "cuModuleGetFunction")(
      &fn, module_->module, name.c_str());
  if (result != CUDA_SUCCESS) {
    throw CudaError(result, "cuModuleGetFunction(\"" + name + "\"): " + describe(result) +
                                "; is the kernel declared extern \"C\" __global__?");
  }
  return Function(module_, fn, name);
}

std::uintptr_t Module::handle() const noexcept {
  return reinterpret_cast<std::uintptr_t>(module_->module);
}

void Module::unload() {
  if (module_->module == nullptr) return;
  CUmodule m = module_->module;
  module_->module = nullptr;
  CCOGEN_CU_CHECK(drv(), cuModuleUnload, m);
}

int Function::attribute(int attribute) const {
  int value = 0;
  CCOGEN_CU_CHECK(drv(), cuFuncGetAttribute, &value, attribute, fn_);
  return value;
}

void Function::set_attribute(int attribute, int value) const {
  CCOGEN_CU_CHECK(drv(), cuFuncSetAttribute, fn_, attribute, value);
}

int Function::max_active_blocks_per_sm(int block_threads, std::size_t dynamic_shared) const {
  int blocks = 0;
  CCOGEN_CU_CHECK(drv(), cuOccupancyMaxActiveBlocksPerMultiprocessor, &blocks, fn_,
                  block_threads, dynamic_shared);
  return blocks;
}

std::vector<std::size_t> Function::param_sizes(std::size_t count) const {
  std::vector<std::size_t> sizes;
  const auto get = drv().cuFuncGetParamInfo;
  if (get == nullptr) return sizes;
  for (std::size_t i = 0; i < count; ++i) {
    std::size_t offset = 0, size = 0;
    if (get(fn_, i, &offset, &size) != CUDA_SUCCESS) break;  // past the last parameter
    sizes.push_back(size);
  }
  return sizes;
}

// ---- stream and event ---------------------------------------------------------------------

Stream::Stream(bool non_blocking) {
  CCOGEN_CU_CHECK(drv(), cuStreamCreate, &stream_, non_blocking ? CU_STREAM_NON_BLOCKING : 0u);
}

Stream::~Stream() {
  if (stream_ != nullptr && drv().cuStreamDestroy != nullptr) (void)drv().cuStreamDestroy(stream_);
}

void Stream::synchronize() const { CCOGEN_CU_CHECK(drv(), cuStreamSynchronize, stream_); }

bool Stream::query() const {
  const CUresult result = require(drv().cuStreamQuery, "cuStreamQuery")(stream_);
  if (result == CUDA_ERROR_NOT_READY) return false;
  check(result, "cuStreamQuery");
  return true;
}

bool Stream::wait(double timeout_s) const {
  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + std::chrono::duration<double>(std::max(0.0, timeout_s));
  auto pause = std::chrono::microseconds(20);
  while (!query()) {
    if (clock::now() >= deadline) return false;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(2000));
  }
  return true;
}

// ---- graphs --------------------------------------------------------------------------------

Graph::~Graph() {
  if (exec_ != nullptr && drv().cuGraphExecDestroy != nullptr) (void)drv().cuGraphExecDestroy(exec_);
}

void Graph::launch(const Stream* stream) const {
  CCOGEN_CU_CHECK(drv(), cuGraphLaunch, exec_, stream != nullptr ? stream->raw() : nullptr);
}

void begin_capture(const Stream& stream) {
  CCOGEN_CU_CHECK(drv(), cuStreamBeginCapture, stream.raw(), CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
}

std::unique_ptr<Graph> end_capture(const Stream& stream) {
  CUgraph graph = nullptr;
  CCOGEN_CU_CHECK(drv(), cuStreamEndCapture, stream.raw(), &graph);
  CUgraphExec exec = nullptr;
  const CUresult result = require(drv().cuGraphInstantiateWithFlags,
                                  "cuGraphInstantiateWithFlags")(&exec, graph, 0ULL);
  if (drv().cuGraphDestroy != nullptr) (void)drv().cuGraphDestroy(graph);  // exec is independent
  check(result, "cuGraphInstantiateWithFlags");
  return std::make_unique<Graph>(exec);
}

Event::Event() { CCOGEN_CU_CHECK(drv(), cuEventCreate, &event_, CU_EVENT_DEFAULT); }

Event::~Event() {
  if (event_ != nullptr && drv().cuEventDestroy != nullptr) (void)drv().cuEventDestroy(event_);
}

void Event::record(const Stream* stream) const {
  CCOGEN_CU_CHECK(drv(), cuEventRecord, event_, stream != nullptr ? stream->raw() : nullptr);
}

void Event::synchronize() const { CCOGEN_CU_CHECK(drv(), cuEventSynchronize, event_); }

bool Event::query() const {
  const CUresult result = require(drv().cuEventQuery, "cuEventQuery")(event_);
  if (result == CUDA_ERROR_NOT_READY) return false;
  check(result, "cuEventQuery");
  return true;
}

float Event::elapsed_ms_since(const Event& start) const {
  float ms = 0.0f;
  const Driver& d = drv();
  if (d.cuEventElapsedTime_v2 != nullptr) {  // CUDA >= 12.8 drivers; cuda.h 13 maps to it
    check(d.cuEventElapsedTime_v2(&ms, start.event_, event_), "cuEventElapsedTime_v2");
  } else {
    CCOGEN_CU_CHECK(d, cuEventElapsedTime, &ms, start.event_, event_);
  }
  return ms;
}

// ---- host-mapped memory -------------------------------------------------------------------

HostMapped::HostMapped(std::size_t size) : size_(size) {
  if (size == 0) throw CudaError(CUDA_ERROR_INVALID_VALUE, "cuMemHostAlloc: size 0");
  CCOGEN_CU_CHECK(drv(), cuMemHostAlloc, &host_, size,
                  CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
  std::memset(host_, 0, size);
  CCOGEN_CU_CHECK(drv(), cuMemHostGetDevicePointer, &device_, host_, 0u);
}

HostMapped::~HostMapped() {
  if (host_ != nullptr && drv().cuMemFreeHost != nullptr) (void)drv().cuMemFreeHost(host_);
}

std::string HostMapped::read(std::size_t offset, std::size_t size) const {
  if (offset > size_ || size > size_ - offset) {
    throw CudaError(CUDA_ERROR_INVALID_VALUE, "HostMapped.read out of range");
  }
  std::string out(size, '\0');
  const volatile unsigned char* src = static_cast<const volatile unsigned char*>(host_) + offset;
  for (std::size_t i = 0; i < size; ++i) out[i] = static_cast<char>(src[i]);
  return out;
}

void HostMapped::write(std::size_t offset, const void* data, std::size_t size) const {
  if (offset > size_ || size > size_ - offset) {
    throw CudaError(CUDA_ERROR_INVALID_VALUE, "HostMapped.write out of range");
  }
  std::memcpy(static_cast<unsigned char*>(host_) + offset, data, size);
}

void HostMapped::zero() const { std::memset(host_, 0, size_); }

// ---- launch and copies ----------------------------------------------------------------------

void launch(const Function& fn, Dim3 grid, Dim3 block, unsigned shared_mem,
            const std::vector<KernelParam>& params, const Stream* stream, bool cooperative) {
  const std::vector<std::size_t> expected = fn.param_sizes(params.size());
  if (!expected.empty()) {  // the driver knows the kernel's parameters: check the ABI
    if (expected.size() != params.size()) {
      throw CudaError(CUDA_ERROR_INVALID_VALUE,
                      "kernel " + fn.name() + " takes " + std::to_string(expected.size()) +
                          " parameters, the manifest lists " + std::to_string(params.size()));
    }
    for (std::size_t i = 0; i < expected.size(); ++i) {
      if (expected[i] != params[i].value.size()) {
        throw CudaError(CUDA_ERROR_INVALID_VALUE,
                        "kernel " + fn.name() + " parameter " + std::to_string(i) + " (" +
                            params[i].kind + ") is " + std::to_string(expected[i]) +
                            " bytes in the cubin, the runtime passes " +
                            std::to_string(params[i].value.size()) +
                            " (built against other headers than the loaded library?)");
      }
    }
  }
  std::vector<void*> pointers;
  pointers.reserve(params.size());
  for (const KernelParam& p : params) pointers.push_back(const_cast<char*>(p.value.data()));
  void** kernel_params = pointers.empty() ? nullptr : pointers.data();
  CUstream s = stream != nullptr ? stream->raw() : nullptr;
  if (shared_mem > 48 * 1024) {
    fn.set_attribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, static_cast<int>(shared_mem));
  }
  const Driver& d = drv();
  CUresult result;
  const char* what;
  if (cooperative) {
    what = "cuLaunchCooperativeKernel";
    result = require(d.cuLaunchCooperativeKernel, what)(fn.raw(), grid.x, grid.y, grid.z, block.x,
                                                        block.y, block.z, shared_mem, s,
                                                        kernel_params);
  } else {
    what = "cuLaunchKernel";
    result = require(d.cuLaunchKernel, what)(fn.raw(), grid.x, grid.y, grid.z, block.x, block.y,
                                             block.z, shared_mem, s, kernel_params, nullptr);
  }
  if (result != CUDA_SUCCESS) {
    throw CudaError(result, std::string(what) + "(" + fn.name() + ", grid " +
                                std::to_string(grid.x) + "x" + std::to_string(grid.y) + "x" +
                                std::to_string(grid.z) + ", block " + std::to_string(block.x) +
                                "x" + std::to_string(block.y) + "x" + std::to_string(block.z) +
                                "): " + describe(result));
  }
}

void memcpy_htod(CUdeviceptr dst, const void* src, std::size_t size) {
  if (size == 0) return;
  CCOGEN_CU_CHECK(drv(), cuMemcpyHtoD, dst, src, size);
}

void memcpy_dtoh(void* dst, CUdeviceptr src, std::size_t size) {
  if (size == 0) return;
  CCOGEN_CU_CHECK(drv(), cuMemcpyDtoH, dst, src, size);
}

void memset_d8(CUdeviceptr dst, unsigned char value, std::size_t size) {
  if (size == 0) return;
  CCOGEN_CU_CHECK(drv(), cuMemsetD8, dst, value, size);
}

}  // namespace ccogen_rt::cuda
