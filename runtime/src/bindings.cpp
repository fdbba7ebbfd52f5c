// ccogen._ccogen_rt: the native runtime.  For now: driver discovery only.
#include <pybind11/pybind11.h>

#include <string>

#include "ccogen_rt/cuda_loader.hpp"

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
  m.def("device_name", &device_name, py::arg("ordinal"),
        "Name of CUDA device `ordinal`; raises CudaUnavailable without a usable driver and "
        "IndexError for a bad ordinal.");
}
