// What capture, the joint graph and kernel_op share: the Tracer that turns dispatcher calls into
// Graph nodes, the mode that feeds it, and the table of kernel_op bodies the mode runs inline.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "opconform/compile/capture.h"
#include "opconform/compile/graph.h"
#include "opconform/core/dispatch_mode.h"
#include "opconform/core/registry.h"
#include "opconform/core/shape_env.h"

namespace opconform::compile::detail {

TensorMeta meta_of(const Tensor& t);

class Tracer {
 public:
  explicit Tracer(Graph& graph) : graph_(graph) {}
  // `t` is (now) the value `id` of the graph.
  void bind(const Tensor& t, ValueId id);
  // The value a tensor stands for; throws naming the op and argument when the graph did not make it.
  ValueId value_for(const Tensor& t, const std::string& op, size_t arg);
  Arg arg_of(const IValue& v, const std::string& op, size_t index);
  // Appends a node for a call that ran: its arguments and its returns.
  void record(const OperatorHandle& op, const Stack& args, const Stack& returns);
  Graph& graph() { return graph_; }

 private:
  static std::string layout_key(const Tensor& t);

  Graph& graph_;
  std::unordered_map<const void*, ValueId> values_;
  std::unordered_map<std::string, ValueId> by_layout_;
  std::vector<Tensor> keep_alive_;
};

std::shared_ptr<DispatchMode> make_tracing_mode(Tracer& tracer);

// kernel_op (kernel_op.h): an operator whose body capture runs inline instead of recording it.
using KernelOpBody = std::function<Stack(const Stack& args)>;
const KernelOpBody* kernel_op_body(std::string_view op);
RegistrationHandle register_kernel_op_body(std::string op, KernelOpBody body);

// capture() and capture_joint(): the graph, where the program's part ends, and (with_backward)
// the backward of its differentiable outputs captured after it.
struct CaptureResult {
  Graph graph;
  size_t forward_nodes = 0;
  size_t num_outputs = 0;
  std::vector<size_t> grad_inputs;  // tensor inputs that require grad
};
CaptureResult capture_graph(const Program& program, const Stack& example_inputs, const CaptureOptions& options,
                            bool with_backward);

// The ShapeEnv's guards, appended to the graph's.
void copy_guards(const ShapeEnv& env, Graph& g);

}  // namespace opconform::compile::detail
