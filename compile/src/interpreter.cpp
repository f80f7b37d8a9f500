#include "opconform/compile/interpreter.h"

#include <map>

#include "opconform/core/ivalue.h"
#include "opconform/core/tensor.h"

namespace opconform::compile {
namespace {

using Bindings = std::map<std::string, int64_t>;

std::string symbol_help(const Graph& g, const std::string& symbol) {
  for (const auto& s : g.symbol_sources)
    if (s.symbol == symbol) return value_name(g, g.inputs.at(s.input)) + ".size(" + std::to_string(s.dim) + ")";
  return "an unbacked size";
}

int64_t evaluate(const SymInt& s, const Bindings& b) {
  if (auto v = s.maybe_as_int()) return *v;
  return s.node()->evaluate([&](const SymNode& symbol) {
    auto it = b.find(symbol.symbol().name);
    if (it == b.end()) throw Error(ErrorCode::kInternal, "run_graph: symbol " + symbol.symbol().name + " has no value yet");
    return it->second;
  });
}

// A constant with every symbolic int replaced by its value.
IValue concrete(const IValue& v, const Bindings& b) {
  if (const SymInt* s = v.get_if<SymInt>()) return IValue(evaluate(*s, b));
  if (const GenericList* list = v.get_if<GenericList>()) {
    std::vector<IValue> items;
    bool all_ints = !list->elements->empty();
    for (const auto& item : *list->elements) {
      items.push_back(concrete(item, b));
      all_ints = all_ints && items.back().is_int();
    }
    if (all_ints) {
      std::vector<int64_t> ints;
      for (const auto& i : items) ints.push_back(i.to_int());
      return IValue(std::move(ints));
    }
    return IValue(GenericList{std::make_shared<std::vector<IValue>>(std::move(items))});
  }
  return v;
}

std::string sizes_string(const std::vector<SymInt>& sizes) {
  std::string out = "[";
  for (size_t i = 0; i < sizes.size(); ++i) out += (i ? ", " : "") + sizes[i].to_string();
  return out + "]";
}

// Binds the symbols of a graph's inputs from the real inputs and checks what the graph assumed.
Bindings bind_inputs(const Graph& g, const Stack& inputs) {
  if (inputs.size() != g.inputs.size()) {
    throw GuardError("run_graph: the graph takes " + std::to_string(g.inputs.size()) + " inputs, " +
                     std::to_string(inputs.size()) + " were given");
  }
  Bindings b;
  for (const auto& s : g.symbol_sources) {
    const Tensor& t = inputs.at(s.input).to_tensor();
    if (static_cast<size_t>(t.dim()) <= s.dim) {
      throw GuardError("run_graph: input " + value_name(g, g.inputs[s.input]) + " has " + std::to_string(t.dim()) +
                       " dimensions, the graph was captured for more");
    }
    b[s.symbol] = t.sizes()[s.dim];
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Value& v = g.value(g.inputs[i]);
    const Tensor& t = inputs[i].to_tensor();
    const TensorMeta& m = *v.tensor;
    const std::string name = value_name(g, v.id);
    if (t.dim() != static_cast<int64_t>(m.sizes.size())) {
      throw GuardError("run_graph: input " + name + " has " + std::to_string(t.dim()) + " dimensions, the graph was captured for " +
                       std::to_string(m.sizes.size()));
    }
    if (t.dtype() != m.dtype) {
      throw GuardError("run_graph: input " + name + " is " + std::string(opconform::name(t.dtype())) +
                       ", the graph was captured for " + std::string(opconform::name(m.dtype)));
    }
    for (size_t d = 0; d < m.sizes.size(); ++d) {
      const int64_t expected = evaluate(m.sizes[d], b);
      if (t.sizes()[d] != expected) {
        throw GuardError("run_graph: input " + name + " has size " + std::to_string(t.sizes()[d]) + " in dimension " +
                         std::to_string(d) + ", the graph needs " + m.sizes[d].to_string() +
                         (m.sizes[d].is_symbolic() ? " = " + std::to_string(expected) : std::string(" (a static size)")));
      }
    }
  }
  for (const Guard& guard : g.guards) {
    const int64_t lhs = evaluate(guard.lhs, b), rhs = evaluate(guard.rhs, b);
    if (!holds(lhs, guard.op, rhs)) {
      std::string values;
      for (const auto* sym : guard.lhs.as_node()->free_symbols()) {
        const std::string& n = sym->symbol().name;
        values += (values.empty() ? "" : ", ") + n + " = " + std::to_string(b[n]) + " (" + symbol_help(g, n) + ")";
      }
      throw GuardError("run_graph: guard '" + guard.text + "' does not hold for these inputs: " +
                       (values.empty() ? std::to_string(lhs) + " vs " + std::to_string(rhs) : values));
    }
  }
  return b;
}

// After a node: binds unbacked symbols its outputs introduced and checks every output's sizes
// against what capture recorded (the fake kernel's prediction, now evaluated).
void check_output(const Graph& g, const Node& node, ValueId id, const Tensor& t, Bindings& b) {
  const Value& v = g.value(id);
  if (!v.tensor) return;
  const TensorMeta& m = *v.tensor;
  if (t.dim() != static_cast<int64_t>(m.sizes.size())) {
    throw Error(ErrorCode::kSchemaMismatch, ErrorReason::kCapturedMetadata,
                "run_graph: '" + node.op + "' returned " + std::to_string(t.dim()) +
                                                "-d " + value_name(g, id) + ", capture recorded " + sizes_string(m.sizes));
  }
  for (size_t d = 0; d < m.sizes.size(); ++d) {
    const SymInt& s = m.sizes[d];
    if (s.is_symbolic() && s.node()->is_symbol() && !b.count(s.node()->symbol().name)) {
      b[s.node()->symbol().name] = t.sizes()[d];  // an unbacked size, known now
      continue;
    }
    const int64_t expected = evaluate(s, b);
    if (t.sizes()[d] != expected) {
      throw Error(ErrorCode::kSchemaMismatch, ErrorReason::kCapturedMetadata,
                  "run_graph: '" + node.op + "' returned " + value_name(g, id) + " with size " + shape_string(t.sizes()) +
                      ", but capture recorded " + sizes_string(m.sizes) + " (= " + std::to_string(expected) +
                      " in dimension " + std::to_string(d) +
                      " at these sizes): the op's fake kernel computes its output size wrongly here");
    }
  }
  if (t.dtype() != m.dtype) {
    throw Error(ErrorCode::kSchemaMismatch, ErrorReason::kCapturedMetadata,
                "run_graph: '" + node.op + "' returned " + value_name(g, id) + " as " +
                                                std::string(name(t.dtype())) + ", capture recorded " +
                                                std::string(name(m.dtype)));
  }
}

IValue value_of(const Arg& a, const std::vector<IValue>& env, const Bindings& b) {
  if (const Ref* r = std::get_if<Ref>(&a)) return env.at(r->id);
  if (const RefList* list = std::get_if<RefList>(&a)) {
    if (list->optional_items) {
      std::vector<std::optional<Tensor>> items;
      for (const auto& r : list->items) items.push_back(r ? std::optional<Tensor>(env.at(r->id).to_tensor()) : std::nullopt);
      return IValue(std::move(items));
    }
    std::vector<Tensor> items;
    for (const auto& r : list->items) items.push_back(env.at(r->id).to_tensor());
    return IValue(std::move(items));
  }
  return concrete(std::get<IValue>(a), b);
}

}  // namespace

Stack run_graph(const Graph& graph, const Stack& inputs, Registry& registry) {
  Bindings bindings = bind_inputs(graph, inputs);
  std::vector<IValue> env(graph.values.size());
  for (size_t i = 0; i < graph.inputs.size(); ++i) env[graph.inputs[i]] = inputs[i];
  for (const Node& node : graph.nodes) {
    OperatorHandle op = registry.get(node.op);
    const FunctionSchema& schema = op.schema();
    Stack stack;
    for (const Arg& a : node.args) stack.push_back(value_of(a, env, bindings));
    std::vector<IValue> written;  // functional nodes: the clones the op writes
    if (node.functional) {
      for (size_t i = 0; i < stack.size() && i < schema.arguments.size(); ++i) {
        if (!schema.is_mutable(i)) continue;
        if (const Tensor* t = stack[i].get_if<Tensor>(); t && t->defined()) {
          stack[i] = IValue(t->clone());
        } else if (const auto* list = stack[i].get_if<std::vector<Tensor>>()) {
          std::vector<Tensor> copies;
          for (const Tensor& t : *list) copies.push_back(t.clone());
          stack[i] = IValue(std::move(copies));
        }
        written.push_back(stack[i]);
      }
    }
    op.call_boxed(stack);
    size_t out = 0;
    for (size_t r = 0; r < node.return_sizes.size() && r < stack.size(); ++r) {
      if (node.return_sizes[r] == 0) continue;
      if (const auto* list = stack[r].get_if<std::vector<Tensor>>()) {
        if (list->size() != node.return_sizes[r]) {
          throw Error(ErrorCode::kSchemaMismatch, "run_graph: '" + node.op + "' returned " + std::to_string(list->size()) +
                                                      " tensors, capture recorded " + std::to_string(node.return_sizes[r]));
        }
        for (const Tensor& t : *list) {
          check_output(graph, node, node.outputs.at(out), t, bindings);
          env[node.outputs.at(out++)] = IValue(t);
        }
        continue;
      }
      if (const Tensor* t = stack[r].get_if<Tensor>()) check_output(graph, node, node.outputs.at(out), *t, bindings);
      env[node.outputs.at(out++)] = stack[r];
    }
    for (const IValue& w : written) {
      if (const auto* list = w.get_if<std::vector<Tensor>>()) {
        for (const Tensor& t : *list) env[node.outputs.at(out++)] = IValue(t);
      } else {
        env[node.outputs.at(out++)] = w;
      }
    }
  }
  for (const auto& wb : graph.write_backs) inputs.at(wb.input).to_tensor().copy_(env.at(wb.value.id).to_tensor());
  Stack outputs;
  for (const Arg& a : graph.outputs) outputs.push_back(value_of(a, env, bindings));
  return outputs;
}

}  // namespace opconform::compile
