// DispatchKey and DispatchKeySet: which kernel of an operator runs.
//
// Keys are a plain ordered enum: a larger value has a higher priority. A DispatchKeySet is a
// 64-bit set of them; dispatch picks its highest key that has a kernel (see registry.h).
// From high to low (ARCHITECTURE.md): dispatch modes, functionalize/trace, autocast (per device),
// batched (vmap), autograd (per device), backend select, fake, backends.
// Alias keys (CompositeImplicitAutograd, CompositeExplicitAutograd, Autograd) are only used to
// register kernels; they never appear in a key set and are resolved when the dispatch table is
// computed.
#pragma once

#include <bit>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "opconform/core/device.h"

namespace opconform {

enum class DispatchKey : uint8_t {
  Undefined = 0,
  // Backends: where the data lives.
  CPU,
  CUDA,
  Meta,
  PrivateUse1,
  PrivateUse2,
  PrivateUse3,
  // Fake tensors: metadata-only execution through fake kernels.
  Fake,
  // Picks a backend for factory functions, which have no tensor argument to dispatch on.
  BackendSelect,
  // Autograd, one key per backend.
  AutogradOther,
  AutogradCPU,
  AutogradCUDA,
  AutogradMeta,
  AutogradPrivateUse1,
  AutogradPrivateUse2,
  AutogradPrivateUse3,
  // vmap.
  Batched,
  // Autocast, per device.
  AutocastCPU,
  AutocastCUDA,
  // Graph capture and functionalization.
  Functionalize,
  Tracer,
  // User dispatch modes (the counterpart of TorchDispatchMode / register_torch_dispatch).
  DispatchMode,

  EndOfRuntimeKeys,

  // Alias keys: registration only.
  Autograd = EndOfRuntimeKeys,  // every Autograd<Backend> key
  CompositeExplicitAutograd,     // every backend key (and Meta)
  CompositeImplicitAutograd,     // every backend and autograd key, when nothing more specific exists
  EndOfAliasKeys,
};

inline constexpr int kNumRuntimeKeys = static_cast<int>(DispatchKey::EndOfRuntimeKeys);
static_assert(kNumRuntimeKeys <= 64, "DispatchKeySet is one 64-bit word");

std::string_view to_string(DispatchKey k);
std::optional<DispatchKey> parse_dispatch_key(std::string_view name);
constexpr bool is_alias_key(DispatchKey k) { return k >= DispatchKey::EndOfRuntimeKeys; }
constexpr bool is_backend_key(DispatchKey k) {
  return k >= DispatchKey::CPU && k <= DispatchKey::PrivateUse3;
}
constexpr bool is_autograd_key(DispatchKey k) {
  return k >= DispatchKey::AutogradOther && k <= DispatchKey::AutogradPrivateUse3;
}

// The backend key and the autograd key of a device type.
DispatchKey backend_key(DeviceType type);
DispatchKey autograd_key(DeviceType type);
// The device type of a backend key; nullopt for non-backend keys.
std::optional<DeviceType> device_type_of(DispatchKey backend);

class DispatchKeySet {
 public:
  constexpr DispatchKeySet() = default;
  constexpr DispatchKeySet(DispatchKey k) : bits_(bit(k)) {}
  constexpr DispatchKeySet(std::initializer_list<DispatchKey> keys) {
    for (auto k : keys) bits_ |= bit(k);
  }
  static constexpr DispatchKeySet from_bits(uint64_t bits) {
    DispatchKeySet s;
    s.bits_ = bits;
    return s;
  }
  // All keys strictly below k (for redispatch below the current key). Bit 0 is Undefined's
  // position, which no set holds: it is masked out here and in all().
  static constexpr DispatchKeySet below(DispatchKey k) {
    return from_bits(k == DispatchKey::Undefined ? 0 : (bit(k) - 1) & ~uint64_t(1));
  }
  // All runtime keys.
  static constexpr DispatchKeySet all() {
    return from_bits((~uint64_t(0) >> (64 - kNumRuntimeKeys)) & ~uint64_t(1));
  }

  // The keys of this set strictly below k (what a kernel at k redispatches to).
  constexpr DispatchKeySet after(DispatchKey k) const { return *this & below(k); }

  constexpr bool has(DispatchKey k) const { return (bits_ & bit(k)) != 0; }
  constexpr bool empty() const { return bits_ == 0; }
  constexpr uint64_t bits() const { return bits_; }
  // The highest-priority key, Undefined when empty.
  constexpr DispatchKey highest() const {
    return bits_ == 0 ? DispatchKey::Undefined
                      : static_cast<DispatchKey>(63 - std::countl_zero(bits_));
  }
  constexpr DispatchKeySet add(DispatchKey k) const { return from_bits(bits_ | bit(k)); }
  constexpr DispatchKeySet remove(DispatchKey k) const { return from_bits(bits_ & ~bit(k)); }
  constexpr DispatchKeySet operator|(DispatchKeySet o) const { return from_bits(bits_ | o.bits_); }
  constexpr DispatchKeySet operator&(DispatchKeySet o) const { return from_bits(bits_ & o.bits_); }
  constexpr DispatchKeySet operator-(DispatchKeySet o) const { return from_bits(bits_ & ~o.bits_); }
  constexpr DispatchKeySet& operator|=(DispatchKeySet o) { bits_ |= o.bits_; return *this; }
  constexpr bool operator==(const DispatchKeySet&) const = default;

  std::vector<DispatchKey> keys() const;  // from high to low priority
  std::string to_string() const;          // "DispatchKeySet(AutogradCPU, CPU)"

 private:
  static constexpr uint64_t bit(DispatchKey k) {
    return k == DispatchKey::Undefined ? 0 : uint64_t(1) << static_cast<int>(k);
  }
  uint64_t bits_ = 0;
};

// The keys an alias key stands for; a runtime key stands for itself.
DispatchKeySet runtime_keys_of(DispatchKey k);

// Thread-local include and exclude sets: every dispatch computes
//   (keys of the tensor arguments | included) - excluded
// RAII guards change them for a scope (autocast turns its key on, a kernel that redispatches
// below autograd excludes the autograd keys, ...).
struct LocalDispatchKeySet {
  DispatchKeySet included;
  DispatchKeySet excluded;
};
namespace detail {
// Trivially constructed, so access needs no TLS init guard (it is read on every dispatch).
inline thread_local LocalDispatchKeySet tls_local_dispatch_key_set{};
}  // namespace detail
inline LocalDispatchKeySet& local_dispatch_key_set() { return detail::tls_local_dispatch_key_set; }

class IncludeDispatchKeyGuard {
 public:
  explicit IncludeDispatchKeyGuard(DispatchKeySet keys);
  ~IncludeDispatchKeyGuard();
  IncludeDispatchKeyGuard(const IncludeDispatchKeyGuard&) = delete;
  IncludeDispatchKeyGuard& operator=(const IncludeDispatchKeyGuard&) = delete;

 private:
  DispatchKeySet previous_;
};

class ExcludeDispatchKeyGuard {
 public:
  explicit ExcludeDispatchKeyGuard(DispatchKeySet keys);
  ~ExcludeDispatchKeyGuard();
  ExcludeDispatchKeyGuard(const ExcludeDispatchKeyGuard&) = delete;
  ExcludeDispatchKeyGuard& operator=(const ExcludeDispatchKeyGuard&) = delete;

 private:
  DispatchKeySet previous_;
};

}  // namespace opconform
