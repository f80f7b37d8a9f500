// Device-side fill of contiguous CUDA memory with one element's byte pattern (fill_ and
// zeros/ones on CUDA tensors without a round trip of the whole tensor through host memory): one
// block of the pattern is copied from the host, then doubled by device-to-device copies, so the
// fill costs O(log n) runtime calls and needs no kernel of ours (Note [The CUDA runtime at run
// time]: core holds no device code, so it needs no CUDA runtime to start).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "cuda_runtime.h"
#include "opconform/core/detail/cuda_fill.h"
#include "opconform/core/error.h"

namespace opconform::detail {
namespace {

constexpr size_t kHostBlockBytes = 64 * 1024;

void check(cudaError_t status, const char* what) {
  const CudaRuntime& rt = cuda_runtime();
  OPCONFORM_CHECK(status == cudaSuccess, ErrorCode::kDevice, "CUDA fill: ", what, " failed: ", rt.get_error_string(status));
}

}  // namespace

bool cuda_fill(void* data, const void* pattern, size_t itemsize, int64_t numel, int device_index) {
  if (numel <= 0) return true;
  if (itemsize == 0 || itemsize > 16) return false;
  const CudaRuntime& rt = cuda_runtime();
  OPCONFORM_CHECK(rt.loaded(), ErrorCode::kDevice, "CUDA fill: ", rt.why);
  int previous = 0;
  check(rt.get_device(&previous), "cudaGetDevice");
  if (device_index >= 0 && device_index != previous) check(rt.set_device(device_index), "cudaSetDevice");
  const size_t total = itemsize * static_cast<size_t>(numel);
  const size_t first = std::min(total, kHostBlockBytes / itemsize * itemsize);
  std::vector<unsigned char> block(first);
  for (size_t at = 0; at < first; at += itemsize) std::memcpy(block.data() + at, pattern, itemsize);
  auto* bytes = static_cast<unsigned char*>(data);
  cudaError_t status = rt.memcpy(bytes, block.data(), first, cudaMemcpyHostToDevice);
  // Each copy doubles the filled prefix (a whole number of elements, so the pattern stays aligned).
  for (size_t filled = first; status == cudaSuccess && filled < total;) {
    const size_t n = std::min(filled, total - filled);
    status = rt.memcpy(bytes + filled, bytes, n, cudaMemcpyDeviceToDevice);
    filled += n;
  }
  if (device_index >= 0 && device_index != previous) rt.set_device(previous);
  check(status, "cudaMemcpy");
  return true;
}

}  // namespace opconform::detail
