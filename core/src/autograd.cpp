// Autograd (see autograd.h): access to the TensorImpl, CPU helpers, per-tensor state, Tensor's
// autograd members, nodes, the engine, and the operator-facing part (ctx, make_autograd_kernel,
// the not-implemented fallback).
#include "opconform/core/autograd.h"

#include <atomic>
#include <queue>
#include <sstream>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>

namespace opconform::autograd {

namespace {

opconform::detail::TensorImpl* impl_of(const Tensor& t) { return t.unsafe_impl(); }

AutogradMeta& ensure_meta(const Tensor& t) {
  auto& slot = impl_of(t)->autograd_meta;
  if (!slot) slot = std::make_shared<AutogradMeta>();
  return *slot;
}

// ---------------------------------------------------------------- CPU helpers

// Keys beyond the device's own backend and autograd key (Fake, ...), kept by metadata results.
DispatchKeySet extra_keys_of(const Tensor& t) {
  return t.key_set() - DispatchKeySet({backend_key(t.device().type), autograd_key(t.device().type)});
}

Tensor metadata_like(IntArrayRef sizes, DType dtype, Device device, DispatchKeySet extra) {
  return make_metadata_tensor(sizes, contiguous_strides(sizes), dtype, device, extra);
}

template <typename T>
T add_values(T x, T y) {
  if constexpr (std::is_same_v<T, bool>) {
    return x || y;  // PyTorch: bool + bool is logical or
  } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return convert_scalar<T>(convert_scalar<float>(x) + convert_scalar<float>(y));
  } else {
    return static_cast<T>(x + y);
  }
}

Tensor ones_like(const Tensor& t) {
  if (t.is_meta_data()) return metadata_like(t.sizes(), t.dtype(), t.device(), extra_keys_of(t));
  return full(t.sizes(), 1, t.options());
}

Tensor zeros_for(const Node::InputMetadata& m) {
  if (!m.has_data) return metadata_like(m.sizes, m.dtype, m.device, m.extra_keys);
  return zeros(m.sizes, TensorOptions(m.dtype, m.device));
}

Tensor cpu_add(const Tensor& a, const Tensor& b) {
  OPCONFORM_CHECK(std::equal(a.sizes().begin(), a.sizes().end(), b.sizes().begin(), b.sizes().end()),
                  ErrorCode::kInvalidArgument, "autograd: cannot accumulate a gradient of shape ",
                  shape_string(b.sizes()), " into one of shape ", shape_string(a.sizes()));
  DType dtype = promote_types(a.dtype(), b.dtype());
  if (a.is_meta_data() || b.is_meta_data()) return metadata_like(a.sizes(), dtype, a.device(), extra_keys_of(a));
  // Any device: compute on host copies (gradients are small next to the kernels that made them).
  Tensor ha = a.to(dtype, Device::cpu());
  Tensor hb = b.to(dtype, Device::cpu());
  Tensor out = empty(a.sizes(), TensorOptions(dtype));
  const int64_t n = out.numel();
  const int64_t ndim = out.dim();
  visit_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* pa = ha.const_data_ptr<T>();
    const T* pb = hb.const_data_ptr<T>();
    T* po = out.mutable_data_ptr<T>();
    // Row-major walk over any strides: an index counter with running offsets.
    std::vector<int64_t> index(static_cast<size_t>(ndim), 0);
    int64_t oa = 0, ob = 0;
    for (int64_t i = 0; i < n; ++i) {
      po[i] = add_values<T>(pa[oa], pb[ob]);
      for (int64_t d = ndim - 1; d >= 0; --d) {
        if (++index[d] < ha.size(d)) {
          oa += ha.stride(d);
          ob += hb.stride(d);
          break;
        }
        oa -= (index[d] - 1) * ha.stride(d);
        ob -= (index[d] - 1) * hb.stride(d);
        index[d] = 0;
      }
    }
  });
  return a.device().is_cpu() ? out : out.to(a.device());
}

// `nodes`: the nodes whose registries may sum (the first that has an add wins).
// With create_graph, or under a dispatch mode (graph capture), the sum is an operator call, as
// PyTorch's engine sums with one: recorded in the first case, seen by the mode in the second.
// Otherwise nothing can observe it and the CPU helper is cheaper (a registry's add may be
// written for clarity: the reference's reads every element as float64).
Tensor accumulate(const Tensor& a, const Tensor& b, std::initializer_list<const Node*> nodes = {}) {
  if (GradMode::is_enabled() || local_dispatch_key_set().included.has(DispatchKey::DispatchMode)) {
    std::optional<OperatorHandle> add;
    for (const Node* n : nodes) {
      std::optional<OperatorHandle> op = n != nullptr ? n->recorded_by() : std::nullopt;
      if (op && (add = op->find_in_registry("aten::add.Tensor"))) break;
    }
    if (!add) add = Registry::global().find("aten::add.Tensor");
    if (add && add->has_schema()) {
      Stack stack{IValue(a), IValue(b), IValue(int64_t(1))};
      add->call_boxed(stack);
      return stack.at(0).to_tensor();
    }
  }
  return cpu_add(a, b);
}

}  // namespace

// ---------------------------------------------------------------- per-tensor state

std::optional<OperatorHandle> Node::recorded_by() const { return std::nullopt; }

AutogradMeta* autograd_meta(const Tensor& t) { return t.defined() ? impl_of(t)->autograd_meta.get() : nullptr; }

std::shared_ptr<Node> grad_fn(const Tensor& t) {
  AutogradMeta* m = autograd_meta(t);
  return m ? m->grad_fn : nullptr;
}

Edge gradient_edge(const Tensor& t) {
  AutogradMeta* m = autograd_meta(t);
  if (!m) return {};
  if (m->grad_fn) return {m->grad_fn, m->output_nr};
  if (!m->requires_grad) return {};
  std::shared_ptr<Node> acc = m->grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t);
    m->grad_accumulator = acc;
  }
  return {std::move(acc), 0};
}

void register_hook(const Tensor& leaf, TensorHook hook) {
  OPCONFORM_CHECK(leaf.requires_grad() && leaf.is_leaf(), ErrorCode::kInvalidArgument,
                  "register_hook: hooks are supported on leaf tensors that require grad");
  ensure_meta(leaf).hooks.push_back(std::move(hook));
}

// ---------------------------------------------------------------- Tensor members

}  // namespace opconform::autograd

namespace opconform {

using autograd::AutogradMeta;
using autograd::ensure_meta;

bool Tensor::requires_grad() const {
  const AutogradMeta* m = impl_ ? impl_->autograd_meta.get() : nullptr;
  return m && (m->requires_grad || m->grad_fn);
}

const Tensor& Tensor::set_requires_grad(bool requires_grad) const {
  AutogradMeta* m = impl().autograd_meta.get();
  OPCONFORM_CHECK(!m || !m->grad_fn, ErrorCode::kInvalidArgument,
                  "you can only change requires_grad flags of leaf variables.",
                  requires_grad ? "" : " If you want to use a computed variable in a subgraph that doesn't "
                                       "require differentiation use var_no_grad = var.detach().");
  OPCONFORM_CHECK(!requires_grad || is_floating(dtype()) || is_complex(dtype()), ErrorCode::kInvalidArgument,
                  "only Tensors of floating point and complex dtype can require gradients (got ", name(dtype()), ")");
  if (!m && !requires_grad) return *this;
  ensure_meta(*this).requires_grad = requires_grad;
  return *this;
}

Tensor Tensor::grad() const {
  const AutogradMeta* m = impl().autograd_meta.get();
  return m ? m->grad : Tensor();
}

void Tensor::set_grad(const Tensor& grad) const {
  if (grad.defined()) {
    OPCONFORM_CHECK(std::equal(sizes().begin(), sizes().end(), grad.sizes().begin(), grad.sizes().end()),
                    ErrorCode::kInvalidArgument, "assigned grad has data of a different size: ",
                    shape_string(grad.sizes()), " for a tensor of shape ", shape_string(sizes()));
    OPCONFORM_CHECK(grad.dtype() == dtype(), ErrorCode::kInvalidArgument, "assigned grad has data of a different type: ",
                    name(grad.dtype()), " for a tensor of dtype ", name(dtype()));
    OPCONFORM_CHECK(grad.device() == device(), ErrorCode::kInvalidArgument, "assigned grad is on ",
                    grad.device().to_string(), " but the tensor is on ", device().to_string());
  } else if (!impl().autograd_meta) {
    return;
  }
  ensure_meta(*this).grad = grad;
}

bool Tensor::is_leaf() const {
  const AutogradMeta* m = impl().autograd_meta.get();
  return !m || !m->grad_fn;
}

Tensor Tensor::detach() const {
  // A new TensorImpl over the same storage (so the same version counter), without autograd.
  auto d = std::make_unique<detail::TensorImpl>(impl());
  d->sym_shape = impl().sym_shape;
  d->batched = impl().batched;
  return Tensor::adopt(std::move(d));
}

void Tensor::backward(const Tensor& gradient, bool retain_graph, bool create_graph) const {
  std::vector<Tensor> grads;
  if (gradient.defined()) grads.push_back(gradient);
  autograd::backward({*this}, grads, retain_graph, create_graph);
}

}  // namespace opconform

namespace opconform::autograd {

// ---------------------------------------------------------------- nodes

namespace {
std::atomic<uint64_t> next_sequence_nr{0};
}

Node::Node() : sequence_nr_(next_sequence_nr.fetch_add(1, std::memory_order_relaxed)) {}

uint32_t Node::add_input_metadata(const Tensor& output) {
  InputMetadata m;
  if (output.defined()) {
    m.sizes.assign(output.sizes().begin(), output.sizes().end());
    m.dtype = output.dtype();
    m.device = output.device();
    m.has_data = !output.is_meta_data();
    if (!m.has_data) m.extra_keys = extra_keys_of(output);
  } else {
    m.defined = false;
  }
  input_metadata_.push_back(std::move(m));
  return static_cast<uint32_t>(input_metadata_.size() - 1);
}

AccumulateGrad::AccumulateGrad(Tensor variable) : variable_(std::move(variable)) {
  add_input_metadata(variable_);
  // Ready leaves run before other ready nodes, so .grad is complete as early as possible (as
  // PyTorch); the result does not depend on it.
  sequence_nr_ = UINT64_MAX;
}

std::vector<Tensor> AccumulateGrad::apply(std::vector<Tensor> grad_outputs) {
  Tensor g = grad_outputs.empty() ? Tensor() : std::move(grad_outputs[0]);
  if (!g.defined()) return {};
  AutogradMeta& m = ensure_meta(variable_);
  for (const auto& hook : m.hooks) {
    Tensor replaced = hook(g);
    if (replaced.defined()) g = std::move(replaced);
  }
  if (!m.grad.defined()) {
    // With create_graph keep the gradient's own history; else own a copy, since the incoming
    // tensor may be the caller's (a root gradient) and the next backward adds into .grad.
    m.grad = GradMode::is_enabled() ? g : g.clone();
  } else if (!GradMode::is_enabled() && !m.grad.requires_grad() && !m.grad.is_meta_data()) {
    // In place, as PyTorch: a reference the user holds to .grad sees the sum.
    m.grad.copy_(cpu_add(m.grad, g));
  } else {
    m.grad = accumulate(m.grad, g);
  }
  return {};
}

// ---------------------------------------------------------------- the engine

namespace {

struct Capture {
  uint32_t input_nr;
  size_t index;  // into the result of grad()
};

// One run of the engine over the graph reachable from the roots.
class GraphTask {
 public:
  GraphTask(bool keep_graph, bool capture_only) : keep_graph_(keep_graph), capture_only_(capture_only) {}

  void add_capture(const Edge& edge, size_t index) {
    captures_[edge.function.get()].push_back({edge.input_nr, index});
  }

  // Seeds the roots' gradients, counts dependencies and runs every ready node until none is left.
  std::vector<Tensor> run(const std::vector<Edge>& root_edges, std::vector<Tensor> root_grads, size_t num_captures) {
    captured_.assign(num_captures, Tensor());
    for (size_t i = 0; i < root_edges.size(); ++i) add_to_buffer(root_edges[i], std::move(root_grads[i]));
    count_dependencies(root_edges);

    auto later_first = [](Node* a, Node* b) { return a->sequence_nr() < b->sequence_nr(); };
    std::priority_queue<Node*, std::vector<Node*>, decltype(later_first)> ready(later_first);
    std::unordered_set<Node*> queued;
    for (const Edge& e : root_edges) {
      Node* n = e.function.get();
      if (dependencies_[n] == 0 && queued.insert(n).second) ready.push(n);
    }
    while (!ready.empty()) {
      Node* node = ready.top();
      ready.pop();
      std::vector<Tensor> inputs = take_buffer(node);
      if (auto it = captures_.find(node); it != captures_.end()) {
        for (const Capture& c : it->second) {
          if (c.input_nr < inputs.size()) captured_[c.index] = inputs[c.input_nr];
        }
      }
      if (capture_only_ && !needed_.count(node)) continue;
      std::vector<Tensor> outputs = call(*node, std::move(inputs));
      for (size_t i = 0; i < outputs.size(); ++i) {
        const Edge& e = node->next_edges()[i];
        if (!e.is_valid()) continue;
        if (outputs[i].defined()) add_to_buffer(e, std::move(outputs[i]), node);
        if (--dependencies_[e.function.get()] == 0) ready.push(e.function.get());
      }
    }
    return std::move(captured_);
  }

 private:
  void add_to_buffer(const Edge& e, Tensor grad, const Node* producer = nullptr) {
    auto& buffer = buffers_[e.function.get()];
    if (buffer.size() <= e.input_nr) buffer.resize(std::max<size_t>(e.input_nr + 1, e.function->num_inputs()));
    Tensor& slot = buffer[e.input_nr];
    slot = slot.defined() ? accumulate(slot, grad, {e.function.get(), producer}) : std::move(grad);
  }

  std::vector<Tensor> take_buffer(Node* node) {
    std::vector<Tensor> inputs;
    if (auto it = buffers_.find(node); it != buffers_.end()) {
      inputs = std::move(it->second);
      buffers_.erase(it);
    }
    if (inputs.size() < node->num_inputs()) inputs.resize(node->num_inputs());
    return inputs;
  }

  // Iterative (graphs of long loops are deep): the number of edges into each reachable node,
  // and, for grad(), which nodes lead to a captured input and so must run.
  void count_dependencies(const std::vector<Edge>& root_edges) {
    std::vector<Node*> stack;
    std::unordered_set<Node*> seen;
    std::unordered_map<Node*, std::vector<Node*>> parents;
    for (const Edge& e : root_edges) {
      if (seen.insert(e.function.get()).second) stack.push_back(e.function.get());
    }
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      for (const Edge& e : n->next_edges()) {
        if (!e.is_valid()) continue;
        Node* child = e.function.get();
        ++dependencies_[child];
        if (capture_only_) parents[child].push_back(n);
        if (seen.insert(child).second) stack.push_back(child);
      }
    }
    if (!capture_only_) return;
    // A node must run when it has an edge into a captured node or into a node that must run.
    for (const auto& [target, unused] : captures_) {
      if (seen.count(target)) stack.push_back(target);
    }
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      for (Node* p : parents[n]) {
        if (needed_.insert(p).second) stack.push_back(p);
      }
    }
  }

  std::vector<Tensor> call(Node& node, std::vector<Tensor> inputs) {
    std::vector<Tensor> outputs;
    try {
      outputs = node.apply(std::move(inputs));
    } catch (Error& e) {
      e.add_context("while running the backward node '" + node.name() + "'");
      throw;
    }
    if (!keep_graph_) node.release_variables();
    OPCONFORM_CHECK(outputs.size() == node.num_outputs(), ErrorCode::kInternal, "autograd: node '", node.name(),
                    "' returned ", outputs.size(), " gradients for its ", node.num_outputs(), " next edges");
    return outputs;
  }

  bool keep_graph_;
  bool capture_only_;
  std::unordered_map<Node*, int64_t> dependencies_;
  std::unordered_map<Node*, std::vector<Tensor>> buffers_;
  std::unordered_map<Node*, std::vector<Capture>> captures_;
  std::unordered_set<Node*> needed_;
  std::vector<Tensor> captured_;
};

// The roots' edges and gradients (ones for an omitted gradient of a one-element root).
std::vector<Edge> root_edges_of(const std::vector<Tensor>& roots, const std::vector<Tensor>& grad_roots,
                                std::vector<Tensor>& grads_out) {
  OPCONFORM_CHECK(!roots.empty(), ErrorCode::kInvalidArgument, "autograd: no tensors to differentiate");
  OPCONFORM_CHECK(grad_roots.empty() || grad_roots.size() == roots.size(), ErrorCode::kInvalidArgument,
                  "autograd: got ", grad_roots.size(), " gradients for ", roots.size(), " outputs");
  std::vector<Edge> edges;
  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& root = roots[i];
    OPCONFORM_CHECK(root.defined(), ErrorCode::kInvalidArgument, "autograd: output ", i, " is undefined");
    Edge edge = gradient_edge(root);
    OPCONFORM_CHECK(edge.is_valid(), ErrorCode::kInvalidArgument, "element ", i,
                    " of tensors does not require grad and does not have a grad_fn");
    Tensor g = grad_roots.empty() ? Tensor() : grad_roots[i];
    if (!g.defined()) {
      OPCONFORM_CHECK(root.numel() == 1, ErrorCode::kInvalidArgument,
                      "grad can be implicitly created only for scalar outputs; output ", i, " has shape ",
                      shape_string(root.sizes()), " (pass a gradient for it)");
      g = ones_like(root);
    } else {
      OPCONFORM_CHECK(std::equal(g.sizes().begin(), g.sizes().end(), root.sizes().begin(), root.sizes().end()),
                      ErrorCode::kInvalidArgument, "Mismatch in shape: grad_output[", i, "] has a shape of ",
                      shape_string(g.sizes()), " and output[", i, "] has a shape of ", shape_string(root.sizes()));
    }
    edges.push_back(std::move(edge));
    grads_out.push_back(std::move(g));
  }
  return edges;
}

}  // namespace

void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grad_roots, bool retain_graph,
              bool create_graph) {
  std::vector<Tensor> grads;
  std::vector<Edge> edges = root_edges_of(roots, grad_roots, grads);
  // Formulas run in grad mode only when their operations should be recorded.
  AutoGradMode mode(create_graph);
  GraphTask(retain_graph || create_graph, false).run(edges, std::move(grads), 0);
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, bool retain_graph, bool create_graph,
                         bool allow_unused) {
  std::vector<Tensor> grads;
  std::vector<Edge> edges = root_edges_of(outputs, grad_outputs, grads);
  GraphTask task(retain_graph || create_graph, true);
  std::vector<Edge> input_edges;  // keeps accumulators made here alive for the run
  for (size_t i = 0; i < inputs.size(); ++i) {
    OPCONFORM_CHECK(inputs[i].defined() && inputs[i].requires_grad(), ErrorCode::kInvalidArgument,
                    "One of the differentiated Tensors (input ", i, ") does not require grad");
    input_edges.push_back(gradient_edge(inputs[i]));
    task.add_capture(input_edges.back(), i);
  }
  AutoGradMode mode(create_graph);
  std::vector<Tensor> result = task.run(edges, std::move(grads), inputs.size());
  for (size_t i = 0; i < result.size(); ++i) {
    OPCONFORM_CHECK(result[i].defined() || allow_unused, ErrorCode::kInvalidArgument,
                    "One of the differentiated Tensors (input ", i,
                    ") appears to not have been used in the graph. Set allow_unused=true if this is the "
                    "desired behavior.");
  }
  return result;
}

// ---------------------------------------------------------------- AutogradContext

namespace {

constexpr const char* kFreedGraphMessage =
    "Trying to backward through the graph a second time (or directly access saved tensors after they have "
    "already been freed). Saved intermediate values of the graph are freed when you call backward() or grad(). "
    "Specify retain_graph=true if you need to backward through the graph a second time or if you need to "
    "access saved tensors after calling backward.";

}  // namespace

void AutogradContext::save_for_backward(std::vector<Tensor> tensors) {
  OPCONFORM_CHECK(!packed_, ErrorCode::kInvalidArgument,
                  "save_for_backward: only setup_context can save tensors (", op_name_, ")");
  to_save_ = std::move(tensors);
}

std::vector<Tensor> AutogradContext::saved_tensors() const {
  OPCONFORM_CHECK(!released_, ErrorCode::kInvalidArgument, kFreedGraphMessage);
  if (!packed_) return to_save_;
  std::vector<Tensor> out;
  out.reserve(saved_.size());
  for (size_t i = 0; i < saved_.size(); ++i) {
    const SavedVariable& sv = saved_[i];
    if (!sv.data.defined()) {
      out.emplace_back();
      continue;
    }
    OPCONFORM_CHECK(sv.data.version() == sv.version, ErrorCode::kInvalidArgument,
                    "one of the variables needed for gradient computation has been modified by an inplace "
                    "operation: saved tensor ", i, " of '", op_name_, "' is at version ", sv.data.version(),
                    "; expected version ", sv.version, " instead");
    if (!sv.is_output) {
      out.push_back(sv.data);
      continue;
    }
    // A fresh handle per use: attaching the node to the stored tensor would make it own itself.
    Tensor t = sv.data.detach();
    AutogradMeta& m = ensure_meta(t);
    m.grad_fn = owner_->shared_from_this();
    m.output_nr = sv.output_nr;
    out.push_back(std::move(t));
  }
  return out;
}

bool AutogradContext::needs_input_grad(size_t i) const {
  OPCONFORM_CHECK(i < needs_input_grad_.size(), ErrorCode::kInvalidArgument, "needs_input_grad(", i, "): '",
                  op_name_, "' has ", needs_input_grad_.size(), " arguments");
  return needs_input_grad_[i];
}

const IValue& AutogradContext::get(const std::string& key) const {
  auto it = attributes_.find(key);
  OPCONFORM_CHECK(it != attributes_.end(), ErrorCode::kInvalidArgument, "autograd context of '", op_name_,
                  "' has no attribute '", key, "'");
  return it->second;
}

void AutogradContext::mark_non_differentiable(std::vector<Tensor> outputs) {
  for (auto& t : outputs) non_differentiable_.push_back(std::move(t));
}

// ---------------------------------------------------------------- recording operator calls

// Not in an anonymous namespace: FunctionNode is a friend of AutogradContext (autograd.h).
namespace internal {

// Every runtime autograd key (runtime_keys_of(DispatchKey::Autograd), as a constant).
constexpr DispatchKeySet kAutogradKeys{DispatchKey::AutogradOther,       DispatchKey::AutogradCPU,
                                       DispatchKey::AutogradCUDA,        DispatchKey::AutogradMeta,
                                       DispatchKey::AutogradPrivateUse1, DispatchKey::AutogradPrivateUse2,
                                       DispatchKey::AutogradPrivateUse3};

enum class ArgKind : uint8_t { kTensor, kOptionalTensor, kTensorList, kOther };

ArgKind arg_kind(const Type& t) {
  if (t.kind() == TypeKind::kTensor) return ArgKind::kTensor;
  if (t.is_optional() && t.elem().kind() == TypeKind::kTensor) return ArgKind::kOptionalTensor;
  return t.is_tensor_like() ? ArgKind::kTensorList : ArgKind::kOther;  // Tensor[], Tensor?[], Tensor[]?
}

bool tensor_requires_grad(const Tensor& t) {
  if (!t.defined()) return false;
  const AutogradMeta* m = impl_of(t)->autograd_meta.get();
  return m && (m->requires_grad || m->grad_fn);
}

// Calls f on every tensor an IValue holds (Tensor, Tensor[], Tensor?[]).
template <typename F>
void for_each_tensor(const IValue& v, F&& f) {
  if (const Tensor* t = v.get_if<Tensor>()) {
    f(*t);
  } else if (const auto* l = v.get_if<std::vector<Tensor>>()) {
    for (const Tensor& t : *l) f(t);
  } else if (const auto* ol = v.get_if<std::vector<std::optional<Tensor>>>()) {
    for (const auto& t : *ol) {
      if (t) f(*t);
    }
  }
}

// The fast check of the no-grad path: one pointer test per tensor argument.
bool any_requires_grad(const Stack& stack, size_t base) {
  bool any = false;
  for (size_t i = base; i < stack.size() && !any; ++i) {
    for_each_tensor(stack[i], [&](const Tensor& t) { any = any || tensor_requires_grad(t); });
  }
  return any;
}

// Replaces each tensor of v in place (lists are rebuilt).
template <typename F>
void map_tensors(IValue& v, F&& f) {
  if (v.is_tensor()) {
    v = IValue(f(v.to_tensor()));
  } else if (v.is_tensor_list()) {
    std::vector<Tensor> l = v.to_tensor_list();
    for (Tensor& t : l) t = f(t);
    v = IValue(std::move(l));
  } else if (const auto* ol = v.get_if<std::vector<std::optional<Tensor>>>()) {
    std::vector<std::optional<Tensor>> l = *ol;
    for (auto& t : l) {
      if (t) t = f(*t);
    }
    v = IValue(std::move(l));
  }
}

struct Formula {
  BackwardFn backward;
  SetupContextFn setup_context;
};

// The node of one recorded call: runs the formula (or refuses, without one) and checks what it
// returns against the operator's arguments.
class FunctionNode final : public Node {
 public:
  struct ArgInfo {
    std::string name;
    std::string type;
    ArgKind kind = ArgKind::kOther;
    bool defined = false;  // a tensor was passed (not None)
    std::vector<int64_t> sizes;
    DType dtype = DType::Float32;
    Device device;
  };

  FunctionNode(const OperatorHandle& op, std::shared_ptr<const Formula> formula)
      : op_(op), op_name_(op.name()), formula_(std::move(formula)) {
    ctx_.op_name_ = op_name_;
    ctx_.owner_ = this;
  }

  std::string name() const override { return op_name_ + (formula_ ? "_backward" : "_not_implemented"); }
  std::optional<OperatorHandle> recorded_by() const override { return op_; }

  std::vector<Tensor> apply(std::vector<Tensor> grad_outputs) override {
    // No gradient reached any output: the (linear) backward would only produce zeros, so pass
    // "no gradient" on. Besides saving work, this keeps zero branches out of double-backward
    // graphs.
    bool any_defined = false;
    for (const Tensor& g : grad_outputs) any_defined = any_defined || g.defined();
    if (!any_defined) return std::vector<Tensor>(args_.size());
    OPCONFORM_CHECK(formula_ != nullptr, ErrorCode::kNotImplemented, "autograd: '", op_name_,
                    "' has no autograd formula; register one with register_autograd");
    if (ctx_.materialize_grads_) {
      for (size_t i = 0; i < grad_outputs.size() && i < input_metadata_.size(); ++i) {
        if (!grad_outputs[i].defined() && input_metadata_[i].defined) grad_outputs[i] = zeros_for(input_metadata_[i]);
      }
    }
    std::vector<Tensor> grads = formula_->backward(ctx_, grad_outputs);
    validate(grads, grad_outputs);
    return grads;
  }

  void release_variables() override {
    ctx_.saved_.clear();
    ctx_.to_save_.clear();
    ctx_.released_ = true;
  }

  // The grad-mode path of both autograd kernels (formula null: not implemented): runs the call
  // and records its node.
  static void record(const OperatorHandle& op, DispatchKeySet keys, Stack& stack, size_t base,
                     const std::shared_ptr<const Formula>& formula);

 private:
  std::string where(size_t i) const {
    return detail::concat("autograd: the backward of '", op_name_, "' returned a gradient for argument '",
                          args_[i].name, "'");
  }

  // The backward's one-gradient-per-argument form, spread over the slots (Note [Tensor[]
  // gradients]): a list argument's slot must be undefined, unless the list has one element.
  std::vector<Tensor> per_slot(std::vector<Tensor> grads) const {
    OPCONFORM_CHECK(grads.size() == arg_slots_.size(), ErrorCode::kSchemaMismatch, "autograd: the backward of '",
                    op_name_, "' returned ", grads.size(), " gradients, expected ", args_.size(),
                    " (one per argument, and one per element of a Tensor[] argument in its place; undefined for none)",
                    args_.size() != arg_slots_.size() ? detail::concat(" or ", arg_slots_.size(), " (one per argument)") : "");
    std::vector<Tensor> out(args_.size());
    for (size_t i = 0; i < arg_slots_.size(); ++i) {
      const ArgSlots& s = arg_slots_[i];
      if (s.list && s.count != 1) {
        OPCONFORM_CHECK(!grads[i].defined(), ErrorCode::kSchemaMismatch, "autograd: the backward of '", op_name_,
                        "' returned one gradient for the list argument '", s.name,
                        "'; return one per element, in its place (Note [Tensor[] gradients])");
        continue;
      }
      if (s.count == 1) out[s.first] = std::move(grads[i]);
    }
    return out;
  }

  // One gradient per slot, tensors only, each like its argument; gradients of arguments that
  // did not require grad are dropped. A gradient of another floating dtype is converted, and an
  // audit told (Note [Gradients as returned]).
  void validate(std::vector<Tensor>& grads, const std::vector<Tensor>& received) const {
    if (grads.size() != args_.size()) grads = per_slot(std::move(grads));
    for (size_t i = 0; i < grads.size(); ++i) {
      Tensor& g = grads[i];
      if (!g.defined()) continue;
      const ArgInfo& a = args_[i];
      OPCONFORM_CHECK(a.kind != ArgKind::kOther, ErrorCode::kSchemaMismatch, where(i), " of type ", a.type,
                      ", which is not a Tensor (return an undefined Tensor for it)");
      OPCONFORM_CHECK(a.defined, ErrorCode::kSchemaMismatch, where(i), ", which was None");
      // An unbacked symbolic size (data-dependent, in a captured backward: a mask's count) matches
      // any size, as test_faketensor's rule has it: only the real run can tell.
      const auto sym = g.sym_sizes();
      const bool same_shape = sym.size() == a.sizes.size() &&
                              std::equal(sym.begin(), sym.end(), a.sizes.begin(), [](const SymInt& s, int64_t n) {
                                if (auto c = s.maybe_as_int()) return *c == n;
                                const auto h = s.hint();
                                return !h || *h == n;
                              });
      OPCONFORM_CHECK(same_shape, ErrorCode::kInvalidArgument, where(i), " of shape ", shape_string(g.sizes()),
                      ", but the argument has shape ", shape_string(a.sizes));
      OPCONFORM_CHECK(is_floating(g.dtype()) || is_complex(g.dtype()), ErrorCode::kInvalidArgument, where(i),
                      " of dtype ", opconform::name(g.dtype()), "; gradients must be floating point or complex");
      OPCONFORM_CHECK(g.device() == a.device, ErrorCode::kInvalidArgument, where(i), " on ",
                      g.device().to_string(), ", but the argument is on ", a.device.to_string());
      if (!next_edges_[i].is_valid()) {
        g = Tensor();
      } else if (g.dtype() != a.dtype) {
        const bool passed_on = std::any_of(received.begin(), received.end(),
                                           [&](const Tensor& r) { return r.defined() && r.dtype() == g.dtype(); });
        if (GradientAudit* audit = GradientAudit::current(); audit != nullptr && !passed_on) {
          audit->record({op_name_, a.name, g.dtype(), a.dtype});
        }
        g = g.to(a.dtype);  // as PyTorch's validate_outputs (this cast is not recorded)
      }
    }
  }

  // Where argument i's gradients go: slots [first, first + count) of args_ and the next edges
  // (a list argument has one per element, Note [Tensor[] gradients]; other arguments one).
  struct ArgSlots {
    std::string name;
    size_t first = 0, count = 0;
    bool list = false;
  };

  OperatorHandle op_;
  std::string op_name_;
  std::shared_ptr<const Formula> formula_;  // null: the not-implemented node
  AutogradContext ctx_;
  std::vector<ArgInfo> args_;  // one per slot
  std::vector<ArgSlots> arg_slots_;
};

void FunctionNode::record(const OperatorHandle& op, DispatchKeySet keys, Stack& stack, size_t base,
                          const std::shared_ptr<const Formula>& formula) {
  const FunctionSchema& schema = op.schema();
  const size_t n = schema.arguments.size();
  auto node = std::make_shared<FunctionNode>(op, formula);
  AutogradContext& ctx = node->ctx_;
  ctx.needs_input_grad_.assign(n, false);

  // 1. The arguments' edges, taken before the call: an in-place op rebases its argument's
  //    history onto this node, and the edge must lead to the history from before. A list
  //    argument has one slot (edge) per element.
  for (size_t i = 0; i < n; ++i) {
    const Argument& arg = schema.arguments[i];
    const IValue& v = stack[base + i];
    const ArgKind kind = arg_kind(arg.type);
    bool needs = false;
    for_each_tensor(v, [&](const Tensor& t) {
      if (!tensor_requires_grad(t)) return;
      needs = true;
      OPCONFORM_CHECK(!arg.is_write() || !t.is_leaf(), ErrorCode::kInvalidArgument,
                      "a leaf Variable that requires grad is being used in an in-place operation ('", op.name(),
                      "' writes its argument '", arg.name, "')");
    });
    ctx.needs_input_grad_[i] = needs;
    node->arg_slots_.push_back({arg.name, node->args_.size(), 0, kind == ArgKind::kTensorList});
    auto add_slot = [&](std::string name, std::string type, ArgKind slot_kind, const Tensor* t) {
      ArgInfo info;
      info.name = std::move(name);
      info.type = std::move(type);
      info.kind = slot_kind;
      Edge edge;
      if (t != nullptr && t->defined()) {
        info.defined = true;
        info.sizes.assign(t->sizes().begin(), t->sizes().end());
        info.dtype = t->dtype();
        info.device = t->device();
        if (tensor_requires_grad(*t)) edge = gradient_edge(*t);
      }
      node->add_next_edge(std::move(edge));
      node->args_.push_back(std::move(info));
      ++node->arg_slots_.back().count;
    };
    if (const auto* list = v.get_if<std::vector<Tensor>>(); list && kind == ArgKind::kTensorList) {
      for (size_t e = 0; e < list->size(); ++e)
        add_slot(detail::concat(arg.name, "[", e, "]"), "Tensor", ArgKind::kTensor, &(*list)[e]);
    } else if (const auto* ol = v.get_if<std::vector<std::optional<Tensor>>>(); ol && kind == ArgKind::kTensorList) {
      for (size_t e = 0; e < ol->size(); ++e)
        add_slot(detail::concat(arg.name, "[", e, "]"), "Tensor?", ArgKind::kOptionalTensor, (*ol)[e] ? &*(*ol)[e] : nullptr);
    } else if (kind != ArgKind::kTensorList) {
      add_slot(arg.name, arg.type.to_string(), kind, v.get_if<Tensor>());
    }  // a list argument that is None has no slot
  }

  // 2. The call itself, with nested calls below autograd.
  Stack inputs(stack.begin() + static_cast<std::ptrdiff_t>(base), stack.end());
  {
    ExcludeDispatchKeyGuard below(kAutogradKeys);
    op.redispatch_boxed(keys - kAutogradKeys, stack);
  }

  // 3. An output that is the same object as an argument the op does not write (an identity or
  //    view op returning its input) becomes a new tensor over the same storage, so that the
  //    argument keeps its own history.
  for (size_t j = base; j < stack.size(); ++j) {
    map_tensors(stack[j], [&](const Tensor& out) -> Tensor {
      for (size_t i = 0; i < n; ++i) {
        bool same = false;
        for_each_tensor(inputs[i], [&](const Tensor& in) { same = same || (out.defined() && out.is_same(in)); });
        if (same && !schema.arguments[i].is_write()) return out.detach();
      }
      return out;
    });
  }
  Stack outputs(stack.begin() + static_cast<std::ptrdiff_t>(base), stack.end());

  // 4. setup_context sees the final outputs; what it computes is not recorded.
  if (formula && formula->setup_context) {
    NoGradGuard no_grad;
    formula->setup_context(ctx, inputs, outputs);
  }

  // 5. Differentiable outputs get the node as grad_fn (in-place outputs: their history rebased).
  //    One gradient slot per Tensor / Tensor? return (None: an undefined slot) and per element of
  //    a list return.
  std::vector<Tensor> flat_outputs;
  for (size_t j = 0; j < outputs.size(); ++j) {
    ArgKind kind = j < schema.returns.size() ? arg_kind(schema.returns[j].type) : ArgKind::kOther;
    if ((kind == ArgKind::kTensor || kind == ArgKind::kOptionalTensor) && outputs[j].is_none()) {
      flat_outputs.emplace_back();
    } else {
      for_each_tensor(outputs[j], [&](const Tensor& t) { flat_outputs.push_back(t); });
    }
  }
  for (const Tensor& out : flat_outputs) {
    uint32_t output_nr = node->add_input_metadata(out);
    if (!out.defined() || !(is_floating(out.dtype()) || is_complex(out.dtype()))) continue;
    bool marked = false;
    for (const Tensor& nd : ctx.non_differentiable_) marked = marked || nd.is_same(out);
    if (marked) continue;
    AutogradMeta& m = ensure_meta(out);
    m.grad_fn = node;
    m.output_nr = output_nr;
  }
  ctx.non_differentiable_.clear();

  // 6. Saved tensors: outputs of this node are stored without history (see SavedVariable).
  for (Tensor& t : ctx.to_save_) {
    AutogradContext::SavedVariable sv;
    if (t.defined()) {
      sv.version = t.version();
      const AutogradMeta* m = impl_of(t)->autograd_meta.get();
      if (m && m->grad_fn == node) {
        sv.is_output = true;
        sv.output_nr = m->output_nr;
        sv.data = t.detach();
      } else {
        sv.data = t;
      }
    }
    ctx.saved_.push_back(std::move(sv));
  }
  ctx.to_save_.clear();
  ctx.packed_ = true;
}

}  // namespace internal

namespace {
thread_local GradientAudit* tls_gradient_audit = nullptr;
}  // namespace

GradientAudit::GradientAudit() : previous_(tls_gradient_audit) { tls_gradient_audit = this; }
GradientAudit::~GradientAudit() { tls_gradient_audit = previous_; }
GradientAudit* GradientAudit::current() { return tls_gradient_audit; }

namespace {

using internal::any_requires_grad;
using internal::Formula;
using internal::kAutogradKeys;

KernelFunction autograd_kernel(std::shared_ptr<const Formula> formula) {
  return KernelFunction::from_boxed([formula = std::move(formula)](const OperatorHandle& op, DispatchKeySet keys,
                                                                    Stack& stack) {
    const size_t base = stack.size() - op.schema().arguments.size();
    if (!GradMode::is_enabled() || !any_requires_grad(stack, base)) {
      op.redispatch_boxed(keys - kAutogradKeys, stack);
      return;
    }
    internal::FunctionNode::record(op, keys, stack, base, formula);
  });
}

}  // namespace

KernelFunction make_autograd_kernel(BackwardFn backward, SetupContextFn setup_context) {
  OPCONFORM_CHECK(backward != nullptr, ErrorCode::kRegistration, "make_autograd_kernel: the backward function is empty");
  return autograd_kernel(std::make_shared<const Formula>(Formula{std::move(backward), std::move(setup_context)}));
}

Library& register_autograd(Library& lib, std::string_view op_name, BackwardFn backward, SetupContextFn setup_context) {
  return lib.impl(op_name, make_autograd_kernel(std::move(backward), std::move(setup_context)), DispatchKey::Autograd);
}

KernelFunction not_implemented_autograd_kernel() { return autograd_kernel(nullptr); }

KernelFunction refuse_autograd_kernel(std::string reason) {
  return KernelFunction::from_boxed([reason = std::move(reason)](const OperatorHandle& op, DispatchKeySet keys,
                                                                  Stack& stack) {
    const auto& arguments = op.schema().arguments;
    const size_t base = stack.size() - arguments.size();
    for (size_t i = base; i < stack.size() && GradMode::is_enabled(); ++i) {
      bool needs_grad = false;
      internal::for_each_tensor(stack[i], [&](const Tensor& t) {
        needs_grad = needs_grad || internal::tensor_requires_grad(t);
      });
      OPCONFORM_CHECK(!needs_grad, ErrorCode::kNotImplemented, "'", op.name(), "' ", reason, ": argument '",
                      arguments[i - base].name, "' requires grad");
    }
    ExcludeDispatchKeyGuard below(kAutogradKeys);
    op.redispatch_boxed(keys - kAutogradKeys, stack);
  });
}

RegistrationHandle install_autograd_fallback(Registry& registry) {
  auto handles = std::make_shared<std::vector<RegistrationHandle>>();
  KernelFunction kernel = not_implemented_autograd_kernel();
  for (DispatchKey key : kAutogradKeys.keys()) {
    handles->push_back(registry.fallback(key, kernel, RegistrationSource::here()));
  }
  return RegistrationHandle([handles] {
    for (auto& h : *handles) h.reset();
  });
}

}  // namespace opconform::autograd
