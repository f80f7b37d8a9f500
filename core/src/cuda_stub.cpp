// The CPU-only build's answers to the CUDA questions (the CUDA build compiles src/cuda/ instead).
#ifndef OPCONFORM_WITH_CUDA
#include "opconform/core/cuda.h"
#include "opconform/core/detail/cuda_fill.h"
#include "opconform/core/storage.h"

namespace opconform {
namespace detail {
Allocator* cuda_allocator() { return nullptr; }
bool cuda_fill(void*, const void*, size_t, int64_t, int) { return false; }
}  // namespace detail

namespace cuda {
bool compiled_with_cuda() { return false; }
std::optional<std::string> device_fault() { return std::nullopt; }
int device_count() { return 0; }
std::string unavailable_reason() { return "opconform was built without CUDA (nvcc not found at configure time)"; }
KernelTimer::KernelTimer(bool) {}
KernelTimer::~KernelTimer() = default;
}  // namespace cuda
}  // namespace opconform
#endif
