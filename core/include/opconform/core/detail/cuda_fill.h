// Device-side fill for contiguous CUDA memory (src/cuda/cuda_fill.cu). Returns false when the
// build has no CUDA or the element size has no kernel; the caller then fills through the host.
#pragma once

#include <cstddef>
#include <cstdint>

namespace opconform::detail {
bool cuda_fill(void* data, const void* pattern, size_t itemsize, int64_t numel, int device_index);
}  // namespace opconform::detail
