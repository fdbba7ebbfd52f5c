// ccogen's minimal stand-in for <hip/hip_runtime.h>, used ONLY to compile-check generated
// HIP device code with Debian clang-22 and no ROCm (`-nogpuinc -nogpulib`,
// docs/reference/apis.md, MORI).  On a ROCm machine the real header is found instead.
// It provides exactly what the generated kernels and mori/cco/cco.hpp use.
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <type_traits>

#define __host__ __attribute__((host))
#define __device__ __attribute__((device))
#define __global__ __attribute__((global))
#define __shared__ __attribute__((shared))
#define __constant__ __attribute__((constant))
#define __launch_bounds__(n) __attribute__((amdgpu_flat_work_group_size(1, n)))

struct ccogen_shim_thread_idx {
  __declspec(property(get = get_x)) unsigned x;
  __device__ unsigned get_x() const { return __builtin_amdgcn_workitem_id_x(); }
};
struct ccogen_shim_block_idx {
  __declspec(property(get = get_x)) unsigned x;
  __device__ unsigned get_x() const { return __builtin_amdgcn_workgroup_id_x(); }
};
struct ccogen_shim_block_dim {
  __declspec(property(get = get_x)) unsigned x;
  __device__ unsigned get_x() const { return __builtin_amdgcn_workgroup_size_x(); }
};
extern const __device__ __attribute__((weak)) ccogen_shim_thread_idx threadIdx;
extern const __device__ __attribute__((weak)) ccogen_shim_block_idx blockIdx;
extern const __device__ __attribute__((weak)) ccogen_shim_block_dim blockDim;

__device__ inline void __syncthreads() {
  __builtin_amdgcn_fence(__ATOMIC_SEQ_CST, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_SEQ_CST, "workgroup");
}
__device__ inline void __threadfence() { __builtin_amdgcn_fence(__ATOMIC_SEQ_CST, "agent"); }
__device__ inline void __threadfence_system() { __builtin_amdgcn_fence(__ATOMIC_SEQ_CST, ""); }
