// autocast_consistency (docs/checks.md): under autocast the op casts as its rule says and nothing
// else.
//
// Note [Which dtype autocast casts to]: a rule (make_autocast_kernel) casts to the dtype given at
// registration, whatever the guard's dtype; the check cannot ask which. It enables autocast with
// float16 (the guard's dtype) and takes the cast dtype from the result: the first floating
// output's dtype when it is float16, bfloat16 or float32, else each of them in turn. The result
// must equal the op called outside autocast on inputs cast to that dtype by hand. Float64 inputs
// must not be cast at all (PyTorch's rule): under autocast they give the result they give without.
#include <algorithm>
#include <optional>

#include "opconform/conformance/detail/builtin_checks.h"
#include "opconform/conformance/detail/check_kit.h"
#include "opconform/core/autocast.h"

namespace opconform::conformance::detail {
namespace {

using opconform::detail::concat;

enum class Which { all, all_but_float64, only_float64 };

Stack cast_floating(const Stack& args, std::optional<DType> to, Which which) {
  Stack out = clone_args(args);
  auto cast_one = [&](const Tensor& t) {
    if (!t.defined() || !is_floating(t.dtype()) || !to) return t;
    const bool f64 = t.dtype() == DType::Float64;
    if ((f64 && which == Which::all_but_float64) || (!f64 && which == Which::only_float64)) return t;
    return t.detach().to(*to).clone();
  };
  for (auto& v : out) {
    if (v.is_tensor()) {
      v = IValue(cast_one(v.to_tensor()));
    } else if (v.is_tensor_list()) {  // cat's tensors, as autocast casts them
      std::vector<Tensor> list;
      for (const auto& t : v.to_tensor_list()) list.push_back(cast_one(t));
      v = IValue(std::move(list));
    }
  }
  return out;
}

// The floating CPU tensors of an argument (one tensor, or the elements of a Tensor[]).
bool has_floating_cpu_tensor(const IValue& v) {
  auto floating_cpu = [](const Tensor& t) {
    return t.defined() && is_floating(t.dtype()) && t.device().type == DeviceType::CPU;
  };
  if (v.is_tensor()) return floating_cpu(v.to_tensor());
  return v.is_tensor_list() && std::ranges::any_of(v.to_tensor_list(), floating_cpu);
}

Run under_autocast(const OperatorHandle& op, const Stack& args) {
  AutocastGuard guard(DeviceType::CPU, DType::Float16);
  return run_op(op, args);
}

class AutocastConsistency final : public Check {
 public:
  std::string_view name() const override { return "autocast_consistency"; }
  CheckResult run(const CheckContext& ctx) const override {
    const CheckRun k(name(), ctx);
    if (!ctx.op.has_kernel_at(DispatchKey::AutocastCPU)) {
      return k.skipped("no autocast rule (no kernel at AutocastCPU)", "autocast rule", "no autocast rule");
    }
    const auto& args = ctx.sample.args;
    if (!std::ranges::any_of(args, has_floating_cpu_tensor)) {
      return k.skipped("no floating CPU tensor argument", "no_floating_argument", "no floating CPU tensor argument");
    }
    if (auto failure = float64_untouched(k)) return *failure;
    return casts_as_a_rule(k);
  }

 private:
  // Float64 inputs pass through untouched.
  static std::optional<CheckResult> float64_untouched(const CheckRun& k) {
    const CheckContext& ctx = k.ctx();
    Stack as64 = cast_floating(ctx.sample.args, DType::Float64, Which::all);
    Run plain64 = run_op(ctx.op, as64), auto64 = under_autocast(ctx.op, as64);
    if (plain64.error) return std::nullopt;
    if (auto64.error) {
      return k.failed(Cause{FindingKind::threw, "float64 inputs", "float64 inputs throw under autocast"},
                      concat("autocast_consistency of '", ctx.op.name(), "': float64 inputs work without autocast ",
                             "but throw under it: ", auto64.error->what()));
    }
    Verdict v = compare_observables(ctx.op, auto64.seen, plain64.seen, ctx.tolerance, Exactness::tolerance);
    if (v.equal) return std::nullopt;
    return k.failed(mismatch_cause(v, "autocast changes the result for float64 inputs", std::nullopt,
                                   concat(v.subject, " (float64 inputs)")),
                    concat("autocast_consistency of '", ctx.op.name(), "': under autocast the result for float64 inputs ",
                           "changed: ", v.what, ". Autocast must not cast float64 tensors (only float16, bfloat16 and ",
                           "float32 are cast). Sample (as float64): ", describe(as64, arg_names(ctx.op)), "."));
  }

  // Lower-precision inputs: float64 ones become float32 so that the rule has something to cast.
  // (float16/bfloat16/float32 tensors stay as the sample has them.)
  static CheckResult casts_as_a_rule(const CheckRun& k) {
    const CheckContext& ctx = k.ctx();
    Stack low = cast_floating(ctx.sample.args, DType::Float32, Which::only_float64);
    Run got = under_autocast(ctx.op, low);
    if (got.error) {
      return k.failed(Cause{FindingKind::threw, "autocast rule", "the op throws under autocast"},
                      concat("autocast_consistency of '", ctx.op.name(), "': the op threw under autocast: ", got.error->what()));
    }
    std::vector<DType> candidates;
    for (const auto& [label, value] : got.seen) {
      if (value.is_tensor() && value.to_tensor().defined() && is_floating(value.to_tensor().dtype()) &&
          value.to_tensor().dtype() != DType::Float64) {
        candidates.push_back(value.to_tensor().dtype());
        break;
      }
    }
    for (DType d : {DType::Float16, DType::BFloat16, DType::Float32}) {
      if (std::find(candidates.begin(), candidates.end(), d) == candidates.end()) candidates.push_back(d);
    }
    std::string first_mismatch;
    std::optional<Verdict> first;
    for (DType d : candidates) {
      Run by_hand = run_op(ctx.op, cast_floating(low, d, Which::all_but_float64));
      if (by_hand.error) continue;
      Verdict v = compare_observables(ctx.op, got.seen, by_hand.seen, ctx.tolerance, Exactness::tolerance);
      if (v.equal) return k.passed(concat("autocast casts to ", ::opconform::name(d)));
      if (first_mismatch.empty()) first_mismatch = concat("cast to ", ::opconform::name(d), " by hand: ", v.what);
      if (!first) first = v;
    }
    const Cause cause = first ? mismatch_cause(*first, "under autocast the result matches no call on inputs cast by hand")
                              : Cause{FindingKind::other, "autocast rule", "no call on inputs cast by hand runs"};
    return k.failed(cause, concat("autocast_consistency of '", ctx.op.name(), "': under autocast the result matches no call on ",
                                  "inputs cast by hand (to float16, bfloat16 or float32); ", first_mismatch,
                                  ". The autocast rule must only cast the floating inputs, then run the op. Sample: ",
                                  k.sample(), "."));
  }
};

}  // namespace

std::unique_ptr<Check> make_autocast_consistency() { return std::make_unique<AutocastConsistency>(); }

}  // namespace opconform::conformance::detail
