// ccogen._ccogen_rt: the native runtime: driver discovery, module loading, launches, copies.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "ccogen_rt/cuda_loader.hpp"
#include "ccogen_rt/driver_objects.hpp"
#include "ccogen_rt/prepared.hpp"

namespace py = pybind11;
namespace cu = ccogen_rt::cuda;

namespace {

bool driver_available() {
  if (!cu::library_loaded()) return false;
  try {
    cu::initialized();
    return true;
  } catch (const cu::CudaUnavailable&) {
    return false;
  }
}

int driver_version() {
  const cu::Driver& drv = cu::library();
  int version = 0;
  CCOGEN_CU_CHECK(drv, cuDriverGetVersion, &version);
  return version;
}

int device_count() {
  const cu::Driver* drv = cu::initialized(/*allow_no_device=*/true);
  if (drv == nullptr) return 0;  // cuInit said CUDA_ERROR_NO_DEVICE
  int count = 0;
  CCOGEN_CU_CHECK(*drv, cuDeviceGetCount, &count);
  return count;
}

std::string device_name(int ordinal) {
  const int count = device_count();
  if (ordinal < 0 || ordinal >= count) {
    throw py::index_error("device ordinal " + std::to_string(ordinal) + " out of range (" +
                          std::to_string(count) + " CUDA devices)");
  }
  const cu::Driver& drv = *cu::initialized();
  cu::CUdevice device = 0;
  CCOGEN_CU_CHECK(drv, cuDeviceGet, &device, ordinal);
  char name[256] = {};
  CCOGEN_CU_CHECK(drv, cuDeviceGetName, name, static_cast<int>(sizeof(name) - 1), device);
  return std::string(name);
}

cu::Dim3 to_dim3(const py::object& value, const char* what) {
  cu::Dim3 d;
  if (py::isinstance<py::int_>(value)) {
    d.x = value.cast<unsigned>();
    return d;
  }
  const auto items = value.cast<std::vector<unsigned>>();
  if (items.empty() || items.size() > 3) {
    throw py::value_error(std::string(what) + " must be an int or 1 to 3 ints");
  }
  d.x = items[0];
  if (items.size() > 1) d.y = items[1];
  if (items.size() > 2) d.z = items[2];
  return d;
}

std::vector<cu::KernelParam> to_params(const py::list& params) {
  std::vector<cu::KernelParam> out;
  out.reserve(params.size());
  for (const py::handle item : params) {
    const auto pair = item.cast<py::tuple>();
    if (pair.size() != 2) throw py::value_error("each parameter is a (kind, bytes) pair");
    out.push_back({pair[0].cast<std::string>(), pair[1].cast<std::string>()});
  }
  return out;
}

py::buffer_info contiguous(const py::buffer& data) {
  py::buffer_info info = data.request();
  py::ssize_t expected = info.itemsize;
  for (py::ssize_t dim = info.ndim - 1; dim >= 0; --dim) {
    if (info.shape[dim] > 1 && info.strides[dim] != expected) {
      throw py::value_error("the buffer must be C-contiguous");
    }
    expected *= info.shape[dim];
  }
  return info;
}

void bind_driver_objects(py::module_& m) {
  m.def("compute_capability", &cu::compute_capability, py::arg("ordinal"),
        "(major, minor) compute capability of a device.");
  m.def("device_attribute", &cu::device_attribute, py::arg("ordinal"), py::arg("attribute"),
        "cuDeviceGetAttribute(attribute) of a device.");

  py::class_<cu::Context>(m, "Context", "The primary context of a device, made current.")
      .def(py::init<int>(), py::arg("ordinal"))
      .def_property_readonly("ordinal", &cu::Context::ordinal)
      .def_property_readonly("handle", &cu::Context::handle)
      .def("make_current", &cu::Context::make_current)
      .def("synchronize", &cu::Context::synchronize, py::call_guard<py::gil_scoped_release>())
      .def("release", &cu::Context::release);

  py::class_<cu::Function>(m, "Function", "A kernel of a loaded module.")
      .def_property_readonly("name", &cu::Function::name)
      .def("attribute", &cu::Function::attribute, py::arg("attribute"))
      .def("set_attribute", &cu::Function::set_attribute, py::arg("attribute"), py::arg("value"))
      .def("max_active_blocks_per_sm", &cu::Function::max_active_blocks_per_sm,
           py::arg("block_threads"), py::arg("dynamic_shared") = 0)
      .def("param_sizes", &cu::Function::param_sizes, py::arg("count"),
           "Byte sizes of the first `count` parameters (fewer when the kernel has fewer; "
           "empty when the driver cannot tell).");

  py::class_<cu::Module>(m, "Module", "A cubin loaded with cuModuleLoadData.")
      .def(py::init([](const py::bytes& image) { return new cu::Module(std::string(image)); }),
           py::arg("image"))
      .def("function", &cu::Module::function, py::arg("name"))
      .def_property_readonly("handle", &cu::Module::handle, "The CUmodule as an int.")
      .def("unload", &cu::Module::unload);

  py::class_<cu::Stream>(m, "Stream")
      .def(py::init<bool>(), py::arg("non_blocking") = false)
      .def_property_readonly("handle", &cu::Stream::handle)
      .def("synchronize", &cu::Stream::synchronize, py::call_guard<py::gil_scoped_release>())
      .def("query", &cu::Stream::query, py::call_guard<py::gil_scoped_release>())
      .def("wait", &cu::Stream::wait, py::arg("timeout_s"),
           py::call_guard<py::gil_scoped_release>(),
           "Poll until idle (True) or timeout_s passed (False); raises CudaError on an error.");

  py::class_<cu::Graph>(m, "Graph", "An instantiated CUDA graph (Stream.end_capture).")
      .def("launch", &cu::Graph::launch, py::arg("stream") = nullptr,
           py::call_guard<py::gil_scoped_release>(), "cuGraphLaunch on `stream`.");
  m.def("begin_capture", &cu::begin_capture, py::arg("stream"),
        "Start capturing the work issued on `stream` (thread-local capture mode).");
  m.def("end_capture", &cu::end_capture, py::arg("stream"),
        "End the capture of `stream` and instantiate the graph; raises CudaError when the "
        "capture failed.");

  py::class_<cu::Event>(m, "Event")
      .def(py::init<>())
      .def("record", &cu::Event::record, py::arg("stream") = nullptr,
           py::call_guard<py::gil_scoped_release>())
      .def("synchronize", &cu::Event::synchronize, py::call_guard<py::gil_scoped_release>())
      .def("query", &cu::Event::query, py::call_guard<py::gil_scoped_release>())
      .def("elapsed_ms_since", &cu::Event::elapsed_ms_since, py::arg("start"));

  py::class_<cu::HostMapped>(m, "HostMapped", "Pinned host memory mapped into the device.")
      .def(py::init<std::size_t>(), py::arg("size"))
      .def_property_readonly("size", &cu::HostMapped::size)
      .def_property_readonly("device_pointer", &cu::HostMapped::device_pointer)
      .def("read", [](const cu::HostMapped& h, std::size_t offset, std::size_t size) {
             return py::bytes(h.read(offset, size));
           }, py::arg("offset"), py::arg("size"))
      .def("write", [](const cu::HostMapped& h, std::size_t offset, const py::bytes& data) {
             const std::string s(data);
             h.write(offset, s.data(), s.size());
           }, py::arg("offset"), py::arg("data"))
      .def("zero", &cu::HostMapped::zero);

  m.def("launch",
        [](const cu::Function& fn, const py::object& grid, const py::object& block,
           unsigned shared_mem, const py::list& params, const cu::Stream* stream,
           bool cooperative) {
          const cu::Dim3 g = to_dim3(grid, "grid"), b = to_dim3(block, "block");
          const std::vector<cu::KernelParam> values = to_params(params);
          py::gil_scoped_release release;  // a watchdog thread may need the GIL meanwhile
          cu::launch(fn, g, b, shared_mem, values, stream, cooperative);
        },
        py::arg("function"), py::arg("grid"), py::arg("block"), py::arg("shared_mem"),
        py::arg("params"), py::arg("stream") = nullptr, py::arg("cooperative") = false,
        "Launch `function`; params is a list of (kind, bytes) passed by value in order.");

  py::class_<cu::PreparedLaunch>(
      m, "PreparedLaunch",
      "A launch prepared once (parameter sizes checked against the cubin) and issued on any "
      "stream; `slots` name the 8-byte parameters given per launch.")
      .def(py::init([](const cu::Function& fn, const py::object& grid, const py::object& block,
                       unsigned shared_mem, const py::list& params,
                       std::vector<std::size_t> slots, bool cooperative,
                       std::uintptr_t context) {
             return new cu::PreparedLaunch(fn, to_dim3(grid, "grid"), to_dim3(block, "block"),
                                           shared_mem, to_params(params), std::move(slots),
                                           cooperative, context);
           }),
           py::arg("function"), py::arg("grid"), py::arg("block"), py::arg("shared_mem"),
           py::arg("params"), py::arg("slots") = std::vector<std::size_t>{},
           py::arg("cooperative") = false, py::arg("context") = 0)
      .def_property_readonly("slot_count", &cu::PreparedLaunch::slot_count)
      .def_property_readonly("name", &cu::PreparedLaunch::name)
      .def("launch", &cu::PreparedLaunch::launch, py::arg("stream"),
           py::arg("slots") = std::vector<std::uint64_t>{},
           py::call_guard<py::gil_scoped_release>(),
           "Launch on the raw CUstream `stream` with `slots` as the per-call parameters.");
  m.def("stream_query", &cu::stream_query, py::arg("stream"),
        py::call_guard<py::gil_scoped_release>(),
        "cuStreamQuery on a raw CUstream: True when idle; CudaError on an error.");

  m.def("memcpy_htod", [](std::uint64_t dst, const py::buffer& data) {
          const py::buffer_info info = contiguous(data);
          const std::size_t n = static_cast<std::size_t>(info.size * info.itemsize);
          py::gil_scoped_release release;
          cu::memcpy_htod(dst, info.ptr, n);
        }, py::arg("dst"), py::arg("data"), "Copy a contiguous buffer to device address dst.");
  m.def("memcpy_dtoh", [](std::uint64_t src, std::size_t size) {
          py::bytes out(nullptr, size);
          char* dst = PyBytes_AS_STRING(out.ptr());
          {
            py::gil_scoped_release release;
            cu::memcpy_dtoh(dst, src, size);
          }
          return out;
        }, py::arg("src"), py::arg("size"), "Copy `size` bytes from device address src.");
  m.def("memset_d8", [](std::uint64_t dst, unsigned char value, std::size_t size) {
          py::gil_scoped_release release;
          cu::memset_d8(dst, value, size);
        }, py::arg("dst"), py::arg("value"), py::arg("size"));
}

}  // namespace

PYBIND11_MODULE(_ccogen_rt, m) {
  m.doc() = "ccogen native runtime (CUDA driver loaded lazily with dlopen)";

  py::register_exception<cu::CudaUnavailable>(m, "CudaUnavailable", PyExc_RuntimeError);
  py::register_exception<cu::CudaError>(m, "CudaError", PyExc_RuntimeError);

  m.def("driver_available", &driver_available,
        "True when libcuda.so.1 loads and cuInit(0) succeeds; never raises.");
  m.def("driver_version", &driver_version,
        "cuDriverGetVersion(), e.g. 13000 for CUDA 13.0; raises CudaUnavailable without a "
        "driver.");
  m.def("device_count", &device_count,
        "Number of CUDA devices (0 when the driver reports none); raises CudaUnavailable "
        "without a usable driver.");
  bind_driver_objects(m);
  m.def("device_name", &device_name, py::arg("ordinal"),
        "Name of CUDA device `ordinal`; raises CudaUnavailable without a usable driver and "
        "IndexError for a bad ordinal.");
}
