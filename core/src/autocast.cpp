// Autocast state and the autocast kernel (see autocast.h).
#include "opconform/core/autocast.h"

#include <optional>
#include <vector>

#include "opconform/core/error.h"
#include "opconform/core/registry.h"
#include "opconform/core/vmap.h"

namespace opconform {
namespace {

struct AutocastState {
  bool enabled = false;
  DType dtype;
};

// One state per supported device type; trivial types, so reading them needs no TLS init guard.
thread_local AutocastState tls_cpu{false, DType::BFloat16};
thread_local AutocastState tls_cuda{false, DType::Float16};

AutocastState* state_of(DeviceType type) {
  switch (type) {
    case DeviceType::CPU: return &tls_cpu;
    case DeviceType::CUDA: return &tls_cuda;
    default: return nullptr;
  }
}

AutocastState& checked_state_of(DeviceType type) {
  AutocastState* s = state_of(type);
  OPCONFORM_CHECK(s != nullptr, ErrorCode::kInvalidArgument, "autocast supports the cpu and cuda device types, not '",
                  device_type_name(type), "'");
  return *s;
}

// PyTorch's autocast never touches float64: it is asked for explicitly, not a default to lower.
bool eligible(const Tensor& t, DeviceType device_type) {
  if (!t.defined() || t.device().type != device_type) return false;
  DType d = t.dtype();
  return d == DType::Float16 || d == DType::BFloat16 || d == DType::Float32;
}

Tensor cast(const Tensor& t, DType dtype) {
  // A vmap wrapper has no data of its own (vmap.h): cast the physical value and wrap it again,
  // so autocast (a higher key than Batched) works on vmapped calls.
  if (const BatchedInfo* info = batched_info(t)) return make_batched(cast(info->value, dtype), info->bdim, info->level);
  return t.to(dtype);
}

void cast_argument(IValue& v, DeviceType device_type, DType dtype) {
  auto cast_one = [&](const Tensor& t) { return eligible(t, device_type) ? cast(t, dtype) : t; };
  if (v.is_tensor()) {
    v = IValue(cast_one(v.to_tensor()));
  } else if (auto* list = v.get_if<std::vector<Tensor>>()) {
    std::vector<Tensor> out;
    out.reserve(list->size());
    for (const auto& t : *list) out.push_back(cast_one(t));
    v = IValue(std::move(out));
  } else if (auto* list = v.get_if<std::vector<std::optional<Tensor>>>()) {
    std::vector<std::optional<Tensor>> out;
    out.reserve(list->size());
    for (const auto& t : *list) out.push_back(t ? std::optional<Tensor>(cast_one(*t)) : std::nullopt);
    v = IValue(std::move(out));
  }
}

constexpr DispatchKeySet kAutocastKeys{DispatchKey::AutocastCPU, DispatchKey::AutocastCUDA};

}  // namespace

DispatchKey autocast_key(DeviceType device_type) {
  checked_state_of(device_type);
  return device_type == DeviceType::CPU ? DispatchKey::AutocastCPU : DispatchKey::AutocastCUDA;
}

AutocastGuard::AutocastGuard(DeviceType device_type, DType dtype, bool enabled) : device_type_(device_type) {
  AutocastState& state = checked_state_of(device_type);
  OPCONFORM_CHECK(is_floating(dtype), ErrorCode::kInvalidArgument, "autocast: dtype must be a floating type, got ",
                  name(dtype));
  DispatchKey key = autocast_key(device_type);
  auto& local = local_dispatch_key_set();
  previous_enabled_ = state.enabled;
  previous_dtype_ = state.dtype;
  previous_key_included_ = local.included.has(key);
  state = {enabled, dtype};
  local.included = enabled ? local.included.add(key) : local.included.remove(key);
}

AutocastGuard::~AutocastGuard() {
  AutocastState& state = *state_of(device_type_);
  state = {previous_enabled_, previous_dtype_};
  DispatchKey key = device_type_ == DeviceType::CPU ? DispatchKey::AutocastCPU : DispatchKey::AutocastCUDA;
  auto& local = local_dispatch_key_set();
  local.included = previous_key_included_ ? local.included.add(key) : local.included.remove(key);
}

bool autocast_enabled(DeviceType device_type) {
  const AutocastState* s = state_of(device_type);
  return s != nullptr && s->enabled;
}

DType autocast_dtype(DeviceType device_type) { return checked_state_of(device_type).dtype; }

KernelFunction make_autocast_kernel(DeviceType device_type, DType cast_dtype) {
  autocast_key(device_type);  // validates the device type at registration time
  OPCONFORM_CHECK(is_floating(cast_dtype), ErrorCode::kRegistration,
                  "make_autocast_kernel: cast dtype must be a floating type, got ", name(cast_dtype));
  return KernelFunction::from_boxed([device_type, cast_dtype](const OperatorHandle& op, DispatchKeySet keys,
                                                              Stack& stack) {
    const size_t n = op.schema().arguments.size();
    for (size_t i = stack.size() - n; i < stack.size(); ++i) cast_argument(stack[i], device_type, cast_dtype);
    // Excluded, not just skipped in `keys`: the kernels below call other operators, which must
    // not be autocast a second time (PyTorch's autocast does the same).
    ExcludeDispatchKeyGuard no_autocast(kAutocastKeys);
    op.redispatch_boxed(keys - kAutocastKeys, stack);
  });
}

namespace {

// The widest floating type among the eligible tensors of `v` and `to` (PyTorch's promote_type).
DType widest(const IValue& v, DeviceType device_type, DType to) {
  auto one = [&](const Tensor& t) {
    if (eligible(t, device_type)) to = promote_types(to, t.dtype());
  };
  if (v.is_tensor()) one(v.to_tensor());
  else if (auto* list = v.get_if<std::vector<Tensor>>()) for (const auto& t : *list) one(t);
  else if (auto* opt = v.get_if<std::vector<std::optional<Tensor>>>()) for (const auto& t : *opt) if (t) one(*t);
  return to;
}

bool first_tensor_eligible(const Stack& stack, size_t begin, DeviceType device_type) {
  for (size_t i = begin; i < stack.size(); ++i)
    if (stack[i].is_tensor()) return eligible(stack[i].to_tensor(), device_type);
  return false;
}

}  // namespace

KernelFunction make_autocast_kernel(DeviceType device_type, CastPolicy policy) {
  autocast_key(device_type);  // validates the device type at registration time
  return KernelFunction::from_boxed([device_type, policy](const OperatorHandle& op, DispatchKeySet keys, Stack& stack) {
    const auto& arguments = op.schema().arguments;
    const size_t begin = stack.size() - arguments.size();
    switch (policy) {
      case CastPolicy::LowerPrecisionFp:
      case CastPolicy::Fp32: {
        const DType to = policy == CastPolicy::Fp32 ? DType::Float32 : autocast_dtype(device_type);
        for (size_t i = begin; i < stack.size(); ++i) cast_argument(stack[i], device_type, to);
        break;
      }
      case CastPolicy::Promote: {
        DType to = autocast_dtype(device_type);
        for (size_t i = begin; i < stack.size(); ++i) to = widest(stack[i], device_type, to);
        for (size_t i = begin; i < stack.size(); ++i) cast_argument(stack[i], device_type, to);
        break;
      }
      case CastPolicy::Fp32SetOptDtype: {
        if (!first_tensor_eligible(stack, begin, device_type)) break;
        for (size_t i = 0; i < arguments.size(); ++i) {
          const Type& t = arguments[i].type;
          if (t.is_optional() && t.elem().kind() == TypeKind::kScalarType && stack[begin + i].is_none())
            stack[begin + i] = IValue(DType::Float32);
        }
        break;
      }
    }
    ExcludeDispatchKeyGuard no_autocast(kAutocastKeys);
    op.redispatch_boxed(keys - kAutocastKeys, stack);
  });
}

}  // namespace opconform
