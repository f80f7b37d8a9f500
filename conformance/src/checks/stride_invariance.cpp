// stride_invariance (docs/checks.md): a non-contiguous input gives the result of its contiguous
// copy. Each tensor argument is laid out differently (transposed, sliced with a step, with a
// storage offset, broadcast) with the same values; the unused elements of those buffers hold a
// conspicuous value, so a kernel that ignores strides or the offset gets it into its result.
#include <limits>
#include <optional>

#include "opconform/conformance/detail/builtin_checks.h"
#include "opconform/conformance/detail/check_kit.h"

namespace opconform::conformance::detail {
namespace {

bool random(const OperatorHandle& op) { return op.has_tag(Tag::nondeterministic_seeded); }

using opconform::detail::concat;

// A buffer whose unused elements hold a conspicuous value, so a kernel reading outside the
// view's elements (ignoring strides or the offset) gets it into its result.
Tensor filled_buffer(IntArrayRef sizes, const Tensor& like) {
  Tensor b = empty(sizes, like.options());
  if (is_floating(like.dtype()) || is_complex(like.dtype())) b.fill_(Scalar(std::numeric_limits<double>::quiet_NaN()));
  else if (like.dtype() == DType::Bool) b.fill_(Scalar(true));
  else b.fill_(Scalar(int64_t{7}));
  return b;
}

// A non-contiguous tensor: one with t's values, or (a broadcast) with values of its own.
struct LayoutVariant {
  std::string how;
  Tensor tensor;
  bool own_values = false;
};

std::vector<LayoutVariant> layout_variants(const Tensor& t, bool written) {
  std::vector<LayoutVariant> out;
  const int64_t dim = t.dim();
  std::vector<int64_t> sizes(t.sizes().begin(), t.sizes().end());
  if (dim >= 2 && (sizes[dim - 1] > 1 || sizes[dim - 2] > 1)) {
    std::vector<int64_t> swapped = sizes;
    std::swap(swapped[dim - 1], swapped[dim - 2]);
    Tensor buffer = empty(swapped, t.options());
    buffer.copy_(t.transpose(-1, -2));
    out.push_back({"a transposed view", buffer.transpose(-1, -2)});
  }
  if (dim >= 1) {
    std::vector<int64_t> wide = sizes;
    wide[dim - 1] *= 2;
    Tensor v = filled_buffer(wide, t).slice(dim - 1, 0, wide[dim - 1], 2);
    v.copy_(t);
    out.push_back({"a view sliced with step 2", v});
  }
  {
    Tensor flat = filled_buffer(std::vector<int64_t>{t.numel() + 3}, t);
    Tensor v = flat.narrow(0, 3, t.numel()).view(sizes);
    v.copy_(t);
    out.push_back({"a view with storage offset 3", v});
  }
  // Broadcast: the values of t's first slice along d repeated (stride 0). Its reference is its
  // own contiguous copy; never used for written arguments (every element aliases one).
  for (int64_t d = 0; d < dim && !written; ++d) {
    if (sizes[d] > 1) {
      out.push_back({concat("a broadcast view (stride 0 along dim ", d, ")"), t.narrow(d, 0, 1).clone().expand(sizes), true});
      break;
    }
  }
  return out;
}

class StrideInvariance final : public Check {
 public:
  std::string_view name() const override { return "stride_invariance"; }
  CheckResult run(const CheckContext& ctx) const override {
    const CheckRun k(name(), ctx);
    if (ctx.op.data()->layout_query) {  // Note [Layout queries]
      return k.skipped(concat("'", ctx.op.name(), "' returns its input's layout, which a change of layout changes"),
                       "layout_query", "the op returns its input's layout");
    }
    if (ctx.op.data()->addresses_storage) {  // Note [Ops that address storage]
      return k.skipped(concat("'", ctx.op.name(), "' addresses its input's storage through strides of its own: "
                              "another layout of the same values is another input to it"),
                       "addresses_storage", "the op addresses its input's storage through strides of its own");
    }
    size_t compared = 0, mistrusted = 0;
    for (size_t a = 0; a < ctx.sample.args.size(); ++a) {
      if (auto failure = check_argument(k, a, compared, mistrusted)) return *failure;
    }
    if (compared == 0) {
      return k.skipped("no non-empty tensor argument with data to lay out differently", "no_tensor_argument",
                       "no non-empty tensor argument with data");
    }
    if (mistrusted == compared) {
      return k.mistrusted(concat("stride_invariance of '", ctx.op.name(), "': every compared value was zero or NaN"));
    }
    if (random(ctx.op)) {
      return k.passed(concat("'", ctx.op.name(), "' draws random numbers: the outputs' shapes and dtypes do not ",
                             "depend on the layouts; their values were not compared (draws may follow memory order)"));
    }
    return k.passed();
  }

 private:
  // Every layout variant of argument a against a contiguous copy: the failure, if any.
  static std::optional<CheckResult> check_argument(const CheckRun& k, size_t a, size_t& compared, size_t& mistrusted) {
    const CheckContext& ctx = k.ctx();
    const Stack& args = ctx.sample.args;
    if (!args[a].is_tensor() || !args[a].to_tensor().defined()) return std::nullopt;
    const Tensor t = args[a].to_tensor().detach();
    if (t.is_meta_data() || t.numel() == 0) return std::nullopt;
    const std::string arg = arg_name(ctx.op, a);
    // The run on a contiguous copy, the one every variant with t's values is compared with:
    // made once per argument, as the values are the same (a broadcast gets its own).
    std::optional<Run> on_a_copy_of_t;
    auto on_a_contiguous_copy = [&](const Tensor& values) {
      Stack with_copy = k.clone();
      with_copy[a] = IValue(values.contiguous().clone());
      return run_op(ctx.op, with_copy);
    };
    for (const auto& [how, variant, own_values] : layout_variants(t, is_written(ctx.op, a))) {
      Stack with_variant = k.clone();
      with_variant[a] = IValue(variant);
      Run got = run_op(ctx.op, with_variant);
      if (!own_values && !on_a_copy_of_t) on_a_copy_of_t = on_a_contiguous_copy(t);
      const Run broadcast_copy = own_values ? on_a_contiguous_copy(variant) : Run{};
      const Run& want = own_values ? broadcast_copy : *on_a_copy_of_t;
      const std::string subject = concat("argument '", arg, "' as ", how, " (sizes ", shape_string(variant.sizes()),
                                         ", strides ", shape_string(variant.strides()), ", storage offset ",
                                         variant.storage_offset(), ")");
      if (got.error && want.error) continue;  // rejected either way: not a layout question
      if (got.error || want.error) {
        return k.failed(Cause{FindingKind::threw, arg, concat("throws for one layout of '", arg, "' and not for another")},
                        concat("stride_invariance of '", ctx.op.name(), "': with ", subject, " the op ",
                               got.error ? "threw" : "succeeded", " but with its contiguous copy it ",
                               want.error ? "threw" : "succeeded", ": ", (got.error ? got.error : want.error)->what(),
                               " Sample: ", k.sample(), "."));
      }
      // A random op may draw in memory order, so which element gets which draw can follow the layout
      // (ATen's bernoulli_ fills a mask shaped like its input): only the metadata must not change.
      Verdict v = compare_observables(ctx.op, got.seen, want.seen, ctx.tolerance,
                                      random(ctx.op) ? Exactness::metadata : Exactness::tolerance);
      if (!v.equal) {
        return k.failed(mismatch_cause(v, concat("a non-contiguous '", arg, "' changes the result"), std::nullopt, arg),
                        concat("stride_invariance of '", ctx.op.name(), "': with ", subject,
                               " the result differs from the one for its contiguous copy: ", v.what,
                               ". The kernel must read through sizes, strides and storage_offset (or call ",
                               ".contiguous() first). Sample: ", k.sample(), "."));
      }
      ++compared;
      mistrusted += v.mistrusted ? 1 : 0;
    }
    return std::nullopt;
  }
};

}  // namespace

std::unique_ptr<Check> make_stride_invariance() { return std::make_unique<StrideInvariance>(); }

}  // namespace opconform::conformance::detail
