// CUDA memory through the CUDA runtime (loaded at run time: cuda_runtime.h): stream-ordered
// allocations from the device's memory pool (cudaMalloc / cudaFree where the runtime or device has
// none) and host<->device copies.
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
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

// Note [Stream-ordered CUDA memory]: a check makes thousands of small tensors per sample (an
// ATen CUDA stride_invariance case: 38,066 allocations, 103,773 copies), and cudaFree waits for
// the whole device. So core allocates from the device's default memory pool on the legacy default
// stream (cudaMallocAsync / cudaFreeAsync): a free waits for nothing, the memory is reused by later
// work on that stream only (kernels on other blocking streams are ordered with it), and the pool
// keeps what it holds (release threshold: everything) instead of returning it at each
// synchronisation. Measured on an H200 with 8 workers: 9% more results in the same time (204 vs
// 187); what dominates there is the GPU's time slicing between worker processes (Note [One CUDA
// worker per GPU]). OPCONFORM_CUDA_ALLOCATOR=plain restores cudaMalloc / cudaFree (to compare,
// or for a driver without memory pools, which is detected).
bool use_memory_pool(int device) {
  static std::mutex mutex;
  static std::array<int8_t, 64> state{};  // 0 unknown, 1 pool, -1 plain
  if (device < 0 || device >= static_cast<int>(state.size())) return false;
  std::lock_guard<std::mutex> lock(mutex);
  if (state[device] == 0) {
    const char* choice = std::getenv("OPCONFORM_CUDA_ALLOCATOR");
    const auto& r = rt();
    cudaMemPool_t pool = nullptr;
    uint64_t keep_all = UINT64_MAX;
    const bool ok = (choice == nullptr || std::string(choice) != "plain") && r.malloc_async && r.free_async &&
                    r.device_get_default_mem_pool && r.mem_pool_set_attribute &&
                    r.device_get_default_mem_pool(&pool, device) == cudaSuccess &&
                    r.mem_pool_set_attribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_all) == cudaSuccess;
    state[device] = ok ? 1 : -1;
  }
  return state[device] == 1;
}

std::atomic<bool> g_used{false};  // this process allocated CUDA memory (device_fault)

class CudaAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes, Device device) override {
    OPCONFORM_CHECK(cuda::is_available(), ErrorCode::kDevice, "cannot allocate on ", device.to_string(),
                    ": ", cuda::unavailable_reason());
    if (nbytes == 0) return nullptr;
    g_used.store(true, std::memory_order_relaxed);
    DeviceGuard guard(device);
    void* p = nullptr;
    int current = 0;
    check(rt().get_device(&current), "cudaGetDevice");
    if (use_memory_pool(current)) {
      check(rt().malloc_async(&p, nbytes, nullptr), "cudaMallocAsync");
    } else {
      check(rt().malloc(&p, nbytes), "cudaMalloc");
    }
    return p;
  }
  void deallocate(void* data, Device device) override {
    if (data == nullptr) return;
    int index = device.index;
    if (index < 0 && rt().get_device(&index) != cudaSuccess) index = -1;
    if (use_memory_pool(index)) {  // decided at the device's first allocation: the same as then
      rt().free_async(data, nullptr);
    } else {
      rt().free(data);
    }
  }
  void copy_from_host(void* dst, const void* src, size_t n, Device device) override {
    DeviceGuard guard(device);
    check(rt().memcpy(dst, src, n, cudaMemcpyHostToDevice), "cudaMemcpy host to device");
  }
  void copy_to_host(void* dst, const void* src, size_t n, Device device) override {
    DeviceGuard guard(device);
    check(rt().memcpy(dst, src, n, cudaMemcpyDeviceToHost), "cudaMemcpy device to host");
  }
  // On the legacy default stream, as every copy and allocation here (Note [Stream-ordered CUDA memory]).
  void copy_on_device(void* dst, const void* src, size_t n, Device device) override {
    DeviceGuard guard(device);
    check(rt().memcpy(dst, src, n, cudaMemcpyDeviceToDevice), "cudaMemcpy device to device");
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
std::optional<std::string> device_fault() {
  if (!g_used.load(std::memory_order_relaxed)) return std::nullopt;
  const cudaError_t status = rt().device_synchronize();
  if (status == cudaSuccess) return std::nullopt;
  return std::string(rt().get_error_string(status)) + " (error " + std::to_string(static_cast<int>(status)) + ")";
}
int device_count() { return probe().count; }
std::string unavailable_reason() { return probe().reason; }
}  // namespace cuda
}  // namespace opconform
