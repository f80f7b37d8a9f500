// dtype_consistency (docs/checks.md): a lower-precision run agrees with the float64 run. The
// float64 result, rounded to the sample run's dtype, is the reference, with that (lower) dtype's
// tolerance; an op whose data declares a rounding contract must also round as it says (Note
// [Low-precision rounding] in rounding.h).
#include <optional>

#include "opconform/conformance/detail/builtin_checks.h"
#include "opconform/conformance/detail/check_kit.h"
#include "opconform/conformance/rounding.h"

namespace opconform::conformance::detail {
namespace {

using opconform::detail::concat;

class DtypeConsistency final : public Check {
 public:
  std::string_view name() const override { return "dtype_consistency"; }
  CheckResult run(const CheckContext& ctx) const override {
    const CheckRun k(name(), ctx);
    Stack high = k.clone();
    bool any_floating = false, any_lower = false;
    for (auto& v : high) {
      if (!v.is_tensor() || !v.to_tensor().defined() || !is_floating(v.to_tensor().dtype())) continue;
      any_floating = true;
      any_lower = any_lower || v.to_tensor().dtype() != DType::Float64;
      v = IValue(v.to_tensor().detach().to(DType::Float64).clone());
    }
    if (!any_floating) return k.skipped("no floating tensor argument", "no_floating_argument", "no floating tensor argument");
    if (!any_lower) return k.skipped("the sample is float64 already", "float64", "the sample is float64 already");

    Run low = k.run();
    if (low.error) return k.threw(*low.error, "the run in the sample's dtype");
    Run ref = run_op(ctx.op, high);
    if (ref.error) {
      return k.skipped(concat("'", ctx.op.name(), "' rejects float64 inputs: ", ref.error->what()), "float64",
                       "the op rejects float64 inputs");
    }
    if (low.seen.size() != ref.seen.size()) {
      return k.failed(Cause{FindingKind::return_mismatch, "", "the sample's dtype and float64 give different numbers of results"},
                      concat("dtype_consistency of '", ctx.op.name(), "': ", low.seen.size(), " results in the sample's ",
                             "dtypes but ", ref.seen.size(), " in float64"));
    }
    size_t compared = 0, mistrusted = 0;
    for (size_t i = 0; i < low.seen.size(); ++i) {
      if (auto failure = compare_output(k, low.seen[i], ref.seen[i].second, compared, mistrusted)) return *failure;
    }
    if (compared > 0 && mistrusted == compared) {
      return k.mistrusted(concat("dtype_consistency of '", ctx.op.name(), "': every compared value was zero or NaN"));
    }
    return k.passed();
  }

 private:
  // One observable of the low-precision run against the float64 run's.
  static std::optional<CheckResult> compare_output(const CheckRun& k, const std::pair<std::string, IValue>& low,
                                                   const IValue& h, size_t& compared, size_t& mistrusted) {
    const CheckContext& ctx = k.ctx();
    const IValue& l = low.second;
    if (!l.is_tensor() || !h.is_tensor() || !l.to_tensor().defined() || !h.to_tensor().defined()) return std::nullopt;
    const Tensor& lt = l.to_tensor();
    const std::string subject = observable_subject(low.first);
    const std::string dtype(::opconform::name(lt.dtype()));
    Verdict c = compare_tensors(lt, h.to_tensor().to(lt.dtype()), ctx.tolerance.for_dtype(lt.dtype(), ctx.op.data().get()));
    if (!c.equal) {
      // Values beyond the dtype's tolerance of the float64 result: rounding_bias; a shape or
      // dtype that differs is that.
      Cause cause = c.field == Field::values
                        ? Cause{FindingKind::rounding_bias, subject,
                                concat(subject, " in low precision is further from the float64 result than its dtype allows")}
                        : mismatch_cause(c, "the low-precision and float64 runs differ", std::nullopt, subject);
      return k.failed(std::move(cause),
                      concat("dtype_consistency of '", ctx.op.name(), "': ", low.first, " in ", dtype,
                             " differs from the float64 run beyond ", dtype, "'s tolerance: ", c.what,
                             ". The kernel seems to compute in a lower precision than its inputs' dtype. Sample: ",
                             k.sample(), "."));
    }
    // Within tolerance, and for ops that declare it, rounded as the contract says (Note
    // [Low-precision rounding]): wrong rounding stays inside float16's tolerance.
    if (const std::optional<RoundingContract> rounding = ctx.op.data()->rounding) {
      if (RoundingVerdict rv = check_rounding(lt, h.to_tensor(), *rounding); !rv.ok) {
        return k.failed(Cause{FindingKind::rounding_bias, subject,
                              concat(subject, " is not its float64 result rounded to nearest-even")},
                        concat("dtype_consistency of '", ctx.op.name(), "': ", low.first, " in ", dtype,
                               " is not its float64 result rounded to nearest-even, ",
                               "as the op's rounding contract says: ", rv.what, ". Sample: ", k.sample(), "."));
      }
    }
    ++compared;
    mistrusted += c.mistrusted ? 1 : 0;
    return std::nullopt;
  }
};

}  // namespace

std::unique_ptr<Check> make_dtype_consistency() { return std::make_unique<DtypeConsistency>(); }

}  // namespace opconform::conformance::detail
