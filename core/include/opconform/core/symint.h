// SymInt: an integer that may be symbolic (a size of a fake tensor that is only known at run
// time). It is the value type used by schemas and kernels (`SymInt` in a schema, `SymInt[]`
// sizes); a concrete SymInt is just an int64_t, a symbolic one holds a SymNode expression over
// symbols owned by a ShapeEnv (shape_env.h).
//
// Symbols come in two kinds (PyTorch's names):
//   - backed   (s0, s1, ...): a size of an input, with a hint (the size of the real tensor the
//     fake was made from) and the range [2, INT64_MAX] (sizes 0 and 1 are never symbolic);
//   - unbacked (u0, u1, ...): a data-dependent size made inside a fake kernel
//     (get_ctx().new_dynamic_size()), with a known range but no hint.
//
// Arithmetic (+, -, *, floordiv, mod) builds expressions in a canonical form: constants fold,
// sums of products are collected ("s0 + s0" is "s0*2", "s0 - s0" is 0), terms are ordered.
//
// Note [Deciding comparisons]: comparisons return bool, as Python's `if s0 > 3:` must. A
// comparison is decided, in order,
//   1. by constant folding (both sides concrete, or their difference a constant),
//   2. by value ranges (true or false for every value the symbols may take: no guard needed),
//   3. by the hints of backed symbols; the outcome is recorded as a guard ("s0 > 3") in the
//      ShapeEnv owning the symbols, so a later run can check it still holds (ShapeEnv::check),
//   4. otherwise (an unbacked symbol the range does not settle) it is an error.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "opconform/core/error.h"

namespace opconform {

namespace detail {
struct ShapeEnvState;  // shape_env.h: the symbols and guards of one ShapeEnv
}

// One node of a symbolic integer expression. Nodes are immutable and shared; build them through
// SymInt arithmetic (which canonicalises) rather than through the factories below.
class SymNode {
 public:
  enum class Kind : uint8_t { Constant, Symbol, Add, Sub, Mul, FloorDiv, Mod };

  // What a Symbol node knows about its symbol.
  struct SymbolInfo {
    std::string name;     // "s0" or "u0"
    std::string source;   // where it came from, e.g. "x.size(0)"; for messages
    std::optional<int64_t> hint;  // backed symbols only
    int64_t min = 0;      // the values the symbol may take, inclusive
    int64_t max = INT64_MAX;
    int64_t index = 0;    // the number in the name, for ordering
    std::weak_ptr<detail::ShapeEnvState> env;  // where guards on it are recorded (weak: no cycle)
  };

  static std::shared_ptr<SymNode> make_constant(int64_t value);
  static std::shared_ptr<SymNode> make_symbol(SymbolInfo info);
  // Raw binary nodes, no simplification (SymInt arithmetic is the canonicalising front end).
  static std::shared_ptr<SymNode> make_binary(Kind kind, std::shared_ptr<SymNode> lhs, std::shared_ptr<SymNode> rhs);

  Kind kind() const { return kind_; }
  bool is_constant() const { return kind_ == Kind::Constant; }
  bool is_symbol() const { return kind_ == Kind::Symbol; }
  int64_t constant_value() const { return constant_; }           // Constant only
  const SymbolInfo& symbol() const { return *symbol_; }           // Symbol only
  bool is_unbacked_symbol() const { return is_symbol() && !symbol_->hint.has_value(); }
  const std::shared_ptr<SymNode>& lhs() const { return lhs_; }    // binary kinds only
  const std::shared_ptr<SymNode>& rhs() const { return rhs_; }

  // Python-like spelling: "s0*2 + u1", "(s0 + 1)//2", "s1 % 3".
  std::string to_string() const;
  // The value with each symbol replaced by value_of(symbol); floor division and modulo follow
  // Python (round toward negative infinity). Throws on division by zero and on overflow.
  int64_t evaluate(const std::function<int64_t(const SymNode& symbol)>& value_of) const;
  // Every Symbol node of the expression, each once, in order of first appearance.
  std::vector<const SymNode*> free_symbols() const;
  // Lower and upper bound of the value over the symbols' ranges (interval arithmetic, so not
  // always tight); INT64_MIN / INT64_MAX stand for unbounded.
  std::pair<int64_t, int64_t> value_range() const;

 private:
  SymNode() = default;
  Kind kind_ = Kind::Constant;
  int64_t constant_ = 0;
  std::shared_ptr<const SymbolInfo> symbol_;
  std::shared_ptr<SymNode> lhs_, rhs_;
};

enum class CompareOp : uint8_t { EQ, NE, LT, LE, GT, GE };
std::string_view to_string(CompareOp op);  // "==", "<", ...
// a <op> b for two values.
bool holds(int64_t a, CompareOp op, int64_t b);

class SymInt;
namespace detail {
// Note [Deciding comparisons]; called when at least one side is symbolic.
bool sym_compare(const SymInt& a, const SymInt& b, CompareOp op);
// Arithmetic when at least one side is symbolic (or concrete arithmetic overflowed).
SymInt sym_binary(SymNode::Kind kind, const SymInt& a, const SymInt& b);
}  // namespace detail

class SymInt {
 public:
  SymInt(int64_t value = 0) : value_(value) {}
  // A symbolic value; a Constant node becomes a concrete SymInt.
  explicit SymInt(std::shared_ptr<SymNode> node) : node_(std::move(node)) {
    if (node_ && node_->is_constant()) {
      value_ = node_->constant_value();
      node_ = nullptr;
    }
  }

  bool is_symbolic() const { return node_ != nullptr; }
  // The value when concrete.
  std::optional<int64_t> maybe_as_int() const {
    if (node_) return std::nullopt;
    return value_;
  }
  // The value; throws when symbolic (a kernel that needs data-independent sizes asks this).
  int64_t expect_int() const {
    if (node_) [[unlikely]] throw_symbolic();
    return value_;
  }
  // The value with backed symbols at their hints; nullopt when an unbacked symbol is involved.
  std::optional<int64_t> hint() const;
  // "5", "s0", "s0*2 + u1".
  std::string to_string() const;
  const std::shared_ptr<SymNode>& node() const { return node_; }
  // The expression as a node (a Constant node when concrete).
  std::shared_ptr<SymNode> as_node() const { return node_ ? node_ : SymNode::make_constant(value_); }

  // ---- arithmetic (int64_t converts implicitly) ----
  friend SymInt operator+(const SymInt& a, const SymInt& b) { return a.binary(SymNode::Kind::Add, b); }
  friend SymInt operator-(const SymInt& a, const SymInt& b) { return a.binary(SymNode::Kind::Sub, b); }
  friend SymInt operator*(const SymInt& a, const SymInt& b) { return a.binary(SymNode::Kind::Mul, b); }
  SymInt operator-() const { return SymInt(0) - *this; }
  SymInt& operator+=(const SymInt& b) { return *this = *this + b; }
  SymInt& operator-=(const SymInt& b) { return *this = *this - b; }
  SymInt& operator*=(const SymInt& b) { return *this = *this * b; }

  // ---- comparisons: Note [Deciding comparisons] ----
  friend bool operator==(const SymInt& a, const SymInt& b) { return a.compare(b, CompareOp::EQ); }
  friend bool operator!=(const SymInt& a, const SymInt& b) { return a.compare(b, CompareOp::NE); }
  friend bool operator<(const SymInt& a, const SymInt& b) { return a.compare(b, CompareOp::LT); }
  friend bool operator<=(const SymInt& a, const SymInt& b) { return a.compare(b, CompareOp::LE); }
  friend bool operator>(const SymInt& a, const SymInt& b) { return a.compare(b, CompareOp::GT); }
  friend bool operator>=(const SymInt& a, const SymInt& b) { return a.compare(b, CompareOp::GE); }

  // Python's a // b and a % b (floor semantics); division by zero throws.
  friend SymInt floordiv(const SymInt& a, const SymInt& b) { return a.binary(SymNode::Kind::FloorDiv, b); }
  friend SymInt mod(const SymInt& a, const SymInt& b) { return a.binary(SymNode::Kind::Mod, b); }

 private:
  [[noreturn]] void throw_symbolic() const;

  // Concrete operands take the inline path; the rest (and overflow) goes to symint.cpp.
  SymInt binary(SymNode::Kind kind, const SymInt& b) const {
    if (!node_ && !b.node_) {
      int64_t r;
      bool overflow = false;
      switch (kind) {
        case SymNode::Kind::Add: overflow = __builtin_add_overflow(value_, b.value_, &r); break;
        case SymNode::Kind::Sub: overflow = __builtin_sub_overflow(value_, b.value_, &r); break;
        case SymNode::Kind::Mul: overflow = __builtin_mul_overflow(value_, b.value_, &r); break;
        default: overflow = true;  // floordiv and mod: the out-of-line path handles signs and zero
      }
      if (!overflow) return SymInt(r);
    }
    return detail::sym_binary(kind, *this, b);
  }
  bool compare(const SymInt& b, CompareOp op) const {
    if (!node_ && !b.node_) {
      switch (op) {
        case CompareOp::EQ: return value_ == b.value_;
        case CompareOp::NE: return value_ != b.value_;
        case CompareOp::LT: return value_ < b.value_;
        case CompareOp::LE: return value_ <= b.value_;
        case CompareOp::GT: return value_ > b.value_;
        case CompareOp::GE: return value_ >= b.value_;
      }
    }
    return detail::sym_compare(*this, b, op);
  }

  int64_t value_ = 0;
  std::shared_ptr<SymNode> node_;
};

inline std::ostream& operator<<(std::ostream& out, const SymInt& s) { return out << s.to_string(); }

}  // namespace opconform
