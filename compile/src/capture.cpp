#include "opconform/compile/capture.h"

#include <map>
#include <memory>

#include "opconform/compile/detail/tracing.h"
#include "opconform/core/autograd.h"
#include "opconform/core/dispatch_mode.h"
#include "opconform/core/fake_tensor.h"
#include "opconform/core/shape_env.h"

namespace opconform::compile {
namespace detail {

TensorMeta meta_of(const Tensor& t) {
  TensorMeta m;
  m.sizes = t.sym_sizes();
  m.strides = t.sym_strides();
  m.storage_offset = t.storage_offset();
  m.dtype = t.dtype();
  m.device = t.device();
  m.requires_grad = t.requires_grad();
  return m;
}

ValueId Tracer::value_for(const Tensor& t, const std::string& op, size_t arg) {
  auto it = values_.find(t.unsafe_impl());
  if (it != values_.end()) return it->second;
  // Another Tensor object for the same memory and layout as a value (a saved output the autograd
  // engine restores, a detached alias) stands for that value.
  if (auto same = by_layout_.find(layout_key(t)); same != by_layout_.end()) return same->second;
  throw Error(ErrorCode::kInvalidArgument,
              "capture: argument " + std::to_string(arg) + " of '" + op +
                  "' is a tensor the captured program did not receive or make through an operator call "
                  "(a tensor created outside the graph would be baked into it as a constant)");
}

std::string Tracer::layout_key(const Tensor& t) {
  std::string key = std::to_string(reinterpret_cast<uintptr_t>(t.storage().get())) + "/" +
                    std::to_string(t.storage_offset()) + "/" + std::string(name(t.dtype()));
  for (const auto& s : t.sym_sizes()) key += "," + s.to_string();
  key += "/";
  for (const auto& s : t.sym_strides()) key += "," + s.to_string();
  return key;
}

void Tracer::bind(const Tensor& t, ValueId id) {
  keep_alive_.push_back(t);  // addresses stay unique while the graph is built
  values_[t.unsafe_impl()] = id;
  by_layout_[layout_key(t)] = id;  // the newest value for that memory and layout
}

Arg Tracer::arg_of(const IValue& v, const std::string& op, size_t index) {
  if (const Tensor* t = v.get_if<Tensor>()) {
    if (!t->defined()) return IValue();
    return Ref{value_for(*t, op, index)};
  }
  if (const auto* list = v.get_if<std::vector<Tensor>>()) {
    RefList refs;
    for (const Tensor& t : *list) refs.items.push_back(Ref{value_for(t, op, index)});
    return refs;
  }
  if (const auto* list = v.get_if<std::vector<std::optional<Tensor>>>()) {
    RefList refs;
    refs.optional_items = true;
    for (const auto& t : *list) {
      if (t && t->defined()) refs.items.push_back(Ref{value_for(*t, op, index)});
      else refs.items.push_back(std::nullopt);
    }
    return refs;
  }
  return v;
}

void Tracer::record(const OperatorHandle& op, const Stack& args, const Stack& returns) {
  Node node;
  node.op = op.name();
  for (size_t i = 0; i < args.size(); ++i) node.args.push_back(arg_of(args[i], node.op, i));
  for (const IValue& r : returns) {
    if (const Tensor* t = r.get_if<Tensor>()) {
      if (!t->defined()) {
        node.return_sizes.push_back(0);
        continue;
      }
      const ValueId id = graph_.add_value(meta_of(*t));
      node.outputs.push_back(id);
      node.return_sizes.push_back(1);
      bind(*t, id);
    } else if (const auto* list = r.get_if<std::vector<Tensor>>()) {
      for (const Tensor& t : *list) {
        const ValueId id = graph_.add_value(meta_of(t));
        node.outputs.push_back(id);
        bind(t, id);
      }
      node.return_sizes.push_back(list->size());
    } else {
      node.outputs.push_back(graph_.add_value(std::nullopt));
      node.return_sizes.push_back(1);
    }
  }
  graph_.nodes.push_back(std::move(node));
}

// The mode that records: it sees each call the program makes (and, while capturing a backward,
// each call an autograd formula makes), runs it below itself on the fake tensors, and records it.
class TracingMode final : public DispatchMode, public std::enable_shared_from_this<TracingMode> {
 public:
  explicit TracingMode(Tracer& tracer) : tracer_(tracer) {}
  void dispatch(const OperatorHandle& op, Stack& stack) override {
    const size_t n = op.has_schema() ? op.schema().arguments.size() : stack.size();
    const size_t base = stack.size() - n;
    Stack args(stack.begin() + static_cast<std::ptrdiff_t>(base), stack.end());
    if (const auto* body = kernel_op_body(op.name())) {
      // A kernel_op: its body runs here with this mode pushed again (the fallback takes a mode
      // off the stack while it handles a call: Note [What a mode sees] in dispatch_mode.h), so
      // the body's calls come back here and capture sees inside the op.
      stack.resize(base);
      Stack returns;
      {
        DispatchModeGuard again(shared_from_this());
        returns = (*body)(args);
      }
      for (auto& r : returns) stack.push_back(std::move(r));
      return;
    }
    redispatch(op, stack);
    tracer_.record(op, args, Stack(stack.begin() + static_cast<std::ptrdiff_t>(base), stack.end()));
  }

 private:
  Tracer& tracer_;
};

std::shared_ptr<DispatchMode> make_tracing_mode(Tracer& tracer) { return std::make_shared<TracingMode>(tracer); }

namespace {
std::map<std::string, KernelOpBody, std::less<>>& kernel_op_bodies() {
  static std::map<std::string, KernelOpBody, std::less<>> table;
  return table;
}
}  // namespace

const KernelOpBody* kernel_op_body(std::string_view op) {
  auto& t = kernel_op_bodies();
  auto it = t.find(op);
  return it == t.end() ? nullptr : &it->second;
}

RegistrationHandle register_kernel_op_body(std::string op, KernelOpBody body) {
  kernel_op_bodies()[op] = std::move(body);
  return RegistrationHandle([op] { kernel_op_bodies().erase(op); });
}

// Guards recorded by the ShapeEnv since `first` (in order), as Graph guards.
void copy_guards(const ShapeEnv& env, Graph& g) {
  for (const auto& guard : env.guard_records()) g.guards.push_back({guard.lhs, guard.rhs, guard.op, guard.text});
}

}  // namespace detail

namespace detail {

CaptureResult capture_graph(const Program& program, const Stack& example_inputs, const CaptureOptions& options,
                            bool with_backward) {
  Registry& registry = options.registry ? *options.registry : Registry::global();
  auto shape_env = std::make_shared<ShapeEnv>();
  CaptureResult result;
  Graph& graph = result.graph;
  Tracer tracer(graph);
  {
    FakeTensorMode mode(shape_env);
    FakeTensorModeGuard fake_guard(mode);
    Stack fake_inputs;
    std::vector<Tensor> differentiable_inputs;
    size_t tensor_index = 0;
    for (size_t i = 0; i < example_inputs.size(); ++i) {
      const Tensor* real = example_inputs[i].get_if<Tensor>();
      if (real == nullptr || !real->defined()) {
        fake_inputs.push_back(example_inputs[i]);
        continue;
      }
      const std::string name = tensor_index < options.input_names.size() ? options.input_names[tensor_index]
                                                                         : "x" + std::to_string(tensor_index);
      Tensor fake = mode.from_tensor(real->detach(), options.dynamic, name);
      if (real->requires_grad()) {
        fake.set_requires_grad(true);
        differentiable_inputs.push_back(fake);
        result.grad_inputs.push_back(tensor_index);
      }
      const ValueId id = graph.add_value(meta_of(fake), name);
      graph.inputs.push_back(id);
      tracer.bind(fake, id);
      const auto sizes = fake.sym_sizes();
      for (size_t d = 0; d < sizes.size(); ++d) {
        if (sizes[d].is_symbolic() && sizes[d].node()->is_symbol()) {
          const std::string symbol = sizes[d].node()->symbol().name;
          bool known = false;
          for (const auto& s : graph.symbol_sources) known |= s.symbol == symbol;
          if (!known) graph.symbol_sources.push_back({symbol, graph.inputs.size() - 1, d});
        }
      }
      fake_inputs.push_back(IValue(fake));
      ++tensor_index;
    }
    ensure_dispatch_mode_fallback(registry);
    DispatchModeGuard trace(make_tracing_mode(tracer));
    Stack outputs = program(fake_inputs);
    for (size_t i = 0; i < outputs.size(); ++i) graph.outputs.push_back(tracer.arg_of(outputs[i], "the program's return", i));
    result.num_outputs = graph.outputs.size();
    result.forward_nodes = graph.nodes.size();
    if (with_backward && !differentiable_inputs.empty()) {
      std::vector<Tensor> differentiable_outputs, grad_outputs;
      for (const IValue& o : outputs) {
        const Tensor* t = o.get_if<Tensor>();
        if (t == nullptr || !t->defined() || !t->requires_grad()) continue;
        differentiable_outputs.push_back(*t);
        Tensor g = make_fake_tensor(t->sym_sizes(), t->dtype(), t->device());
        const ValueId id = graph.add_value(meta_of(g), "grad" + std::to_string(grad_outputs.size()));
        graph.inputs.push_back(id);
        tracer.bind(g, id);
        grad_outputs.push_back(g);
      }
      if (!differentiable_outputs.empty()) {
        auto grads = autograd::grad(differentiable_outputs, differentiable_inputs, grad_outputs, false, false, true);
        for (size_t i = 0; i < grads.size(); ++i)
          graph.outputs.push_back(grads[i].defined() ? tracer.arg_of(IValue(grads[i]), "a gradient", i) : Arg(IValue()));
      }
    }
  }
  copy_guards(*shape_env, graph);
  return result;
}

}  // namespace detail

Graph capture(const Program& program, const Stack& example_inputs, const CaptureOptions& options) {
  return detail::capture_graph(program, example_inputs, options, false).graph;
}

}  // namespace opconform::compile
