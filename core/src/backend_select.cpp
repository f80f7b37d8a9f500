#include "opconform/core/backend_select.h"

#include "opconform/core/registry.h"

namespace opconform {

KernelFunction backend_select_kernel(size_t device_index) {
  return KernelFunction::from_boxed([device_index](const OperatorHandle& handle, DispatchKeySet keys, Stack& stack) {
    const size_t base = stack.size() - handle.schema().arguments.size();
    const IValue& v = stack[base + device_index];
    const Device device = v.is_none() ? Device::cpu() : v.to<Device>();
    handle.redispatch_boxed(keys.add(backend_key(device.type)).after(DispatchKey::BackendSelect), stack);
  });
}

std::optional<size_t> factory_device_argument(const FunctionSchema& schema) {
  std::optional<size_t> device;
  for (size_t i = 0; i < schema.arguments.size(); ++i) {
    const Type& t = schema.arguments[i].type;
    if (t.base_kind() == TypeKind::kTensor) return std::nullopt;
    const Type& value = t.is_optional() ? t.elem() : t;
    if (value.kind() == TypeKind::kDevice && !device) device = i;
  }
  return device;
}

}  // namespace opconform
