#include "opconform/core/device_semantics.h"

#include "opconform/core/tensor.h"

namespace opconform {
namespace {
thread_local std::optional<Device> tls_semantic_device;
}  // namespace

SemanticDeviceGuard::SemanticDeviceGuard(Device device) : previous_(tls_semantic_device) { tls_semantic_device = device; }
SemanticDeviceGuard::~SemanticDeviceGuard() { tls_semantic_device = previous_; }

Device semantic_device(const Tensor& t) { return tls_semantic_device ? *tls_semantic_device : t.device(); }

}  // namespace opconform
