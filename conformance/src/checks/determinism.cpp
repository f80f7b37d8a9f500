// determinism (docs/checks.md): two runs on equal inputs give bitwise equal results (within
// tolerance for ops tagged nondeterministic_bitwise; ops tagged nondeterministic_seeded run from one
// generator state, so they repeat their draws).
#include "opconform/conformance/detail/builtin_checks.h"
#include "opconform/conformance/detail/check_kit.h"

namespace opconform::conformance::detail {
namespace {

using opconform::detail::concat;

class Determinism final : public Check {
 public:
  std::string_view name() const override { return "determinism"; }
  CheckResult run(const CheckContext& ctx) const override {
    const CheckRun k(name(), ctx);
    // A random op (nondeterministic_seeded) runs both times from one generator state (run_boxed), so
    // it must repeat its draws: a library's kernel takes them from the call's seed (plugin ABI 2).
    const bool random = ctx.op.has_tag(Tag::nondeterministic_seeded);
    // nondeterministic_bitwise: declared to vary in the last bits (e.g. atomics): tolerance.
    const Exactness exactness = ctx.op.has_tag(Tag::nondeterministic_bitwise) ? Exactness::tolerance : Exactness::bitwise;
    Run first = k.run();
    Run second = k.run();
    if (first.error || second.error) {
      // kNotImplemented (no kernel for this dtype/device) is unsupported, anything else failed.
      if (first.error && second.error) return k.threw(*first.error, "both runs");
      return k.failed(Cause{FindingKind::nondeterminism, "", "one of two runs on equal inputs throws"},
                      concat("determinism of '", ctx.op.name(), "': one of two runs on equal inputs threw: ",
                             (first.error ? first.error : second.error)->what(), " Sample: ", k.sample(), "."));
    }
    Verdict v = compare_observables(ctx.op, second.seen, first.seen, ctx.tolerance, exactness);
    if (!v.equal) {
      return k.failed(mismatch_cause(v, "two runs on equal inputs differ", FindingKind::nondeterminism),
                      concat("determinism of '", ctx.op.name(), "': two runs on equal inputs gave different results (",
                             exactness == Exactness::bitwise ? "bitwise" : "beyond tolerance", "): ", v.what,
                             random ? ". The op draws random numbers and both runs started from one generator state: "
                                      "it must draw only from the seed the call gives it (plugin ABI version 2: "
                                      "ctx->seed and ctx->offset)"
                                    : ". A kernel must not depend on state kept between calls; tag the op "
                                      "nondeterministic_seeded or nondeterministic_bitwise if it is meant to vary",
                             ". Sample: ", k.sample(), "."));
    }
    return k.passed();
  }
};

}  // namespace

std::unique_ptr<Check> make_determinism() { return std::make_unique<Determinism>(); }

}  // namespace opconform::conformance::detail
