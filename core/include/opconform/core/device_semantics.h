// Which device's semantics an operator follows (Note [Device-dependent semantics]).
//
//   SemanticDeviceGuard as_cuda(Device::cuda());      // around a reference call on host copies
//   Device d = semantic_device(input);                 // cuda here; input.device() without a guard
//
// Note [Device-dependent semantics]: a few PyTorch operators return different metadata on CUDA
// than on CPU, and PyTorch's own decompositions branch on `input.device.type`:
// native_layer_norm's mean/rstd and batch norm's saved statistics come in the input's dtype on
// CPU but in float32 for float16/bfloat16 input on CUDA, and batch norm in eval mode returns
// empty statistics on CPU but the running ones on CUDA. A reference kernel that checks a CUDA
// kernel runs on host copies of its tensors (reference_agreement, the OpInfo replay), so the
// tensors no longer say which device's rules apply: the caller says it with this guard. A fake
// kernel sees the fake tensor's own device, which is the same answer.
#pragma once

#include <optional>

#include "opconform/core/device.h"

namespace opconform {

class Tensor;

// Sets the device whose semantics operators follow on this thread for a scope; guards nest.
class SemanticDeviceGuard {
 public:
  explicit SemanticDeviceGuard(Device device);
  ~SemanticDeviceGuard();
  SemanticDeviceGuard(const SemanticDeviceGuard&) = delete;
  SemanticDeviceGuard& operator=(const SemanticDeviceGuard&) = delete;

 private:
  std::optional<Device> previous_;
};

// The innermost guard's device, else the tensor's own.
Device semantic_device(const Tensor& t);

}  // namespace opconform
