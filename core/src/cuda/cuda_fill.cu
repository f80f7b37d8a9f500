// Device-side fill of contiguous CUDA memory with one element's byte pattern (fill_ and
// zeros/ones on CUDA tensors without a round trip through host memory).
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

#include "opconform/core/detail/cuda_fill.h"
#include "opconform/core/error.h"

namespace opconform::detail {
namespace {

template <typename Word>
__global__ void fill_kernel(Word* data, Word value, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    data[i] = value;
  }
}

struct Pair16 {
  uint64_t lo, hi;
};

template <typename Word>
void launch(void* data, const void* pattern, int64_t numel) {
  Word value;
  std::memcpy(&value, pattern, sizeof(Word));
  constexpr int threads = 256;
  int64_t blocks = (numel + threads - 1) / threads;
  if (blocks > 65535) blocks = 65535;
  fill_kernel<Word><<<static_cast<unsigned>(blocks), threads>>>(static_cast<Word*>(data), value, numel);
}

}  // namespace

bool cuda_fill(void* data, const void* pattern, size_t itemsize, int64_t numel, int device_index) {
  if (numel <= 0) return true;
  int previous = 0;
  cudaGetDevice(&previous);
  if (device_index >= 0 && device_index != previous) cudaSetDevice(device_index);
  switch (itemsize) {
    case 1: launch<uint8_t>(data, pattern, numel); break;
    case 2: launch<uint16_t>(data, pattern, numel); break;
    case 4: launch<uint32_t>(data, pattern, numel); break;
    case 8: launch<uint64_t>(data, pattern, numel); break;
    case 16: launch<Pair16>(data, pattern, numel); break;
    default: return false;
  }
  cudaError_t status = cudaDeviceSynchronize();
  if (device_index >= 0 && device_index != previous) cudaSetDevice(previous);
  OPCONFORM_CHECK(status == cudaSuccess, ErrorCode::kDevice, "CUDA fill kernel failed: ", cudaGetErrorString(status));
  return true;
}

}  // namespace opconform::detail
