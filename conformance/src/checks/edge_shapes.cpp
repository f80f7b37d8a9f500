// edge_shapes (docs/checks.md): zero-size, 0-d and size-1 inputs give a result or a clear error.
// Every tensor argument is reshaped the same way: zero-size (first dim 0), 0-d (the first
// element), size-1 (the first element in every dim, same rank). The 0-d and size-1 ones hold the
// sample's values, so a pointwise op's result is known: a slice of the full one.
#include <optional>

#include "opconform/conformance/detail/builtin_checks.h"
#include "opconform/conformance/detail/check_kit.h"

namespace opconform::conformance::detail {
namespace {

using opconform::detail::concat;

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

// The sample with every tensor argument made an edge case, and what a pointwise op must return.
struct EdgeSample {
  Stack args;
  bool changed = false;
  // The shape a pointwise op must return; none when the edge shapes do not broadcast (then the op
  // must reject them, which any clear error does).
  std::optional<std::vector<int64_t>> broadcast = std::vector<int64_t>{};
  bool same_shapes = true;  // every tensor argument of the sample had one shape
};

EdgeSample edge_sample(const CheckRun& k, Edge e) {
  EdgeSample s{k.clone()};
  std::optional<std::vector<int64_t>> first_shape;
  for (auto& v : s.args) {
    if (!v.is_tensor() || !v.to_tensor().defined() || v.to_tensor().is_meta_data()) continue;
    const Tensor t = v.to_tensor().detach();
    std::vector<int64_t> original(t.sizes().begin(), t.sizes().end());
    if (first_shape && *first_shape != original) s.same_shapes = false;
    if (!first_shape) first_shape = original;
    Tensor et = edge_of(t, e);
    s.changed = s.changed || !std::equal(et.sizes().begin(), et.sizes().end(), t.sizes().begin(), t.sizes().end());
    if (s.broadcast) {
      try {
        s.broadcast = broadcast_shapes(*s.broadcast, et.sizes());
      } catch (const Error&) {
        s.broadcast.reset();
      }
    }
    v = IValue(et);
  }
  return s;
}

class EdgeShapes final : public Check {
 public:
  std::string_view name() const override { return "edge_shapes"; }
  CheckResult run(const CheckContext& ctx) const override {
    const CheckRun k(name(), ctx);
    // The full result, for pointwise ops' slices (only when every tensor input has its shape).
    std::optional<Run> full;
    if (ctx.op.has_tag(Tag::pointwise)) full = k.run();
    size_t tried = 0;
    for (Edge e : {Edge::zero_size, Edge::zero_dim, Edge::size_one}) {
      EdgeSample edge = edge_sample(k, e);
      if (!edge.changed) continue;
      ++tried;
      if (auto failure = check_edge(k, e, edge, full)) return *failure;
    }
    if (tried == 0) {
      return k.skipped("no tensor argument whose shape can be made an edge case", "no_tensor_argument",
                       "no tensor argument whose shape can be made an edge case");
    }
    return k.passed();
  }

 private:
  static std::optional<CheckResult> check_edge(const CheckRun& k, Edge e, const EdgeSample& edge,
                                               const std::optional<Run>& full) {
    const CheckContext& ctx = k.ctx();
    const bool pointwise = ctx.op.has_tag(Tag::pointwise);
    const std::string what = concat("with ", edge_name(e), " tensors (", describe(edge.args, arg_names(ctx.op)), ")");
    Run got;
    try {
      got = run_op(ctx.op, edge.args);
    } catch (const std::exception& ex) {
      return k.failed(Cause{FindingKind::other, "", "edge-shape inputs make the op throw an exception that is not an opconform::Error"},
                      concat("edge_shapes of '", ctx.op.name(), "': ", what, " the op threw an exception that is ",
                             "not an opconform::Error: ", ex.what(), ". Reject unsupported shapes with a clear ",
                             "opconform::Error (OPCONFORM_CHECK) naming the argument. Sample: ", k.sample(), "."));
    }
    if (got.error) return std::nullopt;  // a clear error is an acceptable answer
    for (const auto& [label, value] : got.seen) {
      if (!value.is_tensor() || !value.to_tensor().defined()) continue;
      const Tensor& out = value.to_tensor();
      const std::string subject = observable_subject(label);
      for (int64_t s : out.sizes()) {
        if (s < 0) {
          return k.failed(Cause{FindingKind::shape_mismatch, subject, concat("edge-shape inputs give ", subject, " a negative size")},
                          concat("edge_shapes of '", ctx.op.name(), "': ", what, " ", label, " has a negative size ",
                                 shape_string(out.sizes()), "."));
        }
      }
      if (pointwise && label.rfind("output", 0) == 0 &&
          (!edge.broadcast || !std::equal(out.sizes().begin(), out.sizes().end(), edge.broadcast->begin(), edge.broadcast->end()))) {
        return k.failed(Cause{FindingKind::shape_mismatch, subject,
                              concat("on edge-shape inputs ", subject, " of a pointwise op is not the broadcast shape")},
                        concat("edge_shapes of '", ctx.op.name(), "': ", what, " ", label, " has shape ",
                               shape_string(out.sizes()), " but a pointwise op must return the inputs' broadcast shape ",
                               edge.broadcast ? shape_string(*edge.broadcast) : std::string("(they do not broadcast: an error)"),
                               ". Sample: ", k.sample(), "."));
      }
    }
    // A pointwise op on the first element(s) must give the first element(s) of the full result.
    if (!pointwise || !edge.same_shapes || e == Edge::zero_size || !full || full->error ||
        full->seen.size() != got.seen.size())
      return std::nullopt;
    for (size_t i = 0; i < got.seen.size(); ++i) {
      const IValue& g = got.seen[i].second;
      const IValue& f = full->seen[i].second;
      if (!g.is_tensor() || !f.is_tensor() || !f.to_tensor().defined() || f.to_tensor().numel() == 0) continue;
      const Tensor want = edge_slice(f.to_tensor(), e);
      Verdict c = compare_tensors(g.to_tensor(), want, ctx.tolerance.for_dtype(want.dtype(), ctx.op.data().get()));
      if (!c.equal) {
        c.subject = observable_subject(got.seen[i].first);
        return k.failed(mismatch_cause(c, "on edge-shape inputs the result differs from the full result's elements"),
                        concat("edge_shapes of '", ctx.op.name(), "': ", what, " ", got.seen[i].first,
                               " differs from the matching elements of the full result: ", c.what, ". Sample: ",
                               k.sample(), "."));
      }
    }
    return std::nullopt;
  }
};

}  // namespace

std::unique_ptr<Check> make_edge_shapes() { return std::make_unique<EdgeShapes>(); }

}  // namespace opconform::conformance::detail
