// CUDA availability. Always safe to call: in a build without CUDA, or on a machine without a
// GPU (cudaGetDeviceCount then returns an error and leaves the count unset), the answer is
// "not available" with the reason, so tests can skip with it.
#pragma once

#include <string>

namespace opconform::cuda {

// True when opconform was built with CUDA support.
bool compiled_with_cuda();
// Number of usable GPUs; 0 when none or when CUDA support is not compiled in.
int device_count();
inline bool is_available() { return device_count() > 0; }
// Why CUDA is not available ("built without CUDA", "cudaGetDeviceCount: ..."), empty when it is.
std::string unavailable_reason();

}  // namespace opconform::cuda
