// Thin RAII wrappers over the CUDA driver objects the runtime uses: the primary context of a
// device, a loaded module and its functions, a stream, an event, host-mapped pinned memory,
// and the kernel launch that builds `kernelParams` from raw bytes.
//
// Every call goes through the lazily loaded driver table (cuda_loader.hpp) and throws
// CudaError / CudaUnavailable on failure.  Destructors never throw: after a kernel trapped,
// the context is unusable and releasing resources may fail; such errors are ignored (the
// process is about to report and exit).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ccogen_rt/cuda_loader.hpp"

namespace ccogen_rt::cuda {

// (major, minor) compute capability of device `ordinal`.
std::pair<int, int> compute_capability(int ordinal);

// cuDeviceGetAttribute for device `ordinal`.
int device_attribute(int ordinal, int attribute);

// The primary context of a device, retained and made current on the calling thread.
class Context {
 public:
  explicit Context(int ordinal);
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  ~Context() = default;  // the primary context stays retained until the process exits

  int ordinal() const noexcept { return ordinal_; }
  std::uintptr_t handle() const noexcept { return reinterpret_cast<std::uintptr_t>(ctx_); }
  void make_current() const;
  void synchronize() const;  // cuCtxSynchronize: all streams, pageable copies included
  void release();            // cuDevicePrimaryCtxRelease (idempotent)

 private:
  int ordinal_;
  CUdevice device_ = 0;
  CUcontext ctx_ = nullptr;
  bool retained_ = false;
};

struct ModuleHandle;  // shared by a Module and its Functions

class Function {
 public:
  Function(std::shared_ptr<ModuleHandle> module, CUfunction fn, std::string name)
      : module_(std::move(module)), fn_(fn), name_(std::move(name)) {}

  const std::string& name() const noexcept { return name_; }
  CUfunction raw() const noexcept { return fn_; }
  int attribute(int attribute) const;
  void set_attribute(int attribute, int value) const;
  int max_active_blocks_per_sm(int block_threads, std::size_t dynamic_shared) const;
  // Byte sizes of the first `count` kernel parameters (cuFuncGetParamInfo, driver >= 12.4);
  // shorter when the kernel has fewer, empty when the driver cannot tell.  Indices past the
  // last parameter are never queried on purpose: that query fails, and compute-sanitizer
  // reports every failing driver call.
  std::vector<std::size_t> param_sizes(std::size_t count) const;

 private:
  std::shared_ptr<ModuleHandle> module_;
  CUfunction fn_;
  std::string name_;
};

class Module {
 public:
  // cuModuleLoadData on a cubin / fatbin / PTX image (copied by the driver).
  explicit Module(const std::string& image);
  Function function(const std::string& name) const;
  std::uintptr_t handle() const noexcept;
  void unload();  // explicit unload (idempotent); the destructor unloads too

 private:
  std::shared_ptr<ModuleHandle> module_;
};

class Stream {
 public:
  explicit Stream(bool non_blocking = false);
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream();

  CUstream raw() const noexcept { return stream_; }
  std::uintptr_t handle() const noexcept { return reinterpret_cast<std::uintptr_t>(stream_); }
  void synchronize() const;
  bool query() const;  // true when all work is done; throws on an error
  // Polls until the stream is idle (true) or `timeout_s` passed (false); throws on an error.
  bool wait(double timeout_s) const;

 private:
  CUstream stream_ = nullptr;
};

// An instantiated CUDA graph, made by capturing the work issued on a stream between
// Stream::begin_capture and Stream::end_capture (thread-local capture mode: other threads,
// e.g. an engine's proxy thread, may keep issuing work of their own).  Kernel parameters
// are copied at capture: a replay launches the same kernels with the same arguments.
class Graph {
 public:
  explicit Graph(CUgraphExec exec) : exec_(exec) {}
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  ~Graph();

  void launch(const Stream* stream) const;  // cuGraphLaunch

 private:
  CUgraphExec exec_ = nullptr;
};

// Starts capturing `stream` (nothing issued on it runs until the graph is launched).
void begin_capture(const Stream& stream);
// Ends the capture and instantiates the graph; throws CudaError if capture failed (an
// operation that cannot be captured was issued, e.g.).
std::unique_ptr<Graph> end_capture(const Stream& stream);

class Event {
 public:
  Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event();

  void record(const Stream* stream) const;
  void synchronize() const;
  bool query() const;  // true once the work before the record is done; throws on an error
  float elapsed_ms_since(const Event& start) const;  // cuEventElapsedTime(start, this)

 private:
  CUevent event_ = nullptr;
};

// Pinned host memory mapped into the device address space (cuMemHostAlloc DEVICEMAP).
// The host side stays readable after the context broke, which is what the debug record needs.
class HostMapped {
 public:
  explicit HostMapped(std::size_t size);
  HostMapped(const HostMapped&) = delete;
  HostMapped& operator=(const HostMapped&) = delete;
  ~HostMapped();

  std::size_t size() const noexcept { return size_; }
  CUdeviceptr device_pointer() const noexcept { return device_; }
  std::string read(std::size_t offset, std::size_t size) const;  // volatile byte copy
  void write(std::size_t offset, const void* data, std::size_t size) const;
  void zero() const;

 private:
  void* host_ = nullptr;
  CUdeviceptr device_ = 0;
  std::size_t size_ = 0;
};

// One kernel parameter: `kind` names it in errors, `value` is passed by value, byte for byte.
struct KernelParam {
  std::string kind;
  std::string value;
};

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

// cuLaunchKernel / cuLaunchCooperativeKernel with kernelParams pointing at the raw bytes.
void launch(const Function& fn, Dim3 grid, Dim3 block, unsigned shared_mem,
            const std::vector<KernelParam>& params, const Stream* stream, bool cooperative);

void memcpy_htod(CUdeviceptr dst, const void* src, std::size_t size);
void memcpy_dtoh(void* dst, CUdeviceptr src, std::size_t size);
void memset_d8(CUdeviceptr dst, unsigned char value, std::size_t size);

}  // namespace ccogen_rt::cuda
