// SymInt: an integer that may be symbolic (a size of a fake tensor that is only known at run
// time). This header holds the value type used by schemas and kernels (`SymInt` in a schema,
// `SymInt[]` sizes); the symbolic side — expressions over symbols, guards, a ShapeEnv — plugs in
// through SymNode with the fake-tensor work (issue 3). Until then every SymInt is concrete.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>

#include "opconform/core/error.h"

namespace opconform {

class SymNode;  // a symbolic expression; defined with fake tensors and the ShapeEnv

class SymInt {
 public:
  SymInt(int64_t value = 0) : value_(value) {}
  explicit SymInt(std::shared_ptr<SymNode> node) : node_(std::move(node)) {}

  bool is_symbolic() const { return node_ != nullptr; }
  // The value when concrete.
  std::optional<int64_t> maybe_as_int() const {
    if (node_) return std::nullopt;
    return value_;
  }
  // The value; throws when symbolic (a kernel that needs data-independent sizes asks this).
  int64_t expect_int() const {
    OPCONFORM_CHECK(!node_, ErrorCode::kInvalidArgument, "a symbolic size was used where a concrete integer is needed");
    return value_;
  }
  const std::shared_ptr<SymNode>& node() const { return node_; }

  friend bool operator==(const SymInt& a, const SymInt& b) {
    return !a.node_ && !b.node_ ? a.value_ == b.value_ : a.node_ == b.node_;
  }

 private:
  int64_t value_ = 0;
  std::shared_ptr<SymNode> node_;
};

inline std::ostream& operator<<(std::ostream& out, const SymInt& s) {
  if (s.is_symbolic()) return out << "<symbolic>";
  return out << s.expect_int();
}

}  // namespace opconform
