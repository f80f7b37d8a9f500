// test_aot_dispatch_dynamic (CHECKS.md): the op survives capture into a graph. The call is captured
// with fake tensors and symbolic sizes (compile/capture.h), functionalized, replayed on real
// tensors and compared with eager: outputs, the arguments it writes, and — when inputs require
// grad — the gradients through the captured backward (compile/joint.h). The graph is then replayed
// at other sizes (every symbolic size one larger, where the guards allow it) and on other data: a
// size or a value baked into the graph shows there.
#include <cmath>
#include <optional>

#include "opconform/compile/capture.h"
#include "opconform/compile/functionalize.h"
#include "opconform/compile/interpreter.h"
#include "opconform/compile/joint.h"
#include "opconform/conformance/check.h"
#include "opconform/conformance/detail/builtin_checks.h"
#include "opconform/conformance/detail/observables.h"
#include "opconform/core/autograd.h"
#include "opconform/core/error.h"
#include "opconform/core/generator.h"

namespace opconform::conformance {
namespace {

using ::opconform::detail::concat;

// The op's tensors (top-level and inside lists) become the program's inputs; the program puts
// them back into the argument list and calls the op.
struct Flattened {
  Stack tensors;                      // the program's inputs
  std::function<Stack(const Stack&)> rebuild;  // inputs -> the op's arguments
};

Flattened flatten(const Stack& args) {
  Flattened f;
  struct Slot {
    size_t arg;
    int kind;  // 0 tensor, 1 Tensor[] element, 2 Tensor?[] element
    size_t element;
  };
  auto slots = std::make_shared<std::vector<Slot>>();
  for (size_t i = 0; i < args.size(); ++i) {
    if (const Tensor* t = args[i].get_if<Tensor>(); t && t->defined()) {
      slots->push_back({i, 0, 0});
      f.tensors.push_back(args[i]);
    } else if (const auto* list = args[i].get_if<std::vector<Tensor>>()) {
      for (size_t e = 0; e < list->size(); ++e) slots->push_back({i, 1, e}), f.tensors.push_back(IValue((*list)[e]));
    } else if (const auto* list = args[i].get_if<std::vector<std::optional<Tensor>>>()) {
      for (size_t e = 0; e < list->size(); ++e)
        if ((*list)[e]) slots->push_back({i, 2, e}), f.tensors.push_back(IValue(*(*list)[e]));
    }
  }
  f.rebuild = [args, slots](const Stack& in) {
    Stack out = args;
    for (size_t s = 0; s < slots->size(); ++s) {
      const Slot& slot = (*slots)[s];
      const Tensor& t = in.at(s).to_tensor();
      if (slot.kind == 0) {
        out[slot.arg] = IValue(t);
      } else if (slot.kind == 1) {
        auto list = out[slot.arg].to_tensor_list();
        list[slot.element] = t;
        out[slot.arg] = IValue(std::move(list));
      } else {
        auto list = *out[slot.arg].get_if<std::vector<std::optional<Tensor>>>();
        list[slot.element] = t;
        out[slot.arg] = IValue(std::move(list));
      }
    }
    return out;
  };
  return f;
}

// "" when equal within tolerance, else what differs.
std::string difference(const OperatorHandle& op, const detail::Observables& actual, const detail::Observables& expected,
                       const ToleranceSpec& tolerance) {
  return detail::compare_observables(op, actual, expected, tolerance, detail::Exactness::tolerance).what;
}

// Eager: the op on clones of `args` (seeded ops from the fixed generator state).
Stack eager(const OperatorHandle& op, Stack& args) {
  Stack stack = args;
  detail::run_boxed(op, stack);
  return stack;
}

// New values of the same sizes and layout (floating tensors only: integer tensors are often
// indices). The layout — strides and storage offset — stays the example's: a graph may rightly
// depend on it (Note [Layout queries] in core/op_data.h), and only values baked into the graph
// are this step's concern. The new values are made per storage element, so an expanded (stride 0)
// tensor stays one.
Stack other_data(const Stack& tensors, int salt) {
  Stack out;
  for (const IValue& v : tensors) {
    const Tensor example = v.to_tensor().detach();
    int64_t span = example.numel() > 0 ? 1 : 0;
    for (int64_t d = 0; d < example.dim() && span > 0; ++d) span += (example.size(d) - 1) * example.stride(d);
    const int64_t offset = example.storage_offset();
    const std::vector<int64_t> span_size{span}, unit{1}, storage_size{offset + span};
    Tensor storage = zeros(storage_size, TensorOptions(example.dtype()));  // memory before the offset is read as values too
    if (span > 0) {
      Tensor region = example.as_strided(span_size, unit, offset).clone();
      if (is_floating(example.dtype())) {
        auto values = region.to(DType::Float64).to_vector<double>();
        for (size_t i = 0; i < values.size(); ++i)
          values[i] = std::isfinite(values[i]) ? values[i] * 0.75 + 0.125 * static_cast<double>((i * 7 + salt) % 5) : values[i];
        region = from_vector<double>(values, span_size).to(example.dtype());
      }
      storage.as_strided(span_size, unit, offset).copy_(region);
    }
    Tensor t = storage.as_strided(example.sizes(), example.strides(), offset);
    t.set_requires_grad(v.to_tensor().requires_grad());
    out.push_back(IValue(t));
  }
  return out;
}

class TestAotDispatchDynamic final : public Check {
 public:
  std::string_view name() const override { return "test_aot_dispatch_dynamic"; }

  CheckResult run(const CheckContext& ctx) const override {
    const OperatorHandle& op = ctx.op;
    const detail::SampleText sample(ctx.sample.args, op);
    auto result = [&](Outcome o, std::string message) {
      CheckResult r{std::string(name()), o, std::move(message), "", {}};
      return r;
    };
    auto failed = [&](std::string what) {
      return result(Outcome::failed, concat("test_aot_dispatch_dynamic of '", op.name(), "': ", what, " Sample: ", sample, "."));
    };
    Flattened flat = flatten(clone_args(ctx.sample.args));
    compile::Program program = [&](const Stack& inputs) {
      Stack stack = flat.rebuild(inputs);
      op.call_boxed(stack);  // seeded ops: capture records the call, replay draws from run_boxed's state
      return stack;
    };

    // Eager first: a sample the op rejects tells nothing here (error_inputs covers errors).
    Stack eager_args = flat.rebuild(clone_args(flat.tensors));
    Stack eager_out;
    try {
      autograd::NoGradGuard no_grad;
      eager_out = eager(op, eager_args);
    } catch (const Error& e) {
      return result(Outcome::skipped, concat("the op rejects the sample in eager mode: ", e.what()));
    }
    compile::Graph graph;
    try {
      autograd::NoGradGuard no_grad;
      graph = compile::capture(program, clone_args(flat.tensors), {.registry = &ctx.registry});
      graph = compile::functionalize(graph, ctx.registry);
    } catch (const Error& e) {
      if (e.code() == ErrorCode::kDataDependentOutput && op.has_tag(Tag::data_dependent_output)) {
        return result(Outcome::skipped, concat("'", op.name(), "' returns a value of its input's data (tagged "
                                               "data_dependent_output): a capture breaks at it, as torch.compile's "
                                               "graph does at .item(), so there is no graph to replay (", e.what(), ")"));
      }
      if (e.code() == ErrorCode::kNotImplemented && std::string(e.what()).find("functionalize:") == 0) {
        return result(Outcome::skipped, e.what());
      }
      return failed(concat("capturing the call into a graph failed: ", e.what(),
                           " (a fake kernel that reads data, or a tensor made outside the operator model?)"));
    }

    // Which program inputs the op may write (the functionalized graph writes back exactly these).
    std::vector<bool> written_input(flat.tensors.size(), false);
    for (const auto& wb : graph.write_backs) written_input.at(wb.input) = true;

    // Replay at the sample's sizes and data. `invisible` reports an input the graph changed
    // although nothing in it writes that input: a mutation the schema does not declare, which a
    // compiler would reorder or drop.
    std::string invisible;
    bool guard_failed = false;  // the last replay failed on a guard (compile::GuardError), not on an error
    auto replay = [&](const Stack& tensors, std::string& error) -> std::optional<detail::Observables> {
      Stack args = clone_args(tensors);
      const Stack before = clone_args(tensors);
      auto check_inputs = [&] {
        for (size_t i = 0; i < args.size(); ++i) {
          if (written_input[i] || !args[i].is_tensor()) continue;
          if (!bitwise_equal(args[i].to_tensor(), before[i].to_tensor()) && invisible.empty())
            invisible = concat("program input ", i, " (", before[i].to_tensor().to_string(), " before)");
        }
      };
      try {
        autograd::NoGradGuard no_grad;
        // A random op's replay draws what its eager call (run_boxed) drew.
        Stack returns = op.has_tag(Tag::nondeterministic_seeded)
                            ? detail::from_fixed_generator_state([&] { return compile::run_graph(graph, args, ctx.registry); })
                            : compile::run_graph(graph, args, ctx.registry);
        check_inputs();
        return detail::observables(op, flat.rebuild(args), returns);
      } catch (const compile::GuardError& e) {
        error = e.what(), guard_failed = true;
        return std::nullopt;
      } catch (const Error& e) {
        error = e.what(), guard_failed = false;
        return std::nullopt;
      }
    };
    auto eager_on = [&](const Stack& tensors) -> std::optional<detail::Observables> {
      Stack args = flat.rebuild(clone_args(tensors));
      try {
        autograd::NoGradGuard no_grad;
        Stack out = eager(op, args);
        return detail::observables(op, args, out);
      } catch (const Error&) {
        return std::nullopt;
      }
    };

    std::string error;
    auto expected = detail::observables(op, eager_args, eager_out);
    auto got = replay(flat.tensors, error);
    if (!got) return failed(concat("the captured graph does not replay on the sample itself: ", error));
    if (auto d = difference(op, *got, expected, ctx.tolerance); !d.empty())
      return failed(concat("the captured, functionalized graph differs from eager mode: ", d, "."));
    if (!invisible.empty()) {
      return failed(concat("replaying the functionalized graph changed ", invisible,
                           ", which nothing in the graph writes: the op mutates an argument its schema does not mark "
                           "written (Tensor(a!)), so a compiler would reorder or drop that write."));
    }

    // Other data, same sizes: a value baked into the graph shows here.
    const Stack other = other_data(flat.tensors, 3);
    if (auto e = eager_on(other)) {
      got = replay(other, error);
      if (!got) return failed(concat("the graph does not replay on other data of the same sizes: ", error));
      if (auto d = difference(op, *got, *e, ctx.tolerance); !d.empty())
        return failed(concat("on other data of the same sizes the graph differs from eager mode (a value of the example "
                             "input baked into the graph?): ", d, "."));
    }

    // Other sizes: every symbolic input size one larger, where the guards allow it. A graph whose
    // guards pin the sizes (a kernel specialized on them, as a plugin's fake kernel does) is
    // still a correct graph; the passing result says that other sizes were not tried.
    std::string resized_note;
    if (op.data()->layout_query) {
      resized_note = "Not replayed at other sizes: the op returns its input's layout, which resized inputs do not keep "
                     "(Note [Layout queries]).";
    } else if (auto bigger = resized(graph, flat.tensors)) {
      if (auto e = eager_on(*bigger)) {
        got = replay(*bigger, error);
        if (!got) {
          if (!guard_failed)
            return failed(concat("replayed at other sizes the graph fails: ", error));
          resized_note = concat("Not replayed at other sizes: the graph's guards pin them (", error, ").");
        } else if (auto d = difference(op, *got, *e, ctx.tolerance); !d.empty()) {
          return failed(concat("replayed at other sizes the graph differs from eager mode (a size baked into the graph, or "
                               "a fake kernel whose size formula is wrong there): ",
                               d, "."));
        }
      }
    }

    // Gradients through the captured backward.
    std::string gradient_note;
    if (auto r = check_gradients(ctx, op, flat, program, sample, gradient_note)) return *r;
    return result(Outcome::passed, resized_note.empty() || gradient_note.empty() ? resized_note + gradient_note
                                                                                 : resized_note + " " + gradient_note);
  }

 private:
  static std::vector<std::string> arg_names(const OperatorHandle& op) {
    std::vector<std::string> names;
    for (const auto& a : op.schema().arguments) names.push_back(a.name);
    return names;
  }

  // The inputs with every symbol one larger (new data), or nullopt when there is no symbol or the
  // graph's guards reject those sizes.
  static std::optional<Stack> resized(const compile::Graph& g, const Stack& tensors) {
    if (g.symbol_sources.empty()) return std::nullopt;
    std::map<std::string, int64_t> b;
    for (const auto& s : g.symbol_sources) b[s.symbol] = tensors.at(s.input).to_tensor().sizes()[s.dim] + 1;
    auto eval = [&](const SymInt& s) {
      if (auto v = s.maybe_as_int()) return *v;
      return s.node()->evaluate([&](const SymNode& sym) {
        auto it = b.find(sym.symbol().name);
        if (it == b.end()) throw Error(ErrorCode::kInvalidArgument, "unbound");
        return it->second;
      });
    };
    Stack out;
    try {
      for (size_t i = 0; i < tensors.size(); ++i) {
        const Tensor& t = tensors[i].to_tensor();
        const auto& meta = *g.value(g.inputs[i]).tensor;
        std::vector<int64_t> sizes;
        for (const auto& s : meta.sizes) sizes.push_back(eval(s));
        int64_t n = 1;
        for (auto s : sizes) n *= s;
        Tensor f = t.detach().to(DType::Float64).contiguous().reshape({-1});
        auto old = f.numel() > 0 ? f.to_vector<double>() : std::vector<double>{1.0};
        std::vector<double> values(static_cast<size_t>(n));
        for (int64_t k = 0; k < n; ++k) values[static_cast<size_t>(k)] = old[static_cast<size_t>(k) % old.size()];
        Tensor r = from_vector<double>(values, sizes).to(t.dtype());
        r.set_requires_grad(t.requires_grad());
        out.push_back(IValue(r));
      }
    } catch (const Error&) {
      return std::nullopt;
    }
    return out;
  }

  // Compares gradients through the captured backward with eager ones. When the backward cannot be
  // captured for a reason that is no finding of this check (no formula at all: that is
  // test_autograd_registration's; a formula in compiled plugin code), `note` says so.
  static std::optional<CheckResult> check_gradients(const CheckContext& ctx, const OperatorHandle& op, const Flattened& flat,
                                                    const compile::Program& program, const std::string& sample,
                                                    std::string& note) {
    bool any = false;
    for (const auto& v : flat.tensors) any = any || v.to_tensor().requires_grad();
    if (!any || op.schema().is_mutable()) return std::nullopt;
    compile::JointGraph joint;
    try {
      joint = compile::capture_joint(program, clone_args(flat.tensors), {.registry = &ctx.registry});
    } catch (const Error& e) {
      if (e.code() == ErrorCode::kNotImplemented) {
        note = concat("Gradients not compared through a captured backward: ", e.what(), ".");
        return std::nullopt;
      }
      return CheckResult{"test_aot_dispatch_dynamic", Outcome::failed,
                         concat("test_aot_dispatch_dynamic of '", op.name(),
                                "': the backward cannot be captured into a graph: ", e.what(), " Sample: ", sample, "."),
                         "", {}};
    }
    if (joint.backward.nodes.empty() && joint.grad_inputs.empty()) return std::nullopt;
    // Eager gradients with grad outputs of ones.
    Stack inputs = clone_args(flat.tensors);
    std::vector<Tensor> leaves, outs, grads_out;
    for (const auto& v : inputs)
      if (v.to_tensor().requires_grad()) leaves.push_back(v.to_tensor());
    Stack returns;
    std::vector<Tensor> eager_grads;
    // A random op draws the same numbers in the eager forward (run_boxed) and the graph's forward.
    const bool seeded = op.has_tag(Tag::nondeterministic_seeded);
    try {
      Stack stack = flat.rebuild(inputs);
      detail::run_boxed(op, stack);
      for (const auto& r : stack)
        if (const Tensor* t = r.get_if<Tensor>(); t && t->defined() && t->requires_grad()) {
          outs.push_back(*t);
          grads_out.push_back(ones(t->sizes(), t->options()));
        }
      if (outs.empty()) return std::nullopt;
      eager_grads = autograd::grad(outs, leaves, grads_out, false, false, true);
    } catch (const Error&) {
      return std::nullopt;  // eager backward fails: gradcheck / test_autograd_registration say why
    }
    Stack graph_grads;
    try {
      autograd::NoGradGuard no_grad;
      const Stack primals = clone_args(flat.tensors);
      auto forward = [&] { return compile::run_graph(joint.forward, primals, ctx.registry); };
      Stack fwd = seeded ? detail::from_fixed_generator_state(forward) : forward();
      Stack bwd = primals;
      bwd.insert(bwd.end(), fwd.begin() + static_cast<std::ptrdiff_t>(joint.num_outputs), fwd.end());
      for (const Tensor& g : grads_out) bwd.push_back(IValue(g));
      graph_grads = compile::run_graph(joint.backward, bwd, ctx.registry);
    } catch (const Error& e) {
      return CheckResult{"test_aot_dispatch_dynamic", Outcome::failed,
                         concat("test_aot_dispatch_dynamic of '", op.name(), "': the captured backward does not replay: ",
                                e.what(), " Sample: ", sample, "."),
                         "", {}};
    }
    for (size_t i = 0; i < eager_grads.size() && i < graph_grads.size(); ++i) {
      const Tensor* g = graph_grads[i].get_if<Tensor>();
      if (!eager_grads[i].defined() || g == nullptr || !g->defined()) continue;
      Comparison c = compare(*g, eager_grads[i], ctx.tolerance.for_dtype(eager_grads[i].dtype(), op.data().get()));
      if (!c.equal) {
        return CheckResult{"test_aot_dispatch_dynamic", Outcome::failed,
                           concat("test_aot_dispatch_dynamic of '", op.name(), "': the gradient of differentiable input ", i,
                                  " through the captured backward differs from eager: ", c.mismatch, " Sample: ", sample, "."),
                           "", {}};
      }
    }
    return std::nullopt;
  }
};

}  // namespace

namespace detail {
std::unique_ptr<Check> make_test_aot_dispatch_dynamic() { return std::make_unique<TestAotDispatchDynamic>(); }
}  // namespace detail

}  // namespace opconform::conformance
