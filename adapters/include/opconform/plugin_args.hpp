// opconform/plugin_args.hpp — header-only helpers for plugins written in C++ (opconform/plugin.h
// is the ABI; this is convenience on top of it, shared by adapters/onednn and adapters/cuda_libs):
// a kernel throws KernelError (or calls not_implemented / invalid_argument) and its entry point turns
// it into the status and message; Args reads the boxed arguments by schema index, each error
// naming the argument.
//
//   opc::Args args(a, num_args);
//   const double alpha = args.scalar(2, "alpha");
//   const opc::Dims stride = args.int_list(3, "stride");
//
// Tensors are left to the plugin: what a tensor argument becomes (a descriptor of its own library,
// a device pointer) is the plugin's business.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "opconform/plugin.h"

namespace opc {

using Dims = std::vector<int64_t>;

// What a kernel throws; the plugin's entry point turns it into `status` and the message.
struct KernelError : std::runtime_error {
  OpcStatus status;
  KernelError(OpcStatus s, const std::string& message) : std::runtime_error(message), status(s) {}
};
[[noreturn]] inline void not_implemented(const std::string& message) { throw KernelError(OPC_NOT_IMPLEMENTED, message); }
[[noreturn]] inline void invalid_argument(const std::string& message) { throw KernelError(OPC_INVALID_ARGUMENT, message); }

// Row-major strides of `shape` (a size 0 counts as 1, as in PyTorch).
inline Dims contiguous_strides(const Dims& shape) {
  Dims strides(shape.size());
  int64_t next = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = next;
    next *= std::max<int64_t>(shape[i], 1);
  }
  return strides;
}

// "[2, 3]"
inline std::string shape_string(const Dims& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// A call's boxed arguments (schema order), read by index; `name` is the schema's, for messages.
// Numbers convert as PyTorch's Scalar does (an int or a bool is a number; a bool is an int).
class Args {
 public:
  Args(const OpcValue* args, int64_t num_args) : args_(args), num_args_(num_args) {}
  int64_t num_args() const { return num_args_; }

  const OpcValue& arg(int64_t i, const char* name) const {
    if (i < 0 || i >= num_args_) invalid_argument(std::string("argument '") + name + "' is missing");
    return args_[i];
  }
  bool is_none(int64_t i) const { return i >= num_args_ || args_[i].tag == OPC_TAG_NONE; }

  double scalar(int64_t i, const char* name) const {
    const OpcValue& v = arg(i, name);
    switch (v.tag) {
      case OPC_TAG_DOUBLE: return v.u.d;
      case OPC_TAG_INT: return static_cast<double>(v.u.i);
      case OPC_TAG_BOOL: return v.u.b != 0 ? 1.0 : 0.0;
      case OPC_TAG_COMPLEX: not_implemented(std::string("argument '") + name + "' is complex");
      default: invalid_argument(std::string("argument '") + name + "' must be a number");
    }
  }
  int64_t integer(int64_t i, const char* name) const {
    const OpcValue& v = arg(i, name);
    if (v.tag == OPC_TAG_INT) return v.u.i;
    if (v.tag == OPC_TAG_BOOL) return v.u.b;
    invalid_argument(std::string("argument '") + name + "' must be an int");
  }
  bool boolean(int64_t i, const char* name) const {
    const OpcValue& v = arg(i, name);
    if (v.tag == OPC_TAG_BOOL) return v.u.b != 0;
    if (v.tag == OPC_TAG_INT) return v.u.i != 0;
    invalid_argument(std::string("argument '") + name + "' must be a bool");
  }
  Dims int_list(int64_t i, const char* name) const {
    const OpcValue& v = arg(i, name);
    if (v.tag == OPC_TAG_INT) return {v.u.i};  // int[2] given as one int
    if (v.tag != OPC_TAG_LIST || v.u.list.size < 0 || (v.u.list.size > 0 && v.u.list.items == nullptr))
      invalid_argument(std::string("argument '") + name + "' must be a list of ints");
    Dims out;
    for (int64_t k = 0; k < v.u.list.size; ++k) {
      if (v.u.list.items[k].tag != OPC_TAG_INT) invalid_argument(std::string("argument '") + name + "' must hold ints");
      out.push_back(v.u.list.items[k].u.i);
    }
    return out;
  }
  std::string string(int64_t i, const char* name) const {
    const OpcValue& v = arg(i, name);
    if (v.tag != OPC_TAG_STRING) invalid_argument(std::string("argument '") + name + "' must be a string");
    return std::string(v.u.s.data, static_cast<size_t>(v.u.s.size));
  }

  std::optional<double> optional_scalar(int64_t i, const char* name) const {
    return is_none(i) ? std::nullopt : std::optional<double>(scalar(i, name));
  }
  std::optional<int64_t> optional_integer(int64_t i, const char* name) const {
    return is_none(i) ? std::nullopt : std::optional<int64_t>(integer(i, name));
  }
  std::optional<Dims> optional_int_list(int64_t i, const char* name) const {
    return is_none(i) ? std::nullopt : std::optional<Dims>(int_list(i, name));
  }

 private:
  const OpcValue* args_;
  int64_t num_args_;
};

}  // namespace opc
