// CUDA memory through the CUDA runtime: cudaMalloc / cudaFree and host<->device copies.
#include <cuda_runtime_api.h>

#include <mutex>
#include <string>

#include "opconform/core/cuda.h"
#include "opconform/core/error.h"
#include "opconform/core/storage.h"

namespace opconform {
namespace {

void check(cudaError_t status, const char* what) {
  OPCONFORM_CHECK(status == cudaSuccess, ErrorCode::kDevice, what, " failed: ", cudaGetErrorString(status));
}

class DeviceGuard {
 public:
  explicit DeviceGuard(Device d) {
    check(cudaGetDevice(&previous_), "cudaGetDevice");
    int target = d.index < 0 ? previous_ : d.index;
    if (target != previous_) check(cudaSetDevice(target), "cudaSetDevice");
  }
  ~DeviceGuard() { cudaSetDevice(previous_); }

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
    check(cudaMalloc(&p, nbytes), "cudaMalloc");
    return p;
  }
  void deallocate(void* data, Device device) override {
    if (data != nullptr) cudaFree(data);
  }
  void copy_from_host(void* dst, const void* src, size_t n, Device device) override {
    DeviceGuard guard(device);
    check(cudaMemcpy(dst, src, n, cudaMemcpyHostToDevice), "cudaMemcpy host to device");
  }
  void copy_to_host(void* dst, const void* src, size_t n, Device device) override {
    DeviceGuard guard(device);
    check(cudaMemcpy(dst, src, n, cudaMemcpyDeviceToHost), "cudaMemcpy device to host");
  }
};

struct Probe {
  int count = 0;
  std::string reason;
};

const Probe& probe() {
  static const Probe result = [] {
    Probe p;
    int count = 0;
    cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) {
      // Without a GPU this is an error (e.g. 35, insufficient driver) and count is left unset.
      p.count = 0;
      p.reason = std::string("cudaGetDeviceCount returned error ") + std::to_string(static_cast<int>(status)) +
                 " (" + cudaGetErrorString(status) + ")";
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
