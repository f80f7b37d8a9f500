// The properties that need no reference (CHECKS.md): stride invariance, determinism, dtype
// consistency, edge shapes, vmap consistency, autocast consistency, error inputs. Each compares
// the op with itself under a transformation whose effect on the result is known (none, or a
// cast), so a failure is a bug of the op whatever its mathematical definition.
//
// Common rules: every run gets fresh clones of the sample (clone_args) so runs cannot see each
// other's writes; runs are under NoGradGuard (these are properties of the forward values);
// "observables" of a run are its returned values plus the arguments the schema marks written.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <sstream>

#include "opconform/conformance/check.h"
#include "opconform/conformance/detail/builtin_checks.h"
#include "opconform/conformance/detail/observables.h"
#include "opconform/conformance/rounding.h"
#include "opconform/conformance/sample.h"
#include "opconform/conformance/tolerance.h"
#include "opconform/core/autocast.h"
#include "opconform/core/autograd.h"
#include "opconform/core/device_semantics.h"
#include "opconform/core/vmap.h"

namespace opconform::conformance::detail {

using autograd::NoGradGuard;
using opconform::detail::concat;

CheckResult make_result(std::string_view check, Outcome outcome, std::string message, const std::string& op,
                        const std::string& sample) {
  CheckResult r;
  r.check = std::string(check);
  r.outcome = outcome;
  r.message = std::move(message);
  if (outcome == Outcome::failed) r.repro = concat("check_named(\"", check, "\") on '", op, "' with {", sample, "}");
  return r;
}

std::vector<std::string> arg_names(const OperatorHandle& op) {
  std::vector<std::string> names;
  if (op.has_schema()) {
    for (const auto& a : op.schema().arguments) names.push_back(a.name);
  }
  return names;
}

std::string arg_name(const OperatorHandle& op, size_t i) {
  auto names = arg_names(op);
  return i < names.size() ? names[i] : "arg" + std::to_string(i);
}

bool is_written(const OperatorHandle& op, size_t i) {
  return op.has_schema() && i < op.schema().arguments.size() && op.schema().is_mutable(i);
}

// Runs the op on `args` (which it may write) and returns its returns.
Stack call(const OperatorHandle& op, const Stack& args) {
  NoGradGuard no_grad;
  Stack stack = args;
  ::opconform::conformance::detail::run_boxed(op, stack);
  return stack;
}

// An undefined Tensor is observed as None, as Python sees it: a kernel returns an undefined
// Tensor where a captured graph returns None (a backward op's output_mask false), one value.
namespace {
IValue observed(const IValue& v) {
  const Tensor* t = v.get_if<Tensor>();
  return t != nullptr && !t->defined() ? IValue() : v;
}
}  // namespace

std::vector<std::pair<std::string, IValue>> observables(const OperatorHandle& op, const Stack& args, const Stack& returns) {
  std::vector<std::pair<std::string, IValue>> out;
  for (size_t j = 0; j < returns.size(); ++j) {
    std::string name = "output " + std::to_string(j);
    if (returns[j].is_tensor_list()) {
      const auto& list = returns[j].to_tensor_list();
      for (size_t e = 0; e < list.size(); ++e) {
        out.emplace_back(name + "[" + std::to_string(e) + "]", observed(IValue(list[e])));
      }
    } else {
      out.emplace_back(name, observed(returns[j]));
    }
  }
  for (size_t i = 0; i < args.size(); ++i) {
    if (is_written(op, i)) out.emplace_back("argument '" + arg_name(op, i) + "' after the call", args[i]);
  }
  return out;
}

Verdict compare_observables(const OperatorHandle& op, const std::vector<std::pair<std::string, IValue>>& actual,
                            const std::vector<std::pair<std::string, IValue>>& expected, const ToleranceSpec& spec,
                            Exactness exactness) {
  Verdict v;
  if (actual.size() != expected.size()) {
    return {false, false, concat(actual.size(), " values instead of ", expected.size())};
  }
  size_t tensors = 0, mistrusted = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const IValue& a = actual[i].second;
    const IValue& e = expected[i].second;
    if (a.is_tensor() && e.is_tensor() && a.to_tensor().defined() && e.to_tensor().defined()) {
      const Tensor& at = a.to_tensor();
      const Tensor& et = e.to_tensor();
      if (exactness == Exactness::bitwise) {
        if (at.dtype() != et.dtype() || !std::equal(at.sizes().begin(), at.sizes().end(), et.sizes().begin(), et.sizes().end()) ||
            !bitwise_equal(at, et)) {
          return {false, false, concat(actual[i].first, ": not bitwise equal (", at.to_string(), " vs ", et.to_string(), ")")};
        }
        continue;
      }
      Comparison c = compare(at, et, spec.for_dtype(et.dtype(), op.data().get()));
      if (!c.equal) return {false, false, concat(actual[i].first, ": ", c.mismatch)};
      ++tensors;
      mistrusted += c.mistrusted ? 1 : 0;
    } else if (a.repr() != e.repr()) {
      return {false, false, concat(actual[i].first, ": ", a.repr(), " vs ", e.repr())};
    }
  }
  v.mistrusted = tensors > 0 && mistrusted == tensors;
  return v;
}

const std::string& SampleText::str() const {
  if (!text_) text_ = describe(*args_, arg_names(*op_));
  return *text_;
}

std::ostream& operator<<(std::ostream& os, const SampleText& s) { return os << s.str(); }

Run run_op(const OperatorHandle& op, const Stack& args) {
  Run r;
  try {
    Stack returns = call(op, args);
    r.seen = observables(op, args, returns);
  } catch (const Error& e) {
    r.error = e;
  }
  return r;
}

namespace {

Tensor plain(const Tensor& t) { return t.detach(); }

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

// ---- stride_invariance ------------------------------------------------------------------------

class StrideInvariance final : public Check {
 public:
  std::string_view name() const override { return "stride_invariance"; }
  CheckResult run(const CheckContext& ctx) const override {
    const auto& args = ctx.sample.args;
    const SampleText sample(args, ctx.op);
    if (ctx.op.data()->layout_query) {  // Note [Layout queries]
      return make_result(name(), Outcome::skipped,
                         concat("'", ctx.op.name(), "' returns its input's layout, which a change of layout changes"));
    }
    if (ctx.op.data()->addresses_storage) {  // Note [Ops that address storage]
      return make_result(name(), Outcome::skipped,
                         concat("'", ctx.op.name(), "' addresses its input's storage through strides of its own: "
                                "another layout of the same values is another input to it"));
    }
    size_t compared = 0, mistrusted = 0;
    for (size_t a = 0; a < args.size(); ++a) {
      if (!args[a].is_tensor() || !args[a].to_tensor().defined()) continue;
      const Tensor t = plain(args[a].to_tensor());
      if (t.is_meta_data() || t.numel() == 0) continue;
      // The run on a contiguous copy, the one every variant with t's values is compared with:
      // made once per argument, as the values are the same (a broadcast gets its own).
      std::optional<Run> on_a_copy_of_t;
      auto on_a_contiguous_copy = [&](const Tensor& values) {
        Stack with_copy = clone_args(args);
        with_copy[a] = IValue(values.contiguous().clone());
        return run_op(ctx.op, with_copy);
      };
      for (const auto& [how, variant, own_values] : layout_variants(t, is_written(ctx.op, a))) {
        Stack with_variant = clone_args(args);
        with_variant[a] = IValue(variant);
        Run got = run_op(ctx.op, with_variant);
        if (!own_values && !on_a_copy_of_t) on_a_copy_of_t = on_a_contiguous_copy(t);
        const Run broadcast_copy = own_values ? on_a_contiguous_copy(variant) : Run{};
        const Run& want = own_values ? broadcast_copy : *on_a_copy_of_t;
        const std::string subject = concat("argument '", arg_name(ctx.op, a), "' as ", how, " (sizes ",
                                           shape_string(variant.sizes()), ", strides ", shape_string(variant.strides()),
                                           ", storage offset ", variant.storage_offset(), ")");
        if (got.error && want.error) continue;  // rejected either way: not a layout question
        if (got.error || want.error) {
          return make_result(name(), Outcome::failed,
                             concat("stride_invariance of '", ctx.op.name(), "': with ", subject, " the op ",
                                    got.error ? "threw" : "succeeded", " but with its contiguous copy it ",
                                    want.error ? "threw" : "succeeded", ": ", (got.error ? got.error : want.error)->what(),
                                    " Sample: ", sample, "."),
                             ctx.op.name(), sample);
        }
        Verdict v = compare_observables(ctx.op, got.seen, want.seen, ctx.tolerance, Exactness::tolerance);
        if (!v.equal) {
          return make_result(name(), Outcome::failed,
                             concat("stride_invariance of '", ctx.op.name(), "': with ", subject,
                                    " the result differs from the one for its contiguous copy: ", v.what,
                                    ". The kernel must read through sizes, strides and storage_offset (or call ",
                                    ".contiguous() first). Sample: ", sample, "."),
                             ctx.op.name(), sample);
        }
        ++compared;
        mistrusted += v.mistrusted ? 1 : 0;
      }
    }
    if (compared == 0) {
      return make_result(name(), Outcome::skipped, "no non-empty tensor argument with data to lay out differently");
    }
    if (mistrusted == compared) {
      return make_result(name(), Outcome::mistrusted,
                         concat("stride_invariance of '", ctx.op.name(), "': every compared value was zero or NaN"));
    }
    return make_result(name(), Outcome::passed, "");
  }
};

// ---- determinism --------------------------------------------------------------------------------

class Determinism final : public Check {
 public:
  std::string_view name() const override { return "determinism"; }
  CheckResult run(const CheckContext& ctx) const override {
    if (ctx.op.has_tag(Tag::nondeterministic_seeded)) {
      return make_result(name(), Outcome::skipped,
                         concat("'", ctx.op.name(), "' is tagged nondeterministic_seeded (it draws random numbers)"));
    }
    // nondeterministic_bitwise: declared to vary in the last bits (e.g. atomics): tolerance.
    const Exactness exactness = ctx.op.has_tag(Tag::nondeterministic_bitwise) ? Exactness::tolerance : Exactness::bitwise;
    const SampleText sample(ctx.sample.args, ctx.op);
    Run first = run_op(ctx.op, clone_args(ctx.sample.args));
    Run second = run_op(ctx.op, clone_args(ctx.sample.args));
    if (first.error || second.error) {
      if (first.error && second.error) {
        // kNotImplemented (no kernel for this dtype/device) is unsupported, anything else failed.
        return operator_threw(std::string(name()), ctx.op.name(), *first.error, sample, "both runs");
      }
      return make_result(name(), Outcome::failed,
                         concat("determinism of '", ctx.op.name(), "': one of two runs on equal inputs threw: ",
                                (first.error ? first.error : second.error)->what(), " Sample: ", sample, "."),
                         ctx.op.name(), sample);
    }
    Verdict v = compare_observables(ctx.op, second.seen, first.seen, ctx.tolerance, exactness);
    if (!v.equal) {
      return make_result(name(), Outcome::failed,
                         concat("determinism of '", ctx.op.name(), "': two runs on equal inputs gave different results (",
                                exactness == Exactness::bitwise ? "bitwise" : "beyond tolerance", "): ", v.what,
                                ". A kernel must not depend on state kept between calls; tag the op ",
                                "nondeterministic_seeded or nondeterministic_bitwise if it is meant to vary. Sample: ",
                                sample, "."),
                         ctx.op.name(), sample);
    }
    return make_result(name(), Outcome::passed, "");
  }
};

// ---- dtype_consistency --------------------------------------------------------------------------

class DtypeConsistency final : public Check {
 public:
  std::string_view name() const override { return "dtype_consistency"; }
  CheckResult run(const CheckContext& ctx) const override {
    const auto& args = ctx.sample.args;
    const SampleText sample(args, ctx.op);
    Stack high = clone_args(args);
    bool any_floating = false, any_lower = false;
    for (auto& v : high) {
      if (!v.is_tensor() || !v.to_tensor().defined() || !is_floating(v.to_tensor().dtype())) continue;
      any_floating = true;
      any_lower = any_lower || v.to_tensor().dtype() != DType::Float64;
      v = IValue(plain(v.to_tensor()).to(DType::Float64).clone());
    }
    if (!any_floating) return make_result(name(), Outcome::skipped, "no floating tensor argument");
    if (!any_lower) return make_result(name(), Outcome::skipped, "the sample is float64 already");

    Run low = run_op(ctx.op, clone_args(args));
    if (low.error) return operator_threw(std::string(name()), ctx.op.name(), *low.error, sample, "the run in the sample's dtype");
    Run ref = run_op(ctx.op, high);
    if (ref.error) {
      return make_result(name(), Outcome::skipped,
                         concat("'", ctx.op.name(), "' rejects float64 inputs: ", ref.error->what()));
    }
    if (low.seen.size() != ref.seen.size()) {
      return make_result(name(), Outcome::failed,
                         concat("dtype_consistency of '", ctx.op.name(), "': ", low.seen.size(), " results in the sample's ",
                                "dtypes but ", ref.seen.size(), " in float64"),
                         ctx.op.name(), sample);
    }
    // The float64 result, rounded to the sample run's dtype, is the reference; the tolerance is
    // that (lower) dtype's.
    size_t compared = 0, mistrusted = 0;
    const std::optional<RoundingContract> rounding = ctx.op.data()->rounding;
    for (size_t i = 0; i < low.seen.size(); ++i) {
      const IValue& l = low.seen[i].second;
      const IValue& h = ref.seen[i].second;
      if (!l.is_tensor() || !h.is_tensor() || !l.to_tensor().defined() || !h.to_tensor().defined()) continue;
      const Tensor& lt = l.to_tensor();
      Comparison c = compare(lt, h.to_tensor().to(lt.dtype()), ctx.tolerance.for_dtype(lt.dtype(), ctx.op.data().get()));
      if (!c.equal) {
        return make_result(name(), Outcome::failed,
                           concat("dtype_consistency of '", ctx.op.name(), "': ", low.seen[i].first, " in ",
                                  ::opconform::name(lt.dtype()), " differs from the float64 run beyond ",
                                  ::opconform::name(lt.dtype()), "'s tolerance: ", c.mismatch,
                                  ". The kernel seems to compute in a lower precision than its inputs' dtype. Sample: ",
                                  sample, "."),
                           ctx.op.name(), sample);
      }
      // Within tolerance, and for ops that declare it, rounded as the contract says (Note
      // [Low-precision rounding]): wrong rounding stays inside float16's tolerance.
      if (rounding) {
        if (RoundingVerdict rv = check_rounding(lt, h.to_tensor(), *rounding); !rv.ok) {
          return make_result(name(), Outcome::failed,
                             concat("dtype_consistency of '", ctx.op.name(), "': ", low.seen[i].first, " in ",
                                    ::opconform::name(lt.dtype()), " is not its float64 result rounded to nearest-even, ",
                                    "as the op's rounding contract says: ", rv.what, ". Sample: ", sample, "."),
                             ctx.op.name(), sample);
        }
      }
      ++compared;
      mistrusted += c.mistrusted ? 1 : 0;
    }
    if (compared > 0 && mistrusted == compared) {
      return make_result(name(), Outcome::mistrusted,
                         concat("dtype_consistency of '", ctx.op.name(), "': every compared value was zero or NaN"));
    }
    return make_result(name(), Outcome::passed, "");
  }
};

// ---- edge_shapes ----------------------------------------------------------------------------------

// The sample with every tensor argument reshaped the same way: zero-size (first dim 0), 0-d
// (the first element), size-1 (the first element in every dim, same rank). The 0-d and size-1
// ones hold the sample's values, so a pointwise op's result is known: a slice of the full one.
enum class Edge { zero_size, zero_dim, size_one };

std::string_view edge_name(Edge e) {
  switch (e) {
    case Edge::zero_size: return "zero-size (first dimension 0)";
    case Edge::zero_dim: return "0-d";
    case Edge::size_one: return "size-1 (every dimension 1)";
  }
  return "";
}

Tensor edge_of(const Tensor& t, Edge e) {
  std::vector<int64_t> sizes(t.sizes().begin(), t.sizes().end());
  switch (e) {
    case Edge::zero_size:
      if (sizes.empty()) return t.clone();
      sizes[0] = 0;
      return empty(sizes, t.options());
    case Edge::zero_dim:
      return t.numel() ? t.reshape({-1}).narrow(0, 0, 1).reshape(std::vector<int64_t>{}).clone() : zeros({}, t.options());
    case Edge::size_one: {
      if (t.numel() == 0) return zeros(std::vector<int64_t>(sizes.size(), 1), t.options());
      Tensor s = t;
      for (int64_t d = 0; d < t.dim(); ++d) s = s.narrow(d, 0, 1);
      return s.clone();
    }
  }
  return t;
}

// The slice of the full result an edge input corresponds to (pointwise ops only).
Tensor edge_slice(const Tensor& full, Edge e) {
  if (e == Edge::zero_dim) return full.numel() ? full.reshape({-1}).narrow(0, 0, 1).reshape(std::vector<int64_t>{}) : full;
  Tensor s = full;
  for (int64_t d = 0; d < full.dim(); ++d) s = s.narrow(d, 0, 1);
  return s;
}

class EdgeShapes final : public Check {
 public:
  std::string_view name() const override { return "edge_shapes"; }
  CheckResult run(const CheckContext& ctx) const override {
    const auto& args = ctx.sample.args;
    const SampleText sample(args, ctx.op);
    const bool pointwise = ctx.op.has_tag(Tag::pointwise);
    // The full result, for pointwise ops' slices (only when every tensor input has its shape).
    std::optional<Run> full;
    if (pointwise) full = run_op(ctx.op, clone_args(args));

    size_t tried = 0;
    for (Edge e : {Edge::zero_size, Edge::zero_dim, Edge::size_one}) {
      Stack edge = clone_args(args);
      bool changed = false;
      // The shape a pointwise op must return; none when the edge shapes do not broadcast (then
      // the op must reject them, which any clear error does).
      std::optional<std::vector<int64_t>> broadcast = std::vector<int64_t>{};
      bool same_shapes = true;
      std::optional<std::vector<int64_t>> first_shape;
      for (auto& v : edge) {
        if (!v.is_tensor() || !v.to_tensor().defined() || v.to_tensor().is_meta_data()) continue;
        const Tensor t = plain(v.to_tensor());
        std::vector<int64_t> original(t.sizes().begin(), t.sizes().end());
        if (first_shape && *first_shape != original) same_shapes = false;
        if (!first_shape) first_shape = original;
        Tensor et = edge_of(t, e);
        changed = changed || !std::equal(et.sizes().begin(), et.sizes().end(), t.sizes().begin(), t.sizes().end());
        if (broadcast) {
          try {
            broadcast = broadcast_shapes(*broadcast, et.sizes());
          } catch (const Error&) {
            broadcast.reset();
          }
        }
        v = IValue(et);
      }
      if (!changed) continue;
      ++tried;
      const std::string what = concat("with ", edge_name(e), " tensors (", describe(edge, arg_names(ctx.op)), ")");
      Run got;
      try {
        got = run_op(ctx.op, edge);
      } catch (const std::exception& ex) {
        return make_result(name(), Outcome::failed,
                           concat("edge_shapes of '", ctx.op.name(), "': ", what, " the op threw an exception that is ",
                                  "not an opconform::Error: ", ex.what(), ". Reject unsupported shapes with a clear ",
                                  "opconform::Error (OPCONFORM_CHECK) naming the argument. Sample: ", sample, "."),
                           ctx.op.name(), sample);
      }
      if (got.error) continue;  // a clear error is an acceptable answer
      for (const auto& [label, value] : got.seen) {
        if (!value.is_tensor() || !value.to_tensor().defined()) continue;
        const Tensor& out = value.to_tensor();
        for (int64_t s : out.sizes()) {
          if (s < 0) {
            return make_result(name(), Outcome::failed,
                               concat("edge_shapes of '", ctx.op.name(), "': ", what, " ", label, " has a negative size ",
                                      shape_string(out.sizes()), "."),
                               ctx.op.name(), sample);
          }
        }
        if (pointwise && label.rfind("output", 0) == 0 &&
            (!broadcast || !std::equal(out.sizes().begin(), out.sizes().end(), broadcast->begin(), broadcast->end()))) {
          return make_result(name(), Outcome::failed,
                             concat("edge_shapes of '", ctx.op.name(), "': ", what, " ", label, " has shape ",
                                    shape_string(out.sizes()), " but a pointwise op must return the inputs' broadcast shape ",
                                    broadcast ? shape_string(*broadcast) : std::string("(they do not broadcast: an error)"),
                                    ". Sample: ", sample, "."),
                             ctx.op.name(), sample);
        }
      }
      // A pointwise op on the first element(s) must give the first element(s) of the full result.
      if (pointwise && same_shapes && e != Edge::zero_size && full && !full->error &&
          full->seen.size() == got.seen.size()) {
        for (size_t i = 0; i < got.seen.size(); ++i) {
          const IValue& g = got.seen[i].second;
          const IValue& f = full->seen[i].second;
          if (!g.is_tensor() || !f.is_tensor() || !f.to_tensor().defined() || f.to_tensor().numel() == 0) continue;
          const Tensor want = edge_slice(f.to_tensor(), e);
          Comparison c = compare(g.to_tensor(), want, ctx.tolerance.for_dtype(want.dtype(), ctx.op.data().get()));
          if (!c.equal) {
            return make_result(name(), Outcome::failed,
                               concat("edge_shapes of '", ctx.op.name(), "': ", what, " ", got.seen[i].first,
                                      " differs from the matching elements of the full result: ", c.mismatch,
                                      ". Sample: ", sample, "."),
                               ctx.op.name(), sample);
          }
        }
      }
    }
    if (tried == 0) return make_result(name(), Outcome::skipped, "no tensor argument whose shape can be made an edge case");
    return make_result(name(), Outcome::passed, "");
  }
};

// ---- vmap_consistency ---------------------------------------------------------------------------

constexpr int64_t kBatch = 3;

// Batch element b of the sample: floating tensors scaled by (1 + b/8) (exact in binary, sign-
// preserving, so value constraints such as positivity survive); others as given.
Stack batch_element(const Stack& args, int64_t b) {
  Stack out = clone_args(args);
  for (auto& v : out) {
    if (!v.is_tensor() || !v.to_tensor().defined()) continue;
    Tensor t = plain(v.to_tensor());
    if (is_floating(t.dtype()) && b > 0) {
      std::vector<double> vals = t.contiguous().to_vector<double>();
      for (double& x : vals) x *= 1.0 + static_cast<double>(b) / 8;
      t = from_vector<double>(vals, t.sizes()).to(t.dtype(), t.device());
    }
    v = IValue(t);
  }
  return out;
}

class VmapConsistency final : public Check {
 public:
  std::string_view name() const override { return "vmap_consistency"; }
  CheckResult run(const CheckContext& ctx) const override {
    const auto& args = ctx.sample.args;
    const SampleText sample(args, ctx.op);
    std::vector<size_t> slots;
    for (size_t a = 0; a < args.size(); ++a) {
      if (args[a].is_tensor() && args[a].to_tensor().defined() && !args[a].to_tensor().is_meta_data()) slots.push_back(a);
    }
    if (slots.empty()) return make_result(name(), Outcome::skipped, "no tensor argument to batch");
    const FunctionSchema& schema = ctx.op.schema();
    if (schema.is_mutable()) return make_result(name(), Outcome::skipped, "the op writes its arguments (vmap refuses)");
    for (const auto& r : schema.returns) {
      if (r.type.kind() != TypeKind::kTensor) {
        return make_result(name(), Outcome::skipped, "the op returns something other than plain tensors");
      }
    }

    std::vector<Stack> elements;
    for (int64_t b = 0; b < kBatch; ++b) elements.push_back(batch_element(args, b));
    std::vector<Tensor> batched;
    for (size_t a : slots) {
      const Tensor& t0 = elements[0][a].to_tensor();
      std::vector<int64_t> sizes{kBatch};
      sizes.insert(sizes.end(), t0.sizes().begin(), t0.sizes().end());
      Tensor stacked = empty(sizes, t0.options());
      for (int64_t b = 0; b < kBatch; ++b) stacked.select(0, b).copy_(elements[b][a].to_tensor());
      batched.push_back(stacked);
    }

    // vmap needs a Batched kernel: the op's rule, or the registry's per-sample fallback. Install
    // the fallback only for this check when neither is there (installing it again would stack).
    RegistrationHandle fallback;
    if (!ctx.op.kernel_for(DispatchKey::Batched).valid()) fallback = install_vmap_fallback(ctx.registry);
    const int64_t fallback_before = vmap_fallback_count(ctx.op.name());

    const OperatorHandle op = ctx.op;
    std::vector<Tensor> got;
    try {
      NoGradGuard no_grad;
      std::vector<std::optional<int64_t>> in_dims(slots.size(), int64_t{0});
      got = vmap(
          [&](const std::vector<Tensor>& xs) {
            Stack stack = elements[0];
            for (size_t i = 0; i < slots.size(); ++i) stack[slots[i]] = IValue(xs[i]);
            ::opconform::conformance::detail::run_boxed(op, stack);
            std::vector<Tensor> outs;
            for (const auto& v : stack) outs.push_back(v.is_none() ? Tensor() : v.to_tensor());
            return outs;
          },
          in_dims, {int64_t{0}},
          // A random op runs every call from one generator state (run_boxed), so the per-sample
          // runs draw the same numbers: what vmap's randomness="same" promises.
          op.has_tag(Tag::nondeterministic_seeded) ? Randomness::Same : Randomness::Error)(batched);
    } catch (const Error& e) {
      if (e.code() == ErrorCode::kNotImplemented) return operator_threw(std::string(name()), ctx.op.name(), e, sample, "vmap");
      return make_result(name(), Outcome::failed,
                         concat("vmap_consistency of '", ctx.op.name(), "': vmap over the op (B=", kBatch,
                                ", in_dims 0) threw: ", e.what(), " Sample: ", sample, "."),
                         ctx.op.name(), sample);
    }
    const bool used_fallback = vmap_fallback_count(ctx.op.name()) > fallback_before;
    const std::string used = used_fallback ? "the per-sample vmap fallback (no vmap rule is registered)"
                                           : "the registered vmap rule";

    for (int64_t b = 0; b < kBatch; ++b) {
      Run one = run_op(ctx.op, elements[b]);
      if (one.error && one.error->code() == ErrorCode::kNotImplemented)
        return operator_threw(std::string(name()), ctx.op.name(), *one.error, sample, "one batch element alone");
      if (one.error) {
        return make_result(name(), Outcome::failed,
                           concat("vmap_consistency of '", ctx.op.name(), "': the op threw on batch element ", b, ": ",
                                  one.error->what()),
                           ctx.op.name(), sample);
      }
      if (one.seen.size() != got.size()) {
        return make_result(name(), Outcome::failed,
                           concat("vmap_consistency of '", ctx.op.name(), "': vmap returned ", got.size(),
                                  " outputs, the op ", one.seen.size()),
                           ctx.op.name(), sample);
      }
      for (size_t k = 0; k < got.size(); ++k) {
        // An output observed as None (undefined: a backward op's output_mask) stays None.
        if (one.seen[k].second.is_none() || !got[k].defined()) {
          if (one.seen[k].second.is_none() == !got[k].defined()) continue;
          return make_result(name(), Outcome::failed,
                             concat("vmap_consistency of '", ctx.op.name(), "': under vmap output ", k, " is ",
                                    got[k].defined() ? "a tensor" : "None", " but the op alone returns ",
                                    got[k].defined() ? "None" : "a tensor", " for batch element ", b, ". Sample: ", sample, "."),
                             ctx.op.name(), sample);
        }
        const Tensor want = one.seen[k].second.to_tensor();
        Comparison c = compare(got[k].select(0, b), want, ctx.tolerance.for_dtype(want.dtype(), ctx.op.data().get()));
        if (!c.equal) {
          return make_result(name(), Outcome::failed,
                             concat("vmap_consistency of '", ctx.op.name(), "': under vmap (B=", kBatch,
                                    ", in_dims 0, using ", used, ") output ", k, " of batch element ", b,
                                    " differs from calling the op on that element alone: ", c.mismatch,
                                    ". Check the rule registered with register_vmap (the batch dimension of its inputs ",
                                    "and the out_dims it returns). Sample: ", sample, "."),
                             ctx.op.name(), sample);
        }
      }
    }
    return make_result(name(), Outcome::passed, concat("vmap used ", used));
  }
};

// ---- autocast_consistency ---------------------------------------------------------------------

// Note [Which dtype autocast casts to]: a rule (make_autocast_kernel) casts to the dtype given at
// registration, whatever the guard's dtype; the check cannot ask which. It enables autocast with
// float16 (the guard's dtype) and takes the cast dtype from the result: the first floating
// output's dtype when it is float16, bfloat16 or float32, else each of them in turn. The result
// must equal the op called outside autocast on inputs cast to that dtype by hand. Float64 inputs
// must not be cast at all (PyTorch's rule): under autocast they give the result they give without.
enum class Which { all, all_but_float64, only_float64 };

Stack cast_floating(const Stack& args, std::optional<DType> to, Which which) {
  Stack out = clone_args(args);
  auto cast_one = [&](const Tensor& t) {
    if (!t.defined() || !is_floating(t.dtype()) || !to) return t;
    const bool f64 = t.dtype() == DType::Float64;
    if ((f64 && which == Which::all_but_float64) || (!f64 && which == Which::only_float64)) return t;
    return plain(t).to(*to).clone();
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

class AutocastConsistency final : public Check {
 public:
  std::string_view name() const override { return "autocast_consistency"; }
  CheckResult run(const CheckContext& ctx) const override {
    if (!ctx.op.has_kernel_at(DispatchKey::AutocastCPU)) {
      return make_result(name(), Outcome::skipped, "no autocast rule (no kernel at AutocastCPU)");
    }
    const auto& args = ctx.sample.args;
    const SampleText sample(args, ctx.op);
    if (!std::ranges::any_of(args, has_floating_cpu_tensor)) return make_result(name(), Outcome::skipped, "no floating CPU tensor argument");

    auto under_autocast = [&](const Stack& a) {
      AutocastGuard guard(DeviceType::CPU, DType::Float16);
      return run_op(ctx.op, a);
    };
    auto fail = [&](std::string msg) { return make_result(name(), Outcome::failed, std::move(msg), ctx.op.name(), sample); };

    // Float64 inputs pass through untouched.
    Stack as64 = cast_floating(args, DType::Float64, Which::all);
    Run plain64 = run_op(ctx.op, as64), auto64 = under_autocast(as64);
    if (!plain64.error) {
      if (auto64.error) return fail(concat("autocast_consistency of '", ctx.op.name(), "': float64 inputs work without autocast ",
                                           "but throw under it: ", auto64.error->what()));
      Verdict v = compare_observables(ctx.op, auto64.seen, plain64.seen, ctx.tolerance, Exactness::tolerance);
      if (!v.equal) {
        return fail(concat("autocast_consistency of '", ctx.op.name(), "': under autocast the result for float64 inputs ",
                           "changed: ", v.what, ". Autocast must not cast float64 tensors (only float16, bfloat16 and ",
                           "float32 are cast). Sample (as float64): ", describe(as64, arg_names(ctx.op)), "."));
      }
    }

    // Lower-precision inputs: float64 ones become float32 so that the rule has something to cast.
    // (float16/bfloat16/float32 tensors stay as the sample has them.)
    Stack low = cast_floating(args, DType::Float32, Which::only_float64);
    Run got = under_autocast(low);
    if (got.error) return fail(concat("autocast_consistency of '", ctx.op.name(), "': the op threw under autocast: ", got.error->what()));
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
    for (DType d : candidates) {
      Run by_hand = run_op(ctx.op, cast_floating(low, d, Which::all_but_float64));
      if (by_hand.error) continue;
      Verdict v = compare_observables(ctx.op, got.seen, by_hand.seen, ctx.tolerance, Exactness::tolerance);
      if (v.equal) return make_result(name(), Outcome::passed, concat("autocast casts to ", ::opconform::name(d)));
      if (first_mismatch.empty()) first_mismatch = concat("cast to ", ::opconform::name(d), " by hand: ", v.what);
    }
    return fail(concat("autocast_consistency of '", ctx.op.name(), "': under autocast the result matches no call on ",
                       "inputs cast by hand (to float16, bfloat16 or float32); ", first_mismatch,
                       ". The autocast rule must only cast the floating inputs, then run the op. Sample: ", sample, "."));
  }
};

// ---- error_inputs -------------------------------------------------------------------------------

// Note [What an error must name]: CHECKS.md asks for an opconform::Error that names the argument.
// Core's conversion errors ("expected a value of type Tensor but got str ('not a tensor')")
// name the offending value but neither the operator nor the argument; the check accepts an error
// that names the operator, an argument (quoted, 'x'), or quotes the offending value, so that it
// flags ops whose errors say nothing, not every op of the library.
class ErrorInputs final : public Check {
 public:
  std::string_view name() const override { return "error_inputs"; }
  CheckResult run(const CheckContext& ctx) const override {
    const auto& args = ctx.sample.args;
    const SampleText sample(args, ctx.op);
    const auto names = arg_names(ctx.op);
    struct Case {
      std::string what;
      Stack args;
      std::string offending;  // the repr of the bad value, when there is one
      bool result_with_data_is_ok = false;
    };
    std::vector<Case> cases;
    if (!args.empty()) {
      Stack missing = clone_args(args);
      missing.pop_back();
      cases.push_back({concat("without its last argument '", arg_name(ctx.op, args.size() - 1), "'"), missing, ""});
    }
    for (size_t i = 0; i < args.size(); ++i) {
      Stack wrong = clone_args(args);
      // A value of the wrong kind: a string where a tensor is accepted (Tensor, Tensor? even
      // when the sample holds None), else a tensor.
      const bool takes_tensor = args[i].is_tensor() || (ctx.op.has_schema() && i < ctx.op.schema().arguments.size() &&
                                                        ctx.op.schema().arguments[i].type.is_tensor_like());
      if (takes_tensor) wrong[i] = IValue("not a tensor");
      else wrong[i] = IValue(scalar_tensor(Scalar(1.5)));
      std::string offending = wrong[i].repr();
      cases.push_back({concat("with a ", wrong[i].type_name(), " for argument '", arg_name(ctx.op, i), "'"), wrong, offending});
    }
    for (size_t i = 0; i < args.size(); ++i) {
      if (!args[i].is_tensor() || !args[i].to_tensor().defined() || args[i].to_tensor().is_meta_data()) continue;
      Stack meta = clone_args(args);
      const Tensor& t = args[i].to_tensor();
      meta[i] = IValue(make_metadata_tensor(t.sizes(), t.strides(), t.dtype(), Device::meta()));
      cases.push_back({concat("with a meta tensor (no data) for argument '", arg_name(ctx.op, i), "'"), meta, ""});
    }

    for (const auto& c : cases) {
      try {
        Stack returns = call(ctx.op, c.args);
        // A meta input may legitimately give meta outputs (a meta kernel); anything else is a
        // silent result for invalid input.
        bool only_meta = c.what.find("meta tensor") != std::string::npos;
        for (const auto& v : returns) {
          // (an empty result on the meta device counts as meta too: it has no bytes either way)
          if (v.is_tensor() && v.to_tensor().defined() && !v.to_tensor().is_meta_data() &&
              !(v.to_tensor().device() == Device::meta()))
            only_meta = false;
        }
        if (!only_meta) {
          return make_result(name(), Outcome::failed,
                             concat("error_inputs of '", ctx.op.name(), "': called ", c.what,
                                    ", the op returned a result instead of an opconform::Error. Validate the ",
                                    "arguments (OPCONFORM_CHECK) and name the bad one. Sample: ", sample, "."),
                             ctx.op.name(), sample);
        }
      } catch (const Error& e) {
        const std::string msg = e.what();
        bool named = msg.find(ctx.op.name()) != std::string::npos ||
                     (ctx.op.has_schema() && msg.find(ctx.op.schema().name) != std::string::npos) ||
                     (!c.offending.empty() && msg.find(c.offending) != std::string::npos);
        for (const auto& n : names) named = named || msg.find("'" + n + "'") != std::string::npos;
        if (!named) {
          return make_result(name(), Outcome::failed,
                             concat("error_inputs of '", ctx.op.name(), "': called ", c.what, ", the op threw an ",
                                    "opconform::Error that names neither the operator nor the argument: \"", msg,
                                    "\". Sample: ", sample, "."),
                             ctx.op.name(), sample);
        }
      } catch (const std::exception& e) {
        return make_result(name(), Outcome::failed,
                           concat("error_inputs of '", ctx.op.name(), "': called ", c.what, ", the op threw an exception ",
                                  "that is not an opconform::Error: ", e.what(), ". Sample: ", sample, "."),
                           ctx.op.name(), sample);
      }
    }
    return make_result(name(), Outcome::passed, "");
  }
};

// ---- reference_agreement -----------------------------------------------------------------------

// The library's op and the reference's op of the same name on the same sample: the same outputs
// (values within tolerance, dtype and shape) and the same tensor arguments after the call (so a
// write the reference does not make is a difference too). Strides are not compared: a layout is
// the library's choice (stride_invariance and test_faketensor look at strides).
class ReferenceAgreement final : public Check {
 public:
  std::string_view name() const override { return "reference_agreement"; }
  CheckResult run(const CheckContext& ctx) const override {
    if (ctx.reference == nullptr) return make_result(name(), Outcome::skipped, "no reference to compare with");
    auto expected_op = ctx.reference->find(ctx.op.name());
    if (!expected_op || !expected_op->has_schema()) {
      return make_result(name(), Outcome::skipped, concat("the reference has no operator '", ctx.op.name(), "'"));
    }
    const auto& args = ctx.sample.args;
    const SampleText sample(args, ctx.op);
    // The reference runs on the CPU: a library's CUDA (or vendor device) results are compared
    // with the reference's on CPU copies of the same inputs, following the sample device's
    // semantics (Note [Device-dependent semantics] in core/device_semantics.h).
    std::optional<Device> sample_device;
    for (const IValue& v : args) {
      map_tensors(v, [&](const Tensor& t) {
        if (t.defined() && !sample_device && !t.device().is_cpu()) sample_device = t.device();
        return t;
      });
    }
    auto seen_with_arguments = [&](const OperatorHandle& op, bool on_cpu) {
      Run r;
      // Note [A copy on another device keeps the layout] (sample.h)
      Stack inputs = on_cpu ? clone_args(args, Device::cpu()) : clone_args(args);
      std::optional<SemanticDeviceGuard> semantics;
      if (on_cpu && sample_device) semantics.emplace(*sample_device);
      try {
        Stack returns = call(op, inputs);
        r.seen = observables(op, inputs, returns);
        for (size_t i = 0; i < inputs.size(); ++i) {
          if (inputs[i].is_tensor() && inputs[i].to_tensor().defined() && !is_written(op, i))
            r.seen.emplace_back("argument '" + arg_name(op, i) + "' after the call (not written by the schema)", inputs[i]);
        }
      } catch (const Error& e) {
        r.error = e;
      }
      return r;
    };
    Run expected = seen_with_arguments(*expected_op, true);
    Run actual = seen_with_arguments(ctx.op, false);
    if (actual.error && actual.error->code() == ErrorCode::kNotImplemented && !expected.error) {
      return make_result(name(), Outcome::unsupported,
                         concat("'", ctx.op.name(), "' is not implemented for this sample: ", actual.error->what()));
    }
    if (expected.error && actual.error) return make_result(name(), Outcome::passed, "");  // both reject it
    if (expected.error || actual.error) {
      return make_result(
          name(), Outcome::failed,
          concat("reference_agreement of '", ctx.op.name(), "': ",
                 actual.error ? concat("the library threw where the reference returned: ", actual.error->what())
                              : concat("the library returned where the reference threw: ", expected.error->what()),
                 " Sample: ", sample, "."),
          ctx.op.name(), sample);
    }
    Verdict v = compare_observables(ctx.op, actual.seen, expected.seen, ctx.tolerance, Exactness::tolerance);
    if (!v.equal) {
      return make_result(name(), Outcome::failed,
                         concat("reference_agreement of '", ctx.op.name(), "': the library and the reference differ: ",
                                v.what, ". Sample: ", sample, "."),
                         ctx.op.name(), sample);
    }
    if (v.mistrusted) {
      return make_result(name(), Outcome::mistrusted,
                         concat("every compared value is zero or NaN on this sample, so agreement proves nothing. Sample: ",
                                sample, "."));
    }
    return make_result(name(), Outcome::passed, "");
  }
};

}  // namespace

std::unique_ptr<Check> make_stride_invariance() { return std::make_unique<StrideInvariance>(); }
std::unique_ptr<Check> make_determinism() { return std::make_unique<Determinism>(); }
std::unique_ptr<Check> make_dtype_consistency() { return std::make_unique<DtypeConsistency>(); }
std::unique_ptr<Check> make_edge_shapes() { return std::make_unique<EdgeShapes>(); }
std::unique_ptr<Check> make_vmap_consistency() { return std::make_unique<VmapConsistency>(); }
std::unique_ptr<Check> make_autocast_consistency() { return std::make_unique<AutocastConsistency>(); }
std::unique_ptr<Check> make_error_inputs() { return std::make_unique<ErrorInputs>(); }
std::unique_ptr<Check> make_reference_agreement() { return std::make_unique<ReferenceAgreement>(); }

}  // namespace opconform::conformance::detail
