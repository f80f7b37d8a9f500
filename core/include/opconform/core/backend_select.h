// BackendSelect for factories: an operator with no tensor argument (aten::full, aten::arange, a
// plugin's own creation op) has no tensor to take a backend key from, so the dispatcher reaches
// DispatchKey::BackendSelect with no backend at all. Its BackendSelect kernel adds the backend of
// the op's `Device? device` argument (cpu when None) and redispatches below BackendSelect (to
// Fake first under a FakeTensorMode, then CPU, CUDA...), as PyTorch's generated BackendSelect
// kernels do. The reference registers it for its factories; the plugin loader for every plugin op
// whose schema is a factory's, so a plugin's factory kernels are called and checked like others.
#pragma once

#include <cstddef>
#include <optional>

#include "opconform/core/kernel.h"
#include "opconform/core/schema.h"

namespace opconform {

// The kernel, for an op whose Device argument is argument `device_index` (schema order).
KernelFunction backend_select_kernel(size_t device_index);

// The index of the Device argument of a factory schema: no argument holds a tensor (Tensor,
// Tensor?, Tensor[]...) and one is a Device or Device?. nullopt for any other schema.
std::optional<size_t> factory_device_argument(const FunctionSchema& schema);

}  // namespace opconform
