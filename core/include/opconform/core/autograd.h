// Autograd: a tape engine for the operator model, as torch.autograd.
//
// Recording. An operator gets a derivative formula by registering a boxed kernel at
// DispatchKey::Autograd (make_autograd_kernel / register_autograd below). When grad mode is on and
// some tensor argument requires grad, that kernel runs the operator below the autograd keys,
// builds a Node for the call (a "backward function" whose next edges lead to the inputs' own
// nodes), and gives every differentiable output that node as its grad_fn. Otherwise it just
// redispatches below autograd. Operators without a formula can use the fallback
// (install_autograd_fallback), which records a node that refuses to run.
//
// The graph. Each tensor's autograd state (AutogradMeta) lives on its TensorImpl:
//   leaf      requires_grad set by the user; gradients flow into its AccumulateGrad node, which
//             adds them to .grad (the leaf holds the accumulator weakly, the graph strongly).
//   non-leaf  grad_fn = the node that produced it, output_nr = which output of that node.
// Nodes hold their inputs' edges (and saved tensors), never their outputs, so the graph is a DAG
// owned from the outputs back to the leaves; dropping the outputs frees it.
//
// The engine (backward / grad) counts, for every node reachable from the roots, how many edges
// lead into it, and runs a node once all of them have delivered (several gradients for one
// input of a node are summed first). backward() accumulates into the leaves' .grad; grad()
// captures the gradients of the given inputs instead and touches no .grad. Without
// retain_graph every node that ran frees its saved tensors afterwards, so a second backward
// through them fails. With create_graph the formulas run in grad mode, so the gradients are
// recorded too (double backward).
//
// Gradient accumulation (summing two gradients) uses a small CPU add helper on any dtype and
// strides, or, with create_graph or under a dispatch mode, the operator "aten::add.Tensor"
// through the dispatcher, so that the sum is itself recorded and a mode (graph capture) sees it:
// the add of the registry whose operator's node produced (or receives) the gradient, else
// Registry::global()'s. Without such an operator a create_graph sum is not recorded (its result
// does not require grad).
//
// Threading: grad mode is thread-local; one graph should be built and run by one thread at a time.
#pragma once

#include <any>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "opconform/core/ivalue.h"
#include "opconform/core/kernel.h"
#include "opconform/core/library.h"
#include "opconform/core/registry.h"
#include "opconform/core/tensor.h"

namespace opconform::autograd {

// ---------------------------------------------------------------------------------------------
// Grad mode: whether operations are recorded (thread-local, on by default)
// ---------------------------------------------------------------------------------------------

namespace internal {
// Constant-initialised, so reading it needs no TLS init guard (it is read on every autograd call).
inline thread_local bool tls_grad_enabled = true;
}  // namespace internal

struct GradMode {
  static bool is_enabled() { return internal::tls_grad_enabled; }
  static void set_enabled(bool enabled) { internal::tls_grad_enabled = enabled; }
};

// Sets grad mode for a scope and restores the previous mode on exit.
class AutoGradMode {
 public:
  explicit AutoGradMode(bool enabled) : previous_(GradMode::is_enabled()) { GradMode::set_enabled(enabled); }
  ~AutoGradMode() { GradMode::set_enabled(previous_); }
  AutoGradMode(const AutoGradMode&) = delete;
  AutoGradMode& operator=(const AutoGradMode&) = delete;

 private:
  bool previous_;
};

// torch.no_grad(): nothing is recorded in the scope.
class NoGradGuard : public AutoGradMode {
 public:
  NoGradGuard() : AutoGradMode(false) {}
};

// torch.enable_grad(): recording is back on (e.g. inside a no_grad scope).
class EnableGradGuard : public AutoGradMode {
 public:
  EnableGradGuard() : AutoGradMode(true) {}
};

// ---------------------------------------------------------------------------------------------
// The graph: nodes and edges
// ---------------------------------------------------------------------------------------------

class Node;

// Where a gradient goes: input `input_nr` of node `function` (input i of a node is the gradient
// of its forward output i). An edge without a function carries nothing (the input did not
// require grad).
struct Edge {
  std::shared_ptr<Node> function;
  uint32_t input_nr = 0;
  bool is_valid() const { return function != nullptr; }
};

// A backward function. In the engine's terms its "inputs" are the gradients of the forward
// outputs (one per output_nr) and its "outputs" are the gradients of the forward inputs, one per
// next edge.
class Node : public std::enable_shared_from_this<Node> {
 public:
  Node();
  virtual ~Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  virtual std::string name() const = 0;
  // The operator whose call recorded this node (its registry sums gradients under create_graph).
  virtual std::optional<OperatorHandle> recorded_by() const;
  // Maps the gradients of the forward outputs (undefined where none flowed) to the gradients of
  // the forward inputs: exactly one entry per next edge (undefined = no gradient).
  virtual std::vector<Tensor> apply(std::vector<Tensor> grad_outputs) = 0;
  // Frees what the node saved; the engine calls it after running the node unless retain_graph.
  virtual void release_variables() {}

  const std::vector<Edge>& next_edges() const { return next_edges_; }
  const Edge& next_edge(size_t i) const { return next_edges_.at(i); }
  size_t num_outputs() const { return next_edges_.size(); }
  void add_next_edge(Edge edge) { next_edges_.push_back(std::move(edge)); }

  // What each forward output looked like: the engine sizes its gradient buffer by it and formulas
  // materialise zero gradients from it.
  struct InputMetadata {
    bool defined = true;      // false for an undefined (None) output: no zeros for it
    std::vector<int64_t> sizes;
    DType dtype = DType::Float32;
    Device device;
    bool has_data = true;     // false for meta/fake outputs (zeros are metadata tensors too)
    DispatchKeySet extra_keys;  // keys beyond the device's backend and autograd key (e.g. Fake)
  };
  // Records one forward output; returns its output_nr.
  uint32_t add_input_metadata(const Tensor& output);
  const std::vector<InputMetadata>& input_metadata() const { return input_metadata_; }
  size_t num_inputs() const { return input_metadata_.size(); }

  // Creation order; among ready nodes the engine runs the most recent first (as PyTorch).
  uint64_t sequence_nr() const { return sequence_nr_; }

 protected:
  std::vector<Edge> next_edges_;
  std::vector<InputMetadata> input_metadata_;
  uint64_t sequence_nr_;
};

// Hook on a leaf's incoming gradient: returns a replacement, or an undefined tensor to keep it.
using TensorHook = std::function<Tensor(const Tensor& grad)>;

// The sink of a leaf: adds incoming gradients to the leaf's .grad (after the leaf's hooks).
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(Tensor variable);
  std::string name() const override { return "AccumulateGrad"; }
  std::vector<Tensor> apply(std::vector<Tensor> grad_outputs) override;
  const Tensor& variable() const { return variable_; }

 private:
  Tensor variable_;
};

// ---------------------------------------------------------------------------------------------
// Per-tensor state
// ---------------------------------------------------------------------------------------------

// Lives on detail::TensorImpl (so a view made from a tensor starts without it). Absent means
// "a leaf that does not require grad".
struct AutogradMeta {
  bool requires_grad = false;      // the leaf flag; a non-leaf requires grad through grad_fn
  Tensor grad;                     // accumulated gradient (leaves)
  std::shared_ptr<Node> grad_fn;   // null for leaves
  uint32_t output_nr = 0;          // which output of grad_fn this tensor is
  std::weak_ptr<Node> grad_accumulator;  // the leaf's AccumulateGrad, made on first use
  std::vector<TensorHook> hooks;   // leaf hooks, run in registration order
};

// The autograd state of t (null when it has none). Other extensions may read it.
AutogradMeta* autograd_meta(const Tensor& t);
// The node that produced t (null for leaves and undefined tensors).
std::shared_ptr<Node> grad_fn(const Tensor& t);
// Where gradients of t go: (grad_fn, output_nr) for a non-leaf, (its AccumulateGrad, 0) for a
// leaf that requires grad (made on first use), invalid otherwise.
Edge gradient_edge(const Tensor& t);
// Registers a hook on a leaf that requires grad (it sees each gradient before accumulation).
void register_hook(const Tensor& leaf, TensorHook hook);

// ---------------------------------------------------------------------------------------------
// The engine
// ---------------------------------------------------------------------------------------------

// Accumulates d(roots)/d(leaf) · grad_roots into the .grad of every leaf that requires grad.
// grad_roots: empty, or one per root; an undefined entry means ones, allowed only for a
// one-element root. Errors: a root that does not require grad; a non-scalar root without a
// gradient (the message names its shape); a gradient whose shape differs from its root's; a
// second pass through freed nodes ("Trying to backward through the graph a second time ...").
void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grad_roots = {},
              bool retain_graph = false, bool create_graph = false);

// Returns d(outputs)/d(inputs) · grad_outputs, one entry per input, without touching .grad.
// Every input must require grad. An input no output depends on is an error, or with
// allow_unused an undefined tensor. Only nodes on a path to some input run.
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, bool retain_graph = false,
                         bool create_graph = false, bool allow_unused = false);

// ---------------------------------------------------------------------------------------------
// Custom formulas: the ctx, setup_context and backward (torch.library.register_autograd)
// ---------------------------------------------------------------------------------------------

namespace internal {
class FunctionNode;
}

// State shared between setup_context and backward of one call. Saved tensors are checked on
// use: an in-place change to one after it was saved is an error, and after a backward without
// retain_graph they are gone.
//
// Keep output tensors in save_for_backward, not in attributes: a saved output is stored
// without its grad_fn (the node itself) and restored on use; one kept elsewhere would make the
// node own itself and never be freed.
class AutogradContext {
 public:
  AutogradContext() = default;
  AutogradContext(const AutogradContext&) = delete;
  AutogradContext& operator=(const AutogradContext&) = delete;

  void save_for_backward(std::vector<Tensor> tensors);
  // The saved tensors (outputs come back with this node as grad_fn, so formulas written with
  // operators are differentiable again). Throws once freed or when one was modified in place.
  std::vector<Tensor> saved_tensors() const;

  // Whether argument i (schema order) required grad at the call: a formula may skip the rest.
  bool needs_input_grad(size_t i) const;

  // Arbitrary values for backward: IValues by name, and one std::any slot.
  void set(std::string key, IValue value) { attributes_[std::move(key)] = std::move(value); }
  const IValue& get(const std::string& key) const;  // throws naming a missing key
  bool has(const std::string& key) const { return attributes_.count(key) != 0; }
  std::any user_data;

  // Outputs that get no grad_fn (e.g. indices); backward still receives a gradient entry
  // for them (zeros when materialised).
  void mark_non_differentiable(std::vector<Tensor> outputs);
  // true (the default): undefined gradients of outputs reach backward as zeros.
  void set_materialize_grads(bool value) { materialize_grads_ = value; }
  bool materialize_grads() const { return materialize_grads_; }

 private:
  friend class internal::FunctionNode;
  // A saved tensor. An output of the node is kept detached and re-attached to the node on use.
  struct SavedVariable {
    Tensor data;
    bool is_output = false;
    uint32_t output_nr = 0;
    uint64_t version = 0;
  };

  std::string op_name_;
  std::vector<bool> needs_input_grad_;
  std::vector<Tensor> to_save_;        // what setup_context saved, until the node packs it
  std::vector<SavedVariable> saved_;
  bool packed_ = false;
  bool released_ = false;
  Node* owner_ = nullptr;             // the node this ctx lives in (for saved outputs)
  std::map<std::string, IValue> attributes_;
  std::vector<Tensor> non_differentiable_;
  bool materialize_grads_ = true;
};

// inputs: the call's arguments (schema order); outputs: its returns.
using SetupContextFn = std::function<void(AutogradContext& ctx, const Stack& inputs, const Stack& outputs)>;
// grad_outputs: one entry per returned tensor, in order (a Tensor? return that is None has an
// undefined entry, a Tensor[] return one per element, a non-tensor return none). Returns the
// gradients of the arguments in schema order, undefined for none (always for non-tensor
// arguments): one per argument, or — Note [Tensor[] gradients] — with a Tensor[] / Tensor?[]
// argument, one per element of it in its place (cat(tensors, dim) of three tensors returns
// {g0, g1, g2, undefined}), mirroring how grad_outputs flattens list returns. The one-per-argument
// form stays valid for ops whose list arguments get no gradient (index's Tensor?[] indices):
// their slot is then undefined.
// It is not called when no output received a gradient (its result would be all zeros): every
// argument then gets none.
using BackwardFn = std::function<std::vector<Tensor>(AutogradContext& ctx, const std::vector<Tensor>& grad_outputs)>;

// The boxed kernel for DispatchKey::Autograd that records `backward` for an operator.
//   - grad mode off, or no Tensor / Tensor? / Tensor[] argument requires grad: redispatch below
//     the autograd keys, nothing else.
//   - else: run the operator below autograd (autograd keys excluded for nested calls), call
//     setup_context (in no-grad mode), and record a node whose next edges are the arguments'
//     gradient edges (a list argument's: one per element). The node checks what backward
//     returns: the gradients above, none for non-tensor arguments, each matching its
//     argument's shape and device with a floating or complex dtype (another floating dtype is
//     converted, Note [Gradients as returned]); errors name the operator and the argument. Floating and complex outputs not marked non-differentiable get the node as
//     grad_fn.
// Aliasing and mutation (minimal, documented):
//   - an argument the schema marks written (Tensor(a!)) that is a leaf requiring grad is an
//     error, as in PyTorch; when it is returned, its history is rebased onto the new node (its
//     edge into the node is its history from before the call).
//   - an output that is the very same tensor object as an argument that is not written (an
//     identity / view op returning its input) is replaced by a new tensor sharing its storage,
//     so the argument's own history is untouched.
//   - views are not tracked: writing into a view later does not update its base's history;
//     saved-tensor version checks catch reads of stale data.
//   - written arguments that are not returned get no new history.
KernelFunction make_autograd_kernel(BackwardFn backward, SetupContextFn setup_context = nullptr);

// Note [Gradients as returned]: the engine converts a gradient of another floating dtype to its
// argument's dtype, as PyTorch's validate_outputs does, so no check downstream can see that a
// formula computed it in the wrong dtype (a float32 gradient for a float64 input passes a
// float64 gradcheck within tolerance). While a GradientAudit lives, each such conversion on this
// thread is recorded first — except when the gradient has the dtype of a gradient the node
// received: a type-promoting op (add of float32 and float64) passes its result's gradient on,
// and PyTorch's own formulas rely on the conversion there. Shapes and devices are never
// converted: a gradient of another shape or device is an Error naming the argument.
struct ConvertedGradient {
  std::string op;        // "aten::mul.Tensor"
  std::string argument;  // "self", "tensors[1]"
  DType returned = DType::Float32;
  DType expected = DType::Float32;
};

class GradientAudit {
 public:
  GradientAudit();
  ~GradientAudit();
  GradientAudit(const GradientAudit&) = delete;
  GradientAudit& operator=(const GradientAudit&) = delete;
  const std::vector<ConvertedGradient>& conversions() const { return conversions_; }
  // The audit of this thread, if one lives (the innermost).
  static GradientAudit* current();
  void record(ConvertedGradient c) { conversions_.push_back(std::move(c)); }

 private:
  std::vector<ConvertedGradient> conversions_;
  GradientAudit* previous_;
};

// Registers make_autograd_kernel(backward, setup_context) for op_name at DispatchKey::Autograd.
Library& register_autograd(Library& lib, std::string_view op_name, BackwardFn backward,
                           SetupContextFn setup_context = nullptr);

// The kernel for operators without a formula: when an argument requires grad, runs the
// operator below autograd and records a node that throws Error(kNotImplemented, "autograd:
// '<op>' has no autograd formula; register one with register_autograd") if backward reaches it.
KernelFunction not_implemented_autograd_kernel();

// Installs not_implemented_autograd_kernel() as `registry`'s fallback at every runtime autograd
// key; the handle undoes all of them.
RegistrationHandle install_autograd_fallback(Registry& registry);

// The kernel for DispatchKey::Autograd of an operator that does not support autograd at all: with
// grad mode on and a tensor argument that requires grad, the call throws Error(kNotImplemented,
// "'<op>' <reason>: argument '<name>' requires grad"); otherwise the operator runs below the
// autograd keys (nested calls unrecorded).
KernelFunction refuse_autograd_kernel(std::string reason);

// The reason of out= operators (custom ops with Tag::out, built-in out= overloads), as PyTorch's
// "out= ... don't support automatic differentiation".
inline constexpr std::string_view kOutOperatorReason =
    "is an out= operator (Tag::out) and does not support automatic differentiation (call it under NoGradGuard, or "
    "use the functional variant)";

}  // namespace opconform::autograd
