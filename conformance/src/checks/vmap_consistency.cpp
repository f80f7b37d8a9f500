// vmap_consistency (docs/checks.md): vmap over the op (B = 3, in_dims 0) equals a loop over the
// batch. The batch elements are the sample with its floating tensors scaled by (1 + b/8); the op
// runs under its own vmap rule, or the registry's per-sample fallback when it has none.
#include <optional>

#include "opconform/conformance/detail/builtin_checks.h"
#include "opconform/conformance/detail/check_kit.h"
#include "opconform/core/autograd.h"
#include "opconform/core/vmap.h"

namespace opconform::conformance::detail {
namespace {

using autograd::NoGradGuard;
using opconform::detail::concat;

constexpr int64_t kBatch = 3;

// Batch element b of the sample: floating tensors scaled by (1 + b/8) (exact in binary, sign-
// preserving, so value constraints such as positivity survive); others as given.
Stack batch_element(const Stack& args, int64_t b) {
  Stack out = clone_args(args);
  for (auto& v : out) {
    if (!v.is_tensor() || !v.to_tensor().defined()) continue;
    Tensor t = v.to_tensor().detach();
    if (is_floating(t.dtype()) && b > 0) {
      std::vector<double> vals = t.contiguous().to_vector<double>();
      for (double& x : vals) x *= 1.0 + static_cast<double>(b) / 8;
      t = from_vector<double>(vals, t.sizes()).to(t.dtype(), t.device());
    }
    v = IValue(t);
  }
  return out;
}

// The batched tensors of the arguments in `slots`: the elements stacked along a new dim 0.
std::vector<Tensor> stacked(const std::vector<Stack>& elements, const std::vector<size_t>& slots) {
  std::vector<Tensor> batched;
  for (size_t a : slots) {
    const Tensor& t0 = elements[0][a].to_tensor();
    std::vector<int64_t> sizes{kBatch};
    sizes.insert(sizes.end(), t0.sizes().begin(), t0.sizes().end());
    Tensor s = empty(sizes, t0.options());
    for (int64_t b = 0; b < kBatch; ++b) s.select(0, b).copy_(elements[b][a].to_tensor());
    batched.push_back(s);
  }
  return batched;
}

class VmapConsistency final : public Check {
 public:
  std::string_view name() const override { return "vmap_consistency"; }
  CheckResult run(const CheckContext& ctx) const override {
    const CheckRun k(name(), ctx);
    const auto& args = ctx.sample.args;
    std::vector<size_t> slots;
    for (size_t a = 0; a < args.size(); ++a) {
      if (args[a].is_tensor() && args[a].to_tensor().defined() && !args[a].to_tensor().is_meta_data()) slots.push_back(a);
    }
    if (slots.empty()) return k.skipped("no tensor argument to batch", "no_tensor_argument", "no tensor argument to batch");
    const FunctionSchema& schema = ctx.op.schema();
    if (schema.is_mutable()) {
      return k.skipped("the op writes its arguments (vmap refuses)", "mutable", "the op writes its arguments");
    }
    for (const auto& r : schema.returns) {
      if (r.type.kind() != TypeKind::kTensor) {
        return k.skipped("the op returns something other than plain tensors", "returns",
                         "the op returns something other than plain tensors");
      }
    }
    // A random op without a vmap rule cannot be vmapped with randomness="same" (the per-sample
    // fallback draws per slice, as PyTorch's vmap refuses "same" for it too), and with "different"
    // no per-sample loop reproduces its draws: there is nothing to compare.
    if (ctx.op.has_tag(Tag::nondeterministic_seeded) && !ctx.op.has_kernel_at(DispatchKey::Batched)) {
      return k.skipped(concat("'", ctx.op.name(), "' draws random numbers and has no vmap rule: the per-sample "
                              "fallback supports randomness=\"different\" only, whose draws no per-sample run repeats"),
                       "nondeterministic_seeded", "a random op without a vmap rule");
    }
    std::vector<Stack> elements;
    for (int64_t b = 0; b < kBatch; ++b) elements.push_back(batch_element(args, b));
    const std::vector<Tensor> batched = stacked(elements, slots);

    // vmap needs a Batched kernel: the op's rule, or the registry's per-sample fallback. Install
    // the fallback only for this check when neither is there (installing it again would stack).
    RegistrationHandle fallback;
    if (!ctx.op.kernel_for(DispatchKey::Batched).valid()) fallback = install_vmap_fallback(ctx.registry);
    const int64_t fallback_before = vmap_fallback_count(ctx.op.name());
    std::vector<Tensor> got;
    try {
      got = under_vmap(ctx.op, elements, slots, batched);
    } catch (const Error& e) {
      if (e.code() == ErrorCode::kNotImplemented) return k.threw(e, "vmap");
      return k.failed(Cause{FindingKind::threw, "vmap", "vmap over the op throws"},
                      concat("vmap_consistency of '", ctx.op.name(), "': vmap over the op (B=", kBatch,
                             ", in_dims 0) threw: ", e.what(), " Sample: ", k.sample(), "."));
    }
    const bool used_fallback = vmap_fallback_count(ctx.op.name()) > fallback_before;
    const std::string used = used_fallback ? "the per-sample vmap fallback (no vmap rule is registered)"
                                           : "the registered vmap rule";
    for (int64_t b = 0; b < kBatch; ++b) {
      if (auto failure = compare_element(k, elements[b], b, got, used)) return *failure;
    }
    return k.passed(concat("vmap used ", used));
  }

 private:
  static std::vector<Tensor> under_vmap(const OperatorHandle& op, const std::vector<Stack>& elements,
                                        const std::vector<size_t>& slots, const std::vector<Tensor>& batched) {
    NoGradGuard no_grad;
    std::vector<std::optional<int64_t>> in_dims(slots.size(), int64_t{0});
    return vmap(
        [&](const std::vector<Tensor>& xs) {
          Stack stack = elements[0];
          for (size_t i = 0; i < slots.size(); ++i) stack[slots[i]] = IValue(xs[i]);
          run_boxed(op, stack);
          std::vector<Tensor> outs;
          for (const auto& v : stack) outs.push_back(v.is_none() ? Tensor() : v.to_tensor());
          return outs;
        },
        in_dims, {int64_t{0}},
        // A random op runs every call from one generator state (run_boxed), so the per-sample
        // runs draw the same numbers: what vmap's randomness="same" promises.
        op.has_tag(Tag::nondeterministic_seeded) ? Randomness::Same : Randomness::Error)(batched);
  }

  // Batch element b of vmap's outputs against the op called on that element alone.
  static std::optional<CheckResult> compare_element(const CheckRun& k, const Stack& element, int64_t b,
                                                    const std::vector<Tensor>& got, const std::string& used) {
    const CheckContext& ctx = k.ctx();
    Run one = run_op(ctx.op, element);
    if (one.error && one.error->code() == ErrorCode::kNotImplemented) return k.threw(*one.error, "one batch element alone");
    if (one.error) {
      return k.failed(Cause{FindingKind::threw, "batch element", "the op throws on a batch element that vmap took"},
                      concat("vmap_consistency of '", ctx.op.name(), "': the op threw on batch element ", b, ": ",
                             one.error->what()));
    }
    if (one.seen.size() != got.size()) {
      return k.failed(Cause{FindingKind::return_mismatch, "vmap", "vmap returns another number of outputs than the op"},
                      concat("vmap_consistency of '", ctx.op.name(), "': vmap returned ", got.size(), " outputs, the op ",
                             one.seen.size()));
    }
    for (size_t j = 0; j < got.size(); ++j) {
      const std::string output = concat("output ", j);
      // An output observed as None (undefined: a backward op's output_mask) stays None.
      if (one.seen[j].second.is_none() || !got[j].defined()) {
        if (one.seen[j].second.is_none() == !got[j].defined()) continue;
        return k.failed(Cause{FindingKind::return_mismatch, output, concat("under vmap ", output, " is None where the op's is not, or not where it is")},
                        concat("vmap_consistency of '", ctx.op.name(), "': under vmap output ", j, " is ",
                               got[j].defined() ? "a tensor" : "None", " but the op alone returns ",
                               got[j].defined() ? "None" : "a tensor", " for batch element ", b, ". Sample: ", k.sample(), "."));
      }
      const Tensor want = one.seen[j].second.to_tensor();
      Verdict c = compare_tensors(got[j].select(0, b), want, ctx.tolerance.for_dtype(want.dtype(), ctx.op.data().get()));
      if (!c.equal) {
        c.subject = output;
        return k.failed(mismatch_cause(c, "under vmap the op differs from a loop over the batch"),
                        concat("vmap_consistency of '", ctx.op.name(), "': under vmap (B=", kBatch, ", in_dims 0, using ",
                               used, ") output ", j, " of batch element ", b,
                               " differs from calling the op on that element alone: ", c.what,
                               ". Check the rule registered with register_vmap (the batch dimension of its inputs ",
                               "and the out_dims it returns). Sample: ", k.sample(), "."));
      }
    }
    return std::nullopt;
  }
};

}  // namespace

std::unique_ptr<Check> make_vmap_consistency() { return std::make_unique<VmapConsistency>(); }

}  // namespace opconform::conformance::detail
