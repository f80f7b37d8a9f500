#include "opconform/compile/joint.h"

#include <algorithm>
#include <set>

#include "opconform/compile/detail/tracing.h"

namespace opconform::compile {
namespace {

void collect_refs(const Arg& a, std::set<ValueId>& out) {
  if (const Ref* r = std::get_if<Ref>(&a)) out.insert(r->id);
  if (const RefList* list = std::get_if<RefList>(&a))
    for (const auto& item : list->items)
      if (item) out.insert(item->id);
}

// Symbol sources for a graph whose inputs carry the symbols (the first input dimension that is
// exactly the symbol), and only the guards all of whose symbols are then known.
void rebind_symbols(Graph& g) {
  g.symbol_sources.clear();
  std::set<std::string> known;
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const auto& meta = g.value(g.inputs[i]).tensor;
    if (!meta) continue;
    for (size_t d = 0; d < meta->sizes.size(); ++d) {
      const SymInt& s = meta->sizes[d];
      if (s.is_symbolic() && s.node()->is_symbol() && known.insert(s.node()->symbol().name).second)
        g.symbol_sources.push_back({s.node()->symbol().name, i, d});
    }
  }
  std::vector<Guard> kept;
  for (const Guard& guard : g.guards) {
    bool all = true;
    for (const SymInt* side : {&guard.lhs, &guard.rhs})
      for (const auto* sym : side->as_node()->free_symbols()) all = all && known.count(sym->symbol().name);
    if (all) kept.push_back(guard);
  }
  g.guards = std::move(kept);
}

}  // namespace

JointGraph capture_joint(const Program& program, const Stack& example_inputs, const CaptureOptions& options) {
  detail::CaptureResult captured = detail::capture_graph(program, example_inputs, options, true);
  JointGraph out;
  out.joint = captured.graph;
  out.num_outputs = captured.num_outputs;
  out.grad_inputs = captured.grad_inputs;
  const Graph& joint = out.joint;
  // The program's tensor inputs come first; the output gradients were added after them.
  size_t tensor_inputs = 0;
  for (const IValue& v : example_inputs)
    if (const Tensor* t = v.get_if<Tensor>(); t && t->defined()) ++tensor_inputs;

  // What the backward reads that the forward defines (or the forward's inputs): the saved values.
  std::set<ValueId> defined_by_backward;
  std::set<ValueId> used_by_backward;
  for (size_t n = captured.forward_nodes; n < joint.nodes.size(); ++n) {
    for (const Arg& a : joint.nodes[n].args) collect_refs(a, used_by_backward);
    for (ValueId o : joint.nodes[n].outputs) defined_by_backward.insert(o);
  }
  for (size_t i = captured.num_outputs; i < joint.outputs.size(); ++i) collect_refs(joint.outputs[i], used_by_backward);
  std::set<ValueId> grad_output_inputs(joint.inputs.begin() + static_cast<std::ptrdiff_t>(tensor_inputs), joint.inputs.end());
  std::vector<ValueId> saved;
  for (ValueId v : used_by_backward)
    if (!defined_by_backward.count(v) && !grad_output_inputs.count(v)) saved.push_back(v);

  out.forward = joint;
  out.forward.inputs.assign(joint.inputs.begin(), joint.inputs.begin() + static_cast<std::ptrdiff_t>(tensor_inputs));
  out.forward.nodes.assign(joint.nodes.begin(), joint.nodes.begin() + static_cast<std::ptrdiff_t>(captured.forward_nodes));
  out.forward.outputs.assign(joint.outputs.begin(), joint.outputs.begin() + static_cast<std::ptrdiff_t>(captured.num_outputs));
  for (ValueId v : saved)
    if (std::find(out.forward.inputs.begin(), out.forward.inputs.end(), v) == out.forward.inputs.end())
      out.forward.outputs.push_back(Ref{v});

  out.backward = joint;
  // The program's inputs come first: their sizes bind the symbols the backward's shapes use
  // (a gradient's size is an expression such as 2*s0, which cannot bind s0 itself).
  out.backward.inputs = out.forward.inputs;
  for (ValueId v : saved)
    if (std::find(out.forward.inputs.begin(), out.forward.inputs.end(), v) == out.forward.inputs.end())
      out.backward.inputs.push_back(v);
  out.backward.inputs.insert(out.backward.inputs.end(), grad_output_inputs.begin(), grad_output_inputs.end());
  out.backward.nodes.assign(joint.nodes.begin() + static_cast<std::ptrdiff_t>(captured.forward_nodes), joint.nodes.end());
  out.backward.outputs.assign(joint.outputs.begin() + static_cast<std::ptrdiff_t>(captured.num_outputs), joint.outputs.end());
  out.backward.write_backs.clear();
  rebind_symbols(out.backward);
  return out;
}

}  // namespace opconform::compile
