// Note [The CUDA runtime at run time]: a CUDA-enabled opconform must start, and check CPU
// libraries, on a machine without the CUDA runtime (an installed package copied to a CPU-only CI
// runner; a container without the toolkit). So core does not link libcudart: it loads it on first
// use, and a machine without it is a machine without CUDA, with the reason ("CUDA unavailable:
// libcudart.so.13: cannot open shared object file") wherever CUDA is asked for. Plugins with CUDA
// kernels link the runtime themselves; the process then has one copy (the loader shares it).
#include "cuda_runtime.h"

#include <dlfcn.h>

#include <cstdlib>
#include <vector>

namespace opconform::detail {
namespace {

template <typename F>
bool bind(void* handle, const char* name, F& out, std::string& why) {
  out = reinterpret_cast<F>(dlsym(handle, name));
  if (out == nullptr && why.empty()) why = std::string("the CUDA runtime has no ") + name;
  return out != nullptr;
}

CudaRuntime load() {
  CudaRuntime r;
  std::vector<std::string> candidates;
  const char* named = std::getenv("OPCONFORM_CUDA_RUNTIME");
  if (named != nullptr && std::string(named) == "none") {
    r.why = "OPCONFORM_CUDA_RUNTIME=none";
    return r;
  }
  const std::string soname = "libcudart.so." + std::to_string(CUDART_VERSION / 1000);
  if (named != nullptr && *named != '\0') {
    candidates = {named};
  } else {
    candidates = {soname, "/usr/local/cuda/lib64/" + soname};
  }
  void* handle = nullptr;
  std::string errors;
  for (const auto& c : candidates) {
    handle = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) {
      r.library = c;
      break;
    }
    const char* e = dlerror();
    errors += (errors.empty() ? "" : "; ") + std::string(e != nullptr ? e : c + ": cannot be loaded");
  }
  if (handle == nullptr) {
    r.why = "cannot load the CUDA runtime (" + errors + ")";
    return r;
  }
  std::string why;
  bind(handle, "cudaGetDeviceCount", r.get_device_count, why);
  bind(handle, "cudaGetErrorString", r.get_error_string, why);
  bind(handle, "cudaGetDevice", r.get_device, why);
  bind(handle, "cudaSetDevice", r.set_device, why);
  bind(handle, "cudaMalloc", r.malloc, why);
  bind(handle, "cudaFree", r.free, why);
  bind(handle, "cudaMemcpy", r.memcpy, why);
  bind(handle, "cudaDeviceSynchronize", r.device_synchronize, why);
  r.why = why.empty() ? "" : why + " (" + r.library + ")";
  return r;  // never closed: allocations made through it live until exit
}

}  // namespace

const CudaRuntime& cuda_runtime() {
  static const CudaRuntime runtime = load();
  return runtime;
}

}  // namespace opconform::detail
