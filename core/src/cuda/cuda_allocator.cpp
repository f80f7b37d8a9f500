// CUDA memory through the CUDA runtime (loaded at run time: cuda_runtime.h): cudaMalloc /
// cudaFree and host<->device copies.
#include <mutex>
#include <string>

#include "cuda_runtime.h"
#include "opconform/core/cuda.h"
#include "opconform/core/error.h"
#include "opconform/core/storage.h"

namespace opconform {
namespace {

const detail::CudaRuntime& rt() { return detail::cuda_runtime(); }

void check(cudaError_t status, const char* what) {
  OPCONFORM_CHECK(status == cudaSuccess, ErrorCode::kDevice, what, " failed: ", rt().get_error_string(status));
}

class DeviceGuard {
 public:
  explicit DeviceGuard(Device d) {
    check(rt().get_device(&previous_), "cudaGetDevice");
    int target = d.index < 0 ? previous_ : d.index;
    if (target != previous_) check(rt().set_device(target), "cudaSetDevice");
  }
  ~DeviceGuard() { rt().set_device(previous_); }

 private:
  int previous_ = 0;
};

class CudaAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes, Device device) override {
    OPCONFORM_CHECK(cuda::is_available(), ErrorCode::kDevice, "cannot allocate on ", device.to_string(),
                    ": ", cuda::unavailable_reason());
    if (nbytes == 0) return nullptr;
    DeviceGuard guard(device);
    void* p = nullptr;
    check(rt().malloc(&p, nbytes), "cudaMalloc");
    return p;
  }
  void deallocate(void* data, Device device) override {
    if (data != nullptr) rt().free(data);
  }
  void copy_from_host(void* dst, const void* src, size_t n, Device device) override {
    DeviceGuard guard(device);
    check(rt().memcpy(dst, src, n, cudaMemcpyHostToDevice), "cudaMemcpy host to device");
  }
  void copy_to_host(void* dst, const void* src, size_t n, Device device) override {
    DeviceGuard guard(device);
    check(rt().memcpy(dst, src, n, cudaMemcpyDeviceToHost), "cudaMemcpy device to host");
  }
};

struct Probe {
  int count = 0;
  std::string reason;
};

const Probe& probe() {
  static const Probe result = [] {
    Probe p;
    if (!rt().loaded()) {  // Note [The CUDA runtime at run time]
      p.reason = "CUDA unavailable: " + rt().why;
      return p;
    }
    int count = 0;
    cudaError_t status = rt().get_device_count(&count);
    if (status != cudaSuccess) {
      // Without a GPU this is an error (e.g. 35, insufficient driver) and count is left unset.
      p.count = 0;
      p.reason = std::string("cudaGetDeviceCount returned error ") + std::to_string(static_cast<int>(status)) +
                 " (" + rt().get_error_string(status) + ")";
    } else if (count == 0) {
      p.reason = "no CUDA device found";
    } else {
      p.count = count;
    }
    return p;
  }();
  return result;
}

}  // namespace

namespace detail {
Allocator* cuda_allocator() {
  static CudaAllocator allocator;
  return &allocator;
}
}  // namespace detail

namespace cuda {
bool compiled_with_cuda() { return true; }
int device_count() { return probe().count; }
std::string unavailable_reason() { return probe().reason; }
}  // namespace cuda
}  // namespace opconform
