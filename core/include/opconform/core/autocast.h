// Autocast: torch.autocast and torch.library.register_autocast.
//
//   Library lib("mylib", LibraryKind::IMPL);
//   lib.impl("mm", make_autocast_kernel(DeviceType::CPU, DType::BFloat16), DispatchKey::AutocastCPU);
//   {
//     AutocastGuard autocast(DeviceType::CPU, DType::BFloat16);
//     mm(a, b);  // runs on bfloat16 copies of a and b
//   }
//
// The state (enabled, dtype) is thread-local and per device type (CPU and CUDA, as PyTorch).
// Enabling it includes the device's autocast key (AutocastCPU / AutocastCUDA) in the thread's
// dispatch key set; operators with an autocast kernel at that key cast their inputs, operators
// without one skip the key (no fallback is registered) and are unaffected.
#pragma once

#include "opconform/core/device.h"
#include "opconform/core/dispatch_key.h"
#include "opconform/core/dtype.h"
#include "opconform/core/kernel.h"

namespace opconform {

// Sets the autocast state of one device type for a scope and restores the previous state
// (enabled flag, dtype and the thread-local autocast key) when it ends. Guards nest; an inner
// guard with enabled = false turns autocast off for its scope.
class AutocastGuard {
 public:
  AutocastGuard(DeviceType device_type, DType dtype, bool enabled = true);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  DeviceType device_type_;
  bool previous_enabled_;
  DType previous_dtype_;
  bool previous_key_included_;
};

// The current state for a device type (CPU or CUDA; other types are never enabled). The dtype
// defaults to PyTorch's: bfloat16 on CPU, float16 on CUDA.
bool autocast_enabled(DeviceType device_type);
DType autocast_dtype(DeviceType device_type);

// The autocast key of a device type (AutocastCPU or AutocastCUDA; an error for other types).
DispatchKey autocast_key(DeviceType device_type);

// A boxed kernel for the device's autocast key (register_autocast(op, device_type, cast_inputs)):
// casts the floating-point tensor arguments on that device -- float16, bfloat16 and float32, but
// not float64, as PyTorch -- to cast_dtype (tensors inside Tensor[] and Tensor?[] arguments too),
// then runs the operator once on the cast values with both autocast keys excluded, so neither the
// operator nor anything its kernels call is autocast again.
KernelFunction make_autocast_kernel(DeviceType device_type, DType cast_dtype);

// The cast policies of PyTorch's own autocast lists (aten/src/ATen/autocast_mode.h), for
// operators that follow them (the reference registers its Core ATen ops' rules with these):
//   LowerPrecisionFp: eligible inputs to the autocast dtype of the guard (mm, conv, ...);
//   Fp32:             eligible inputs to float32 (exp, log, pow, layer norm, padding, ...);
//   Fp32SetOptDtype:  when the first argument is an eligible tensor, each `ScalarType?` argument
//                     left None becomes float32 and nothing is cast (sum, prod, cumsum, softmax);
//   Promote:          eligible inputs to the widest floating type among them and the autocast
//                     dtype (cat, atan2, index_put, scatter_add).
// Eligible: a float16, bfloat16 or float32 tensor on the device (float64 never), in Tensor[] and
// Tensor?[] arguments too. The op then runs once with both autocast keys excluded.
enum class CastPolicy { LowerPrecisionFp, Fp32, Fp32SetOptDtype, Promote };
KernelFunction make_autocast_kernel(DeviceType device_type, CastPolicy policy);

}  // namespace opconform
