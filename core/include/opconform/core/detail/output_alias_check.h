// The per-call aliasing contract of custom ops (see custom_op.h): an output may share memory
// with an input only where the schema says so, and then it must be that very input (the
// inplace and out= forms). PyTorch checks this on every call of a custom op; so do we, with
// no allocation: tensors are gathered into a small fixed array.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "opconform/core/schema.h"
#include "opconform/core/tensor.h"

namespace opconform::detail {

struct TensorRef {
  size_t index;  // argument or output index in the schema
  const Tensor* tensor;
};

class TensorRefs {
 public:
  static constexpr size_t kCapacity = 32;  // more tensors than this are not checked
  void add(size_t index, const Tensor& t) {
    if (t.defined() && size_ < kCapacity) refs_[size_++] = {index, &t};
  }
  template <typename T>
  void add_value(size_t index, const T& v) {
    using D = std::decay_t<T>;
    if constexpr (std::is_same_v<D, Tensor>) {
      add(index, v);
    } else if constexpr (std::is_same_v<D, std::optional<Tensor>>) {
      if (v) add(index, *v);
    } else if constexpr (std::is_same_v<D, std::vector<Tensor>>) {
      for (const auto& t : v) add(index, t);
    }
  }
  const TensorRef* begin() const { return refs_.data(); }
  const TensorRef* end() const { return refs_.data() + size_; }

 private:
  std::array<TensorRef, kCapacity> refs_;  // left uninitialised: only [0, size_) is read
  size_t size_ = 0;
};

// What the schema allows: for each output, the argument it must be (inplace/out), if any.
struct AliasContract {
  std::string op_name;
  std::vector<std::string> argument_names;
  std::vector<std::optional<size_t>> output_is_argument;

  static AliasContract from_schema(const std::string& op_name, const FunctionSchema& schema);
  // Throws Error(kSchemaMismatch) naming the output and the argument when the contract is broken.
  void check(const TensorRefs& inputs, const TensorRefs& outputs) const;
};

template <typename Ret>
void gather_outputs(TensorRefs& refs, const Ret& r) {
  using D = std::decay_t<Ret>;
  if constexpr (requires { std::tuple_size<D>::value; }) {
    size_t i = 0;
    std::apply([&](const auto&... e) { (refs.add_value(i++, e), ...); }, r);
  } else {
    refs.add_value(0, r);
  }
}

}  // namespace opconform::detail
