// Describing and cloning samples (sample.h).
#include "opconform/conformance/sample.h"

#include <cstdio>
#include <cstring>
#include <map>
#include <sstream>
#include <vector>

#include "opconform/core/autograd.h"
#include "opconform/core/storage.h"

namespace opconform::conformance {
namespace {

void describe_tensor(std::ostream& out, const Tensor& t) {
  if (!t.defined()) {
    out << "undefined";
    return;
  }
  out << name(t.dtype()) << shape_string(t.sizes());
  // Only what differs from a plain contiguous CPU tensor: that is what explains a failure.
  if (!t.is_contiguous()) {
    out << " strides " << shape_string(t.strides());
  }
  if (t.storage_offset() != 0) out << " offset " << t.storage_offset();
  if (!t.device().is_cpu()) out << " on " << t.device().to_string();
  if (t.requires_grad()) out << " requires_grad";
}

void describe_value(std::ostream& out, const IValue& v) {
  if (v.is_tensor()) {
    describe_tensor(out, v.to_tensor());
  } else if (v.is_tensor_list()) {
    out << "[";
    const auto& l = v.to_tensor_list();
    for (size_t i = 0; i < l.size(); ++i) {
      if (i) out << ", ";
      describe_tensor(out, l[i]);
    }
    out << "]";
  } else if (const auto* ol = v.get_if<std::vector<std::optional<Tensor>>>()) {
    out << "[";
    for (size_t i = 0; i < ol->size(); ++i) {
      if (i) out << ", ";
      if ((*ol)[i]) describe_tensor(out, *(*ol)[i]);
      else out << "None";
    }
    out << "]";
  } else {
    out << v.repr();
  }
}

// A copy of a storage's bytes on `to` (its own device or another).
std::shared_ptr<Storage> copy_storage(const Storage& s, Device to) {
  auto copy = Storage::allocate(s.nbytes(), to);
  const Device from = s.device();
  const size_t n = s.nbytes();
  if (n == 0) return copy;
  if (from.is_cpu() && to.is_cpu()) {
    std::memcpy(copy->data(), s.data(), n);
  } else if (from == to) {
    allocator_for(from.type).copy_on_device(copy->data(), s.data(), n, from);
  } else if (from.is_cpu()) {
    allocator_for(to.type).copy_from_host(copy->data(), s.data(), n, to);
  } else if (to.is_cpu()) {
    allocator_for(from.type).copy_to_host(copy->data(), s.data(), n, from);
  } else {  // between two devices: through the host
    std::vector<unsigned char> host(n);
    allocator_for(from.type).copy_to_host(host.data(), s.data(), n, from);
    allocator_for(to.type).copy_from_host(copy->data(), host.data(), n, to);
  }
  return copy;
}

// Clones the tensors of a stack. Decision: a clone copies the whole storage and rebuilds the
// view on it, instead of t.clone(), so that the clone keeps exactly the sample's strides and
// storage offset (overlapping and stride-0 views included, which clone() makes contiguous), and
// arguments that shared memory in the sample still share it in the clones (one copy per
// storage, the same object for the same tensor). Checks must see the operator run on what the
// user passed — on another device too (Note [A copy on another device keeps the layout]). The
// price is copying all of a big base for a small view.
class Cloner {
 public:
  explicit Cloner(std::optional<Device> to) : to_(to) {}
  Tensor operator()(const Tensor& t) {
    if (!t.defined()) return t;
    for (const auto& [original, clone] : same_) {
      if (original.is_same(t)) return clone;
    }
    Tensor c;
    if (!t.storage()->has_data() || t.is_fake()) {
      c = t.detach();  // metadata only: nothing to protect from writes
    } else {
      auto& storage = storages_[t.storage().get()];
      if (!storage) storage = copy_storage(*t.storage(), to_.value_or(t.storage()->device()));
      c = make_tensor(storage, t.sizes(), t.strides(), t.storage_offset(), t.dtype());
    }
    // A leaf that requires grad, like the sample's tensor but with no history.
    if (t.requires_grad()) c.set_requires_grad(true);
    same_.emplace_back(t, c);
    return c;
  }

 private:
  std::optional<Device> to_;
  std::map<const Storage*, std::shared_ptr<Storage>> storages_;
  std::vector<std::pair<Tensor, Tensor>> same_;
};

void collect_tensors(const IValue& v, std::vector<Tensor>& out) {
  if (v.is_tensor()) {
    if (v.to_tensor().defined()) out.push_back(v.to_tensor());
  } else if (v.is_tensor_list()) {
    for (const Tensor& t : v.to_tensor_list()) {
      if (t.defined()) out.push_back(t);
    }
  } else if (const auto* ol = v.get_if<std::vector<std::optional<Tensor>>>()) {
    for (const auto& t : *ol) {
      if (t && t->defined()) out.push_back(*t);
    }
  } else if (v.tag() == IValue::Tag::GenericList) {
    for (const IValue& e : v.to_generic_list()) collect_tensors(e, out);
  }
}

}  // namespace

std::string describe(const Stack& args, const std::vector<std::string>& names) {
  std::ostringstream out;
  for (size_t i = 0; i < args.size(); ++i) {
    if (i) out << ", ";
    if (i < names.size() && !names[i].empty()) out << names[i] << ": ";
    describe_value(out, args[i]);
  }
  return out.str();
}

std::string sample_key(const Stack& args) {
  std::string key = describe(args);
  // Two FNV-1a hashes with different starting points: 128 bits, for a few thousand keys.
  uint64_t a = 14695981039346656037ull, b = 0x6c62272e07bb0142ull;
  auto mix = [&](const void* data, size_t n) {
    const auto* bytes = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) a = (a ^ bytes[i]) * 1099511628211ull, b = (b ^ bytes[i]) * 1099511628211ull;
  };
  // Whole storages, not only the elements a view shows: a kernel that ignores strides reads the
  // holes and what lies past the view (docs/aten-differences.md), so those are part of the input.
  std::map<const Storage*, size_t> first_holder;  // storage -> the first tensor holding it
  size_t index = 0;
  for (const IValue& v : args) {
    for (const Tensor& t : tensors_in(v)) {
      const Storage* storage = t.storage().get();
      const auto [it, first] = first_holder.emplace(storage, index++);
      mix(&it->second, sizeof it->second);
      if (!first || storage == nullptr || !storage->has_data() || t.is_fake()) continue;
      const size_t n = storage->nbytes();
      mix(&n, sizeof n);
      if (storage->device().is_cpu()) {
        mix(storage->data(), n);
      } else {
        const auto host = copy_storage(*storage, Device::cpu());
        mix(host->data(), n);
      }
    }
  }
  char hex[40];
  std::snprintf(hex, sizeof hex, " #%016llx%016llx", static_cast<unsigned long long>(a), static_cast<unsigned long long>(b));
  return key + hex;
}

Stack clone_args(const Stack& args, std::optional<Device> to) {
  Cloner cloner(to);
  Stack out;
  out.reserve(args.size());
  for (const IValue& v : args) out.push_back(map_tensors(v, std::ref(cloner)));
  return out;
}

std::vector<Tensor> tensors_in(const IValue& value) {
  std::vector<Tensor> out;
  collect_tensors(value, out);
  return out;
}

std::vector<std::string> argument_names(const FunctionSchema& schema) {
  std::vector<std::string> names;
  for (const Argument& a : schema.arguments) names.push_back(a.name);
  return names;
}

std::string description_of(const Sample& sample, const FunctionSchema& schema) {
  return sample.description.empty() ? describe(sample.args, argument_names(schema)) : sample.description;
}

}  // namespace opconform::conformance
