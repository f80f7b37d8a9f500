// ShapeEnv: the symbols of symbolic sizes and the guards recorded while tracing with them.
//
//   ShapeEnv env;
//   SymInt n = env.create_symbol(5, "x.size(0)");   // s0, hint 5
//   if (n > 3) { ... }                              // decided from the hint: guard "s0 > 3"
//   env.guards();                                   // {"s0 > 3"}
//   env.check({{"s0", 2}});                         // fails: "s0 > 3" is false for s0 = 2
//
// A guard is an assumption the traced code made about the sizes (Note [Deciding comparisons]
// in symint.h). Re-using what was traced for other sizes is sound only when check() passes for
// them. Symbols hold their ShapeEnv weakly: SymInts outlive it, but guards decided after it is
// gone are not recorded anywhere.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "opconform/core/symint.h"

namespace opconform {

// One failed guard of ShapeEnv::check, or a symbol bound outside its range.
struct GuardFailure {
  std::string guard;   // "s0 > 3", or a symbol's range: "s0 in [2, inf]"
  std::string reason;  // "false for s0 = 2 (x.size(0))"
};

struct GuardCheckResult {
  std::vector<GuardFailure> failures;
  bool ok() const { return failures.empty(); }
  // One line per failure: "guard s0 > 3 failed: false for s0 = 2 (x.size(0))".
  std::string to_string() const;
};

namespace detail {
struct Guard {
  std::shared_ptr<SymNode> lhs, rhs;
  CompareOp op;
  std::string text;  // "s0 > 3"
};
struct ShapeEnvState {
  mutable std::mutex mutex;
  std::vector<std::shared_ptr<SymNode>> symbols;  // backed and unbacked, in creation order
  std::vector<Guard> guards;
  int64_t next_backed = 0;
  int64_t next_unbacked = 0;
};
// Records `lhs op rhs` (known to hold for the hints) unless an identical guard exists.
void record_guard(ShapeEnvState& state, const SymInt& lhs, CompareOp op, const SymInt& rhs);
}  // namespace detail

class ShapeEnv {
 public:
  ShapeEnv();
  ~ShapeEnv();
  ShapeEnv(const ShapeEnv&) = delete;
  ShapeEnv& operator=(const ShapeEnv&) = delete;

  // A backed symbol s<N> for a size whose current value is `hint`, with the range [2, INT64_MAX].
  // Sizes 0 and 1 are specialised, as in PyTorch: a hint of 0 or 1 gives a concrete SymInt
  // (code branches on "empty" and "broadcastable" too often for them to stay symbolic).
  SymInt create_symbol(int64_t hint, std::string source);
  // An unbacked symbol u<N>: a value only known at run time, somewhere in [min, max].
  SymInt create_unbacked(int64_t min = 0, int64_t max = INT64_MAX, std::string source = "");

  // The recorded guards, readable ("s0 > 3", "s1 != 4"), in the order they were made.
  std::vector<std::string> guards() const;
  // The guards as the compared expressions (graph capture keeps them with the graph).
  struct GuardRecord {
    SymInt lhs, rhs;
    CompareOp op;
    std::string text;
  };
  std::vector<GuardRecord> guard_records() const;
  // The symbols made so far.
  std::vector<SymNode::SymbolInfo> symbols() const;

  // The value of `value` with the symbols bound to the given values; throws naming a symbol
  // that has no binding.
  int64_t evaluate(const SymInt& value, const std::map<std::string, int64_t>& bindings) const;
  // Adds bindings that make `symbolic` equal `concrete` (e.g. a fake tensor's sym_sizes() and
  // a new real tensor's sizes): each plain symbol is bound to its value. Throws when the lengths
  // differ, a concrete entry differs, or a symbol would be bound to two values.
  static void bind(std::map<std::string, int64_t>& bindings, std::span<const SymInt> symbolic,
                   std::span<const int64_t> concrete);
  // Whether every guard holds for these values, and every bound symbol is within its range.
  // A guard over a symbol without a binding fails ("no value for s1").
  GuardCheckResult check(const std::map<std::string, int64_t>& bindings) const;

  // The ShapeEnv of the innermost active FakeTensorMode (or ShapeEnvGuard) of this thread.
  static ShapeEnv* current();

 private:
  std::shared_ptr<detail::ShapeEnvState> state_;
};

// Makes `env` the thread's current ShapeEnv for a scope.
class ShapeEnvGuard {
 public:
  explicit ShapeEnvGuard(ShapeEnv* env);
  ~ShapeEnvGuard();
  ShapeEnvGuard(const ShapeEnvGuard&) = delete;
  ShapeEnvGuard& operator=(const ShapeEnvGuard&) = delete;

 private:
  ShapeEnv* previous_;
};

}  // namespace opconform
