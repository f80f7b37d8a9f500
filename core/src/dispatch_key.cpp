#include "opconform/core/dispatch_key.h"

#include <array>

#include "opconform/core/error.h"

namespace opconform {

std::string_view to_string(DispatchKey k) {
  switch (k) {
    case DispatchKey::Undefined: return "Undefined";
    case DispatchKey::CPU: return "CPU";
    case DispatchKey::CUDA: return "CUDA";
    case DispatchKey::Meta: return "Meta";
    case DispatchKey::PrivateUse1: return "PrivateUse1";
    case DispatchKey::PrivateUse2: return "PrivateUse2";
    case DispatchKey::PrivateUse3: return "PrivateUse3";
    case DispatchKey::Fake: return "Fake";
    case DispatchKey::BackendSelect: return "BackendSelect";
    case DispatchKey::AutogradOther: return "AutogradOther";
    case DispatchKey::AutogradCPU: return "AutogradCPU";
    case DispatchKey::AutogradCUDA: return "AutogradCUDA";
    case DispatchKey::AutogradMeta: return "AutogradMeta";
    case DispatchKey::AutogradPrivateUse1: return "AutogradPrivateUse1";
    case DispatchKey::AutogradPrivateUse2: return "AutogradPrivateUse2";
    case DispatchKey::AutogradPrivateUse3: return "AutogradPrivateUse3";
    case DispatchKey::Batched: return "Batched";
    case DispatchKey::AutocastCPU: return "AutocastCPU";
    case DispatchKey::AutocastCUDA: return "AutocastCUDA";
    case DispatchKey::Functionalize: return "Functionalize";
    case DispatchKey::Tracer: return "Tracer";
    case DispatchKey::DispatchMode: return "DispatchMode";
    case DispatchKey::Autograd: return "Autograd";
    case DispatchKey::CompositeExplicitAutograd: return "CompositeExplicitAutograd";
    case DispatchKey::CompositeImplicitAutograd: return "CompositeImplicitAutograd";
    case DispatchKey::EndOfAliasKeys: break;
  }
  return "Invalid";
}

std::optional<DispatchKey> parse_dispatch_key(std::string_view name) {
  for (int i = 0; i < static_cast<int>(DispatchKey::EndOfAliasKeys); ++i) {
    auto k = static_cast<DispatchKey>(i);
    if (to_string(k) == name) return k;
  }
  // PyTorch's spellings for the same backends.
  if (name == "cpu") return DispatchKey::CPU;
  if (name == "cuda") return DispatchKey::CUDA;
  if (name == "meta") return DispatchKey::Meta;
  if (name == "CompositeExplicit") return DispatchKey::CompositeExplicitAutograd;
  if (name == "CompositeImplicit") return DispatchKey::CompositeImplicitAutograd;
  return std::nullopt;
}

DispatchKey backend_key(DeviceType type) {
  switch (type) {
    case DeviceType::CPU: return DispatchKey::CPU;
    case DeviceType::CUDA: return DispatchKey::CUDA;
    case DeviceType::Meta: return DispatchKey::Meta;
    case DeviceType::PrivateUse1: return DispatchKey::PrivateUse1;
    case DeviceType::PrivateUse2: return DispatchKey::PrivateUse2;
    case DeviceType::PrivateUse3: return DispatchKey::PrivateUse3;
  }
  return DispatchKey::Undefined;
}

DispatchKey autograd_key(DeviceType type) {
  switch (type) {
    case DeviceType::CPU: return DispatchKey::AutogradCPU;
    case DeviceType::CUDA: return DispatchKey::AutogradCUDA;
    case DeviceType::Meta: return DispatchKey::AutogradMeta;
    case DeviceType::PrivateUse1: return DispatchKey::AutogradPrivateUse1;
    case DeviceType::PrivateUse2: return DispatchKey::AutogradPrivateUse2;
    case DeviceType::PrivateUse3: return DispatchKey::AutogradPrivateUse3;
  }
  return DispatchKey::AutogradOther;
}

std::optional<DeviceType> device_type_of(DispatchKey backend) {
  if (!is_backend_key(backend)) return std::nullopt;
  return static_cast<DeviceType>(static_cast<int>(backend) - static_cast<int>(DispatchKey::CPU));
}

std::vector<DispatchKey> DispatchKeySet::keys() const {
  std::vector<DispatchKey> out;
  for (uint64_t b = bits_; b != 0;) {
    auto k = static_cast<DispatchKey>(63 - std::countl_zero(b));
    out.push_back(k);
    b &= ~(uint64_t(1) << static_cast<int>(k));
  }
  return out;
}

std::string DispatchKeySet::to_string() const {
  std::string s = "DispatchKeySet(";
  bool first = true;
  for (auto k : keys()) {
    if (!first) s += ", ";
    s += opconform::to_string(k);
    first = false;
  }
  return s + ")";
}

DispatchKeySet runtime_keys_of(DispatchKey k) {
  using K = DispatchKey;
  switch (k) {
    case K::Autograd:
      return {K::AutogradOther, K::AutogradCPU, K::AutogradCUDA, K::AutogradMeta,
              K::AutogradPrivateUse1, K::AutogradPrivateUse2, K::AutogradPrivateUse3};
    case K::CompositeExplicitAutograd:
      return {K::CPU, K::CUDA, K::Meta, K::PrivateUse1, K::PrivateUse2, K::PrivateUse3};
    case K::CompositeImplicitAutograd:
      return runtime_keys_of(K::Autograd) | runtime_keys_of(K::CompositeExplicitAutograd);
    case K::EndOfAliasKeys:
    case K::Undefined:
      return {};
    default:
      return DispatchKeySet(k);
  }
}

IncludeDispatchKeyGuard::IncludeDispatchKeyGuard(DispatchKeySet keys)
    : previous_(local_dispatch_key_set().included) {
  local_dispatch_key_set().included = previous_ | keys;
}
IncludeDispatchKeyGuard::~IncludeDispatchKeyGuard() { local_dispatch_key_set().included = previous_; }

ExcludeDispatchKeyGuard::ExcludeDispatchKeyGuard(DispatchKeySet keys)
    : previous_(local_dispatch_key_set().excluded) {
  local_dispatch_key_set().excluded = previous_ | keys;
}
ExcludeDispatchKeyGuard::~ExcludeDispatchKeyGuard() { local_dispatch_key_set().excluded = previous_; }

}  // namespace opconform
