// Dead code elimination and common subexpression elimination over Graphs.
#include "opconform/compile/passes.h"

#include <algorithm>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "opconform/compile/export.h"
#include "opconform/core/tag.h"

namespace opconform::compile {
namespace {

// Note [Side effects]: what the registry tells the passes about a node's operator.
//   - writes: the schema writes an argument (or the op is tagged maybe_aliasing_or_mutating). A
//     functional node runs on clones, so for it this means nothing; otherwise the node changes a
//     value other nodes read: it must stay, and values read after it may differ from before it.
//   - seeded: tagged nondeterministic_seeded. Each call draws from the generator: two calls give
//     different tensors, and dropping one shifts every later draw.
//   - unknown: no schema in the registry; treated as writing and seeded (nothing may move it).
struct OpEffects {
  bool writes = true;
  bool seeded = true;
};

OpEffects effects_of(const Registry& registry, const Node& node) {
  auto op = registry.find(node.op);
  if (!op || !op->has_schema()) return {};
  OpEffects e;
  e.writes = !node.functional && (op->schema().is_mutable() || op->has_tag(Tag::maybe_aliasing_or_mutating));
  e.seeded = op->has_tag(Tag::nondeterministic_seeded);
  return e;
}

template <typename F>
void for_each_ref(const Arg& arg, F&& f) {
  if (const Ref* r = std::get_if<Ref>(&arg)) {
    f(r->id);
  } else if (const RefList* l = std::get_if<RefList>(&arg)) {
    for (const auto& item : l->items) {
      if (item) f(item->id);
    }
  }
}

template <typename F>
Arg map_refs(const Arg& arg, F&& f) {
  if (const Ref* r = std::get_if<Ref>(&arg)) return Ref{f(r->id)};
  if (const RefList* l = std::get_if<RefList>(&arg)) {
    RefList out = *l;
    for (auto& item : out.items) {
      if (item) item = Ref{f(item->id)};
    }
    return out;
  }
  return arg;
}

// Note [Symbols made by nodes]: a node may make a size that only exists at run time (nonzero's
// u0), which the interpreter binds from its output. Later nodes can use that symbol without using
// the output (full([u0], 1.0) after reading n.size(0)), so a node whose symbols are used stays, and
// a node that makes symbols is never merged into another (its symbols would have no value).
void add_symbols(const SymInt& s, std::set<std::string>& out) {
  if (s.is_symbolic()) {
    for (const SymNode* sym : s.node()->free_symbols()) out.insert(sym->symbol().name);
  }
}
void add_symbols(const IValue& v, std::set<std::string>& out) {
  if (const SymInt* s = v.get_if<SymInt>()) add_symbols(*s, out);
  if (v.tag() == IValue::Tag::GenericList) {
    for (const IValue& e : v.to_generic_list()) add_symbols(e, out);
  }
}
void add_symbols(const TensorMeta& m, std::set<std::string>& out) {
  for (const SymInt& s : m.sizes) add_symbols(s, out);
  for (const SymInt& s : m.strides) add_symbols(s, out);
  add_symbols(m.storage_offset, out);
}
void add_symbols(const Graph& g, ValueId id, std::set<std::string>& out) {
  if (id < g.values.size() && g.values[id].tensor) add_symbols(*g.values[id].tensor, out);
}
// The symbols a node uses: in its constant arguments and in its outputs' metadata.
std::set<std::string> symbols_used(const Graph& g, const Node& n) {
  std::set<std::string> out;
  for (const Arg& a : n.args) {
    if (const IValue* v = std::get_if<IValue>(&a)) add_symbols(*v, out);
  }
  for (ValueId o : n.outputs) add_symbols(g, o, out);
  return out;
}
// For each node, the symbols that first appear in its outputs' metadata (known before: the
// inputs' symbols and those with a source).
std::vector<std::set<std::string>> symbols_made(const Graph& g) {
  std::set<std::string> known;
  for (ValueId id : g.inputs) add_symbols(g, id, known);
  for (const auto& s : g.symbol_sources) known.insert(s.symbol);
  std::vector<std::set<std::string>> made(g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    std::set<std::string> outputs;
    for (ValueId o : g.nodes[i].outputs) add_symbols(g, o, outputs);
    for (const std::string& s : outputs) {
      if (known.insert(s).second) made[i].insert(s);
    }
  }
  return made;
}

// Whether a constant holds a tensor: those compare by identity, which their text does not show.
bool holds_tensor(const IValue& v) {
  switch (v.tag()) {
    case IValue::Tag::Tensor:
    case IValue::Tag::TensorList: return true;
    case IValue::Tag::OptionalTensorList: {
      const auto& l = *v.get_if<std::vector<std::optional<Tensor>>>();
      return std::any_of(l.begin(), l.end(), [](const auto& t) { return t.has_value(); });
    }
    case IValue::Tag::GenericList: {
      const auto& l = v.to_generic_list();
      return std::any_of(l.begin(), l.end(), holds_tensor);
    }
    default: return false;
  }
}

// `g` with these nodes, outputs and write-backs, renumbered in order of definition (passes.h).
// A reference to a value nothing defines (a broken graph) keeps its value, numbered last.
Graph renumber(const Graph& g, const std::vector<Node>& nodes, const std::vector<Arg>& outputs,
               const std::vector<Graph::WriteBack>& write_backs) {
  Graph out;
  out.symbol_sources = g.symbol_sources;
  out.guards = g.guards;
  std::unordered_map<ValueId, ValueId> new_id;
  auto number = [&](ValueId old) -> ValueId {
    auto [it, inserted] = new_id.emplace(old, static_cast<ValueId>(out.values.size()));
    if (inserted) {
      Value v = old < g.values.size() ? g.values[old] : Value{};
      v.id = it->second;
      out.values.push_back(std::move(v));
    }
    return it->second;
  };
  for (ValueId id : g.inputs) out.inputs.push_back(number(id));
  for (const Node& n : nodes) {
    for (ValueId o : n.outputs) number(o);
  }
  for (const Node& n : nodes) {
    Node m = n;
    for (auto& a : m.args) a = map_refs(a, number);
    for (auto& o : m.outputs) o = number(o);
    out.nodes.push_back(std::move(m));
  }
  for (const Arg& a : outputs) out.outputs.push_back(map_refs(a, number));
  for (const auto& wb : write_backs) out.write_backs.push_back({wb.input, Ref{number(wb.value.id)}});
  return out;
}

}  // namespace

Graph eliminate_dead_code(const Graph& graph, const Registry& registry) {
  std::unordered_set<ValueId> live;
  auto mark = [&](const Arg& a) { for_each_ref(a, [&](ValueId id) { live.insert(id); }); };
  for (const Arg& a : graph.outputs) mark(a);
  for (const auto& wb : graph.write_backs) live.insert(wb.value.id);

  // Note [Symbols made by nodes]: symbols used by what stays.
  std::set<std::string> needed;
  for (const Arg& a : graph.outputs) {
    if (const IValue* v = std::get_if<IValue>(&a)) add_symbols(*v, needed);
  }
  const auto made = symbols_made(graph);

  std::vector<bool> keep(graph.nodes.size(), false);
  for (size_t i = graph.nodes.size(); i-- > 0;) {
    const Node& n = graph.nodes[i];
    OpEffects e = effects_of(registry, n);
    bool used = std::any_of(n.outputs.begin(), n.outputs.end(), [&](ValueId o) { return live.count(o) > 0; });
    bool makes_needed = std::any_of(made[i].begin(), made[i].end(), [&](const std::string& s) { return needed.count(s) > 0; });
    if (used || makes_needed || e.writes || e.seeded) {
      keep[i] = true;
      for (const Arg& a : n.args) mark(a);
      needed.merge(symbols_used(graph, n));
    }
  }
  std::vector<Node> nodes;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    if (keep[i]) nodes.push_back(graph.nodes[i]);
  }
  return renumber(graph, nodes, graph.outputs, graph.write_backs);
}

Graph eliminate_common_subexpressions(const Graph& graph, const Registry& registry) {
  std::unordered_map<ValueId, ValueId> replaced;  // a merged node's output -> the kept node's
  auto rename = [&](ValueId id) {
    auto it = replaced.find(id);
    return it == replaced.end() ? id : it->second;
  };
  const Graph no_names;  // keys spell every reference by id: "%3"
  std::unordered_map<std::string, size_t> seen;  // key -> index into `nodes`
  std::vector<Node> nodes;
  const auto made = symbols_made(graph);
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const Node& n = graph.nodes[i];
    Node m = n;
    for (auto& a : m.args) a = map_refs(a, rename);
    OpEffects e = effects_of(registry, m);
    if (e.writes) {
      seen.clear();  // Note [Side effects]: what was computed before may read differently now
      nodes.push_back(std::move(m));
      continue;
    }
    bool tensor_constant = std::any_of(m.args.begin(), m.args.end(), [](const Arg& a) {
      const IValue* v = std::get_if<IValue>(&a);
      return v && holds_tensor(*v);
    });
    if (m.functional || e.seeded || m.outputs.empty() || tensor_constant || !made[i].empty()) {
      nodes.push_back(std::move(m));
      continue;
    }
    // The operator, the output grouping and the arguments, each spelled unambiguously.
    std::string key = m.op + "|" + std::to_string(m.outputs.size()) + "|";
    for (size_t s : m.return_sizes) key += std::to_string(s) + ",";
    key += "|";
    for (const Arg& a : m.args) key += arg_to_string(no_names, a) + ", ";
    auto [it, inserted] = seen.emplace(std::move(key), nodes.size());
    if (!inserted) {
      const Node& first = nodes[it->second];
      for (size_t j = 0; j < m.outputs.size(); ++j) replaced[m.outputs[j]] = first.outputs[j];
      continue;
    }
    nodes.push_back(std::move(m));
  }
  std::vector<Arg> outputs;
  for (const Arg& a : graph.outputs) outputs.push_back(map_refs(a, rename));
  std::vector<Graph::WriteBack> write_backs;
  for (const auto& wb : graph.write_backs) write_backs.push_back({wb.input, Ref{rename(wb.value.id)}});
  return renumber(graph, nodes, outputs, write_backs);
}

}  // namespace opconform::compile
