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
#include "opconform/conformance/detail/builtin_checks.h"
#include "opconform/conformance/detail/check_kit.h"
#include "opconform/core/autograd.h"
#include "opconform/core/error.h"
#include "opconform/core/generator.h"

namespace opconform::conformance::detail {
namespace {

using ::opconform::detail::concat;

// The op's tensors (top-level and inside lists) become the program's inputs; the program puts
// them back into the argument list and calls the op.
struct Flattened {
  Stack tensors;                      // the program's inputs
  std::vector<size_t> arg_of;         // the argument each input comes from
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
  for (const Slot& slot : *slots) f.arg_of.push_back(slot.arg);
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

// Eager: the op on clones of `args` (seeded ops from the fixed generator state).
Stack eager(const OperatorHandle& op, Stack& args) {
  Stack stack = args;
  run_boxed(op, stack);
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

// Replays of the captured graph, and eager runs to compare them with.
class Replayer {
 public:
  Replayer(const CheckRun& k, const compile::Graph& graph, const Flattened& flat) : k_(k), graph_(graph), flat_(flat) {
    // Which program inputs the op may write (the functionalized graph writes back exactly these).
    written_input_.assign(flat.tensors.size(), false);
    for (const auto& wb : graph.write_backs) written_input_.at(wb.input) = true;
  }

  // The graph's observables on `tensors`; nullopt with `error` (and guard_failed) when it threw.
  // An input the graph changed although nothing in it writes that input (a mutation the schema
  // does not declare, which a compiler would reorder or drop) is kept in `invisible`.
  std::optional<Observables> replay(const Stack& tensors) {
    const OperatorHandle& op = k_.op();
    Stack args = clone_args(tensors);
    const Stack before = clone_args(tensors);
    try {
      autograd::NoGradGuard no_grad;
      // A random op's replay draws what its eager call (run_boxed) drew.
      auto run = [&] { return compile::run_graph(graph_, args, k_.ctx().registry); };
      Stack returns = op.has_tag(Tag::nondeterministic_seeded) ? from_fixed_generator_state(run) : run();
      for (size_t i = 0; i < args.size(); ++i) {
        if (written_input_[i] || !args[i].is_tensor()) continue;
        if (!bitwise_equal(args[i].to_tensor(), before[i].to_tensor()) && !invisible) {
          invisible = i;
          invisible_text = concat("program input ", i, " (", before[i].to_tensor().to_string(), " before)");
        }
      }
      return observables(op, flat_.rebuild(args), returns);
    } catch (const Error& e) {
      error = e.what();
      guard_failed = e.reason() == ErrorReason::kGuardFailed;  // compile::GuardError
      metadata_differs = e.reason() == ErrorReason::kCapturedMetadata;
      return std::nullopt;
    }
  }

  // Eager mode on `tensors`; nullopt when the op rejects them.
  std::optional<Observables> eager_on(const Stack& tensors) const {
    Stack args = flat_.rebuild(clone_args(tensors));
    try {
      autograd::NoGradGuard no_grad;
      Stack out = eager(k_.op(), args);
      return observables(k_.op(), args, out);
    } catch (const Error&) {
      return std::nullopt;
    }
  }

  std::string error;
  bool guard_failed = false;  // the last replay failed on a guard (compile::GuardError), not on an error
  bool metadata_differs = false;  // the last replay failed as an output unlike its captured metadata
  std::optional<size_t> invisible;
  std::string invisible_text;

 private:
  const CheckRun& k_;
  const compile::Graph& graph_;
  const Flattened& flat_;
  std::vector<bool> written_input_;
};

class TestAotDispatchDynamic final : public Check {
 public:
  std::string_view name() const override { return "test_aot_dispatch_dynamic"; }

  CheckResult run(const CheckContext& ctx) const override {
    const CheckRun k(name(), ctx);
    const OperatorHandle& op = ctx.op;
    Flattened flat = flatten(k.clone());
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
      return k.skipped(concat("the op rejects the sample in eager mode: ", e.what()), "eager",
                       "the op rejects the sample in eager mode");
    }
    compile::Graph graph;
    if (auto not_captured = capture(k, program, flat, graph)) return *not_captured;
    Replayer replayer(k, graph, flat);
    if (auto failure = replay_on_the_sample(k, replayer, flat, observables(op, eager_args, eager_out))) return *failure;
    if (auto failure = replay_on_other_data(k, replayer, flat)) return *failure;
    std::string resized_note;
    if (auto failure = replay_at_other_sizes(k, replayer, graph, flat, resized_note)) return *failure;
    // Gradients through the captured backward.
    std::string gradient_note;
    if (auto r = check_gradients(k, flat, program, gradient_note)) return *r;
    return k.passed(resized_note.empty() || gradient_note.empty() ? resized_note + gradient_note
                                                                  : resized_note + " " + gradient_note);
  }

 private:
  // "test_aot_dispatch_dynamic of '<op>': <what> Sample: <sample>."
  static CheckResult failed(const CheckRun& k, Cause cause, std::string_view what) {
    return k.failed(std::move(cause), concat("test_aot_dispatch_dynamic of '", k.op_name(), "': ", what, " Sample: ",
                                             k.sample(), "."));
  }

  // The failure when the graph's observables differ from eager mode's (`where`: the replay's
  // inputs, for the subject, "" on the sample itself); nullopt when they agree.
  static std::optional<CheckResult> differs(const CheckRun& k, const Observables& got, const Observables& eager,
                                            std::string_view title, std::string_view where, std::string_view message) {
    const Verdict d = compare_observables(k.op(), got, eager, k.ctx().tolerance, Exactness::tolerance);
    if (d.equal) return std::nullopt;
    const std::string subject = where.empty() ? d.subject : concat(d.subject, " (", where, ")");
    return failed(k, mismatch_cause(d, title, std::nullopt, subject), concat(message, d.what, "."));
  }

  // Captures and functionalizes the call into `graph`; the result to return when that fails.
  static std::optional<CheckResult> capture(const CheckRun& k, const compile::Program& program, const Flattened& flat,
                                            compile::Graph& graph) {
    const OperatorHandle& op = k.op();
    try {
      autograd::NoGradGuard no_grad;
      graph = compile::capture(program, clone_args(flat.tensors), {.registry = &k.ctx().registry});
      graph = compile::functionalize(graph, k.ctx().registry);
    } catch (const Error& e) {
      if (e.code() == ErrorCode::kDataDependentOutput && op.has_tag(Tag::data_dependent_output)) {
        return k.skipped(concat("'", op.name(), "' returns a value of its input's data (tagged "
                                "data_dependent_output): a capture breaks at it, as torch.compile's "
                                "graph does at .item(), so there is no graph to replay (", e.what(), ")"),
                         "data_dependent_output", "the op returns a value of its input's data");
      }
      if (e.reason() == ErrorReason::kNotFunctionalizable) {
        return k.skipped(e.what(), "functionalization", "a write functionalization cannot express");
      }
      return failed(k, Cause{FindingKind::threw, "capture", "capturing the call into a graph fails"},
                    concat("capturing the call into a graph failed: ", e.what(),
                           " (a fake kernel that reads data, or a tensor made outside the operator model?)"));
    }
    return std::nullopt;
  }

  // Replay at the sample's sizes and data.
  static std::optional<CheckResult> replay_on_the_sample(const CheckRun& k, Replayer& replayer, const Flattened& flat,
                                                         const Observables& expected) {
    auto got = replayer.replay(flat.tensors);
    if (!got) {
      return failed(k, Cause{FindingKind::threw, "graph replay", "the captured graph does not replay on the sample"},
                    concat("the captured graph does not replay on the sample itself: ", replayer.error));
    }
    if (auto failure = differs(k, *got, expected, "the captured graph differs from eager mode", "",
                               "the captured, functionalized graph differs from eager mode: "))
      return failure;
    if (replayer.invisible) {
      const std::string arg = arg_name(k.op(), flat.arg_of.at(*replayer.invisible));
      return failed(k, Cause{FindingKind::undeclared_mutation, arg, concat("the op writes '", arg, "', which its schema does not mark written")},
                    concat("replaying the functionalized graph changed ", replayer.invisible_text,
                           ", which nothing in the graph writes: the op mutates an argument its schema does not mark "
                           "written (Tensor(a!)), so a compiler would reorder or drop that write."));
    }
    return std::nullopt;
  }

  // Other data, same sizes: a value baked into the graph shows here.
  static std::optional<CheckResult> replay_on_other_data(const CheckRun& k, Replayer& replayer, const Flattened& flat) {
    const Stack other = other_data(flat.tensors, 3);
    auto e = replayer.eager_on(other);
    if (!e) return std::nullopt;
    auto got = replayer.replay(other);
    if (!got) {
      return failed(k, Cause{FindingKind::threw, "graph replay (other data)", "the graph does not replay on other data"},
                    concat("the graph does not replay on other data of the same sizes: ", replayer.error));
    }
    return differs(k, *got, *e, "on other data the graph differs from eager mode", "other data",
                   "on other data of the same sizes the graph differs from eager mode (a value of the example "
                   "input baked into the graph?): ");
  }

  // Other sizes: every symbolic input size one larger, where the guards allow it. A graph whose
  // guards pin the sizes (a kernel specialized on them, as a plugin's fake kernel does) is still a
  // correct graph; the passing result says that other sizes were not tried.
  static std::optional<CheckResult> replay_at_other_sizes(const CheckRun& k, Replayer& replayer,
                                                          const compile::Graph& graph, const Flattened& flat,
                                                          std::string& note) {
    if (k.op().data()->layout_query) {
      note = "Not replayed at other sizes: the op returns its input's layout, which resized inputs do not keep "
             "(Note [Layout queries]).";
      return std::nullopt;
    }
    auto bigger = resized(graph, flat.tensors);
    if (!bigger) return std::nullopt;
    auto e = replayer.eager_on(*bigger);
    if (!e) return std::nullopt;
    auto got = replayer.replay(*bigger);
    if (!got) {
      if (replayer.metadata_differs) {  // the real output is not what the fake kernel said at capture
        return failed(k, Cause{FindingKind::shape_mismatch, "fake kernel (other sizes)",
                               "at other sizes the fake kernel's output metadata is wrong"},
                      concat("replayed at other sizes the graph fails: ", replayer.error));
      }
      if (!replayer.guard_failed) {
        return failed(k, Cause{FindingKind::threw, "graph replay (other sizes)", "the graph fails at other sizes"},
                      concat("replayed at other sizes the graph fails: ", replayer.error));
      }
      note = concat("Not replayed at other sizes: the graph's guards pin them (", replayer.error, ").");
      return std::nullopt;
    }
    return differs(k, *got, *e, "at other sizes the graph differs from eager mode", "other sizes",
                   "replayed at other sizes the graph differs from eager mode (a size baked into the graph, or "
                   "a fake kernel whose size formula is wrong there): ");
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
        for (int64_t j = 0; j < n; ++j) values[static_cast<size_t>(j)] = old[static_cast<size_t>(j) % old.size()];
        Tensor r = from_vector<double>(values, sizes).to(t.dtype());
        r.set_requires_grad(t.requires_grad());
        out.push_back(IValue(r));
      }
    } catch (const Error&) {
      return std::nullopt;
    }
    return out;
  }

  // Eager gradients with grad outputs of ones; nullopt when there is nothing to compare (no
  // output requires grad, or the eager backward fails: gradcheck / test_autograd_registration say
  // why).
  static std::optional<std::vector<Tensor>> eager_gradients(const OperatorHandle& op, const Flattened& flat,
                                                            std::vector<Tensor>& grads_out) {
    Stack inputs = clone_args(flat.tensors);
    std::vector<Tensor> leaves, outs;
    for (const auto& v : inputs)
      if (v.to_tensor().requires_grad()) leaves.push_back(v.to_tensor());
    try {
      Stack stack = flat.rebuild(inputs);
      run_boxed(op, stack);
      for (const auto& r : stack)
        if (const Tensor* t = r.get_if<Tensor>(); t && t->defined() && t->requires_grad()) {
          outs.push_back(*t);
          grads_out.push_back(ones(t->sizes(), t->options()));
        }
      if (outs.empty()) return std::nullopt;
      return autograd::grad(outs, leaves, grads_out, false, false, true);
    } catch (const Error&) {
      return std::nullopt;
    }
  }

  // Compares gradients through the captured backward with eager ones. When the backward cannot be
  // captured for a reason that is no finding of this check (no formula at all: that is
  // test_autograd_registration's; a formula in compiled plugin code), `note` says so.
  static std::optional<CheckResult> check_gradients(const CheckRun& k, const Flattened& flat,
                                                    const compile::Program& program, std::string& note) {
    const OperatorHandle& op = k.op();
    bool any = false;
    for (const auto& v : flat.tensors) any = any || v.to_tensor().requires_grad();
    if (!any || op.schema().is_mutable()) return std::nullopt;
    compile::JointGraph joint;
    try {
      joint = compile::capture_joint(program, clone_args(flat.tensors), {.registry = &k.ctx().registry});
    } catch (const Error& e) {
      if (e.code() == ErrorCode::kNotImplemented) {
        note = concat("Gradients not compared through a captured backward: ", e.what(), ".");
        return std::nullopt;
      }
      return failed(k, Cause{FindingKind::threw, "backward capture", "the backward cannot be captured into a graph"},
                    concat("the backward cannot be captured into a graph: ", e.what()));
    }
    if (joint.backward.nodes.empty() && joint.grad_inputs.empty()) return std::nullopt;
    std::vector<Tensor> grads_out;
    const auto eager_grads = eager_gradients(op, flat, grads_out);
    if (!eager_grads) return std::nullopt;
    // A random op draws the same numbers in the eager forward (run_boxed) and the graph's forward.
    const bool seeded = op.has_tag(Tag::nondeterministic_seeded);
    Stack graph_grads;
    try {
      autograd::NoGradGuard no_grad;
      const Stack primals = clone_args(flat.tensors);
      auto forward = [&] { return compile::run_graph(joint.forward, primals, k.ctx().registry); };
      Stack fwd = seeded ? from_fixed_generator_state(forward) : forward();
      Stack bwd = primals;
      bwd.insert(bwd.end(), fwd.begin() + static_cast<std::ptrdiff_t>(joint.num_outputs), fwd.end());
      for (const Tensor& g : grads_out) bwd.push_back(IValue(g));
      graph_grads = compile::run_graph(joint.backward, bwd, k.ctx().registry);
    } catch (const Error& e) {
      return failed(k, Cause{FindingKind::threw, "backward replay", "the captured backward does not replay"},
                    concat("the captured backward does not replay: ", e.what()));
    }
    for (size_t i = 0; i < eager_grads->size() && i < graph_grads.size(); ++i) {
      const Tensor& want = (*eager_grads)[i];
      const Tensor* g = graph_grads[i].get_if<Tensor>();
      if (!want.defined() || g == nullptr || !g->defined()) continue;
      Verdict c = compare_tensors(*g, want, k.ctx().tolerance.for_dtype(want.dtype(), op.data().get()));
      if (!c.equal) {
        c.subject = concat("gradient of differentiable input ", i);
        return failed(k, mismatch_cause(c, "the gradient through the captured backward differs from eager"),
                      concat("the gradient of differentiable input ", i,
                             " through the captured backward differs from eager: ", c.what));
      }
    }
    return std::nullopt;
  }
};

}  // namespace

std::unique_ptr<Check> make_test_aot_dispatch_dynamic() { return std::make_unique<TestAotDispatchDynamic>(); }

}  // namespace opconform::conformance::detail
