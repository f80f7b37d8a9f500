// The CUDA runtime, loaded when first needed (dlopen) instead of linked: Note [The CUDA runtime
// at run time]. Private to core/src/cuda/.
#pragma once
#include <cuda_runtime_api.h>

#include <string>

namespace opconform::detail {

// The runtime functions core calls. Null when the runtime could not be loaded (`why` says why).
struct CudaRuntime {
  cudaError_t (*get_device_count)(int*) = nullptr;
  const char* (*get_error_string)(cudaError_t) = nullptr;
  cudaError_t (*get_device)(int*) = nullptr;
  cudaError_t (*set_device)(int) = nullptr;
  cudaError_t (*malloc)(void**, size_t) = nullptr;
  cudaError_t (*free)(void*) = nullptr;
  cudaError_t (*memcpy)(void*, const void*, size_t, cudaMemcpyKind) = nullptr;
  cudaError_t (*device_synchronize)() = nullptr;
  // Stream-ordered allocation (CUDA 11.2+; null when the runtime lacks it): Note [Stream-ordered
  // CUDA memory].
  cudaError_t (*malloc_async)(void**, size_t, cudaStream_t) = nullptr;
  cudaError_t (*free_async)(void*, cudaStream_t) = nullptr;
  cudaError_t (*device_get_default_mem_pool)(cudaMemPool_t*, int) = nullptr;
  cudaError_t (*mem_pool_set_attribute)(cudaMemPool_t, cudaMemPoolAttr, void*) = nullptr;
  bool traced = false;  // OPCONFORM_CUDA_TRACE: the functions above count and time each call
  std::string library;  // the file loaded
  std::string why;      // empty when loaded

  bool loaded() const { return why.empty(); }
};

// Loaded once per process: OPCONFORM_CUDA_RUNTIME names the library when set ("none": do not
// load one), else libcudart.so.<the major this build was compiled with>, found as the dynamic
// loader finds libraries (LD_LIBRARY_PATH, this program's RUNPATH, the system's paths), then in
// /usr/local/cuda/lib64.
const CudaRuntime& cuda_runtime();

}  // namespace opconform::detail
