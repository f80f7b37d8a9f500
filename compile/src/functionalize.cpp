#include "opconform/compile/functionalize.h"

#include "opconform/core/fake_tensor.h"
#include "opconform/core/strides.h"

#include <algorithm>
#include <map>
#include <set>

namespace opconform::compile {
namespace {

bool writes(const FunctionSchema& s) { return s.is_mutable(); }

// A view op returns a tensor that aliases an argument without writing it (Tensor(a)).
std::optional<size_t> viewed_argument(const FunctionSchema& s) {
  for (size_t r = 0; r < s.returns.size(); ++r) {
    const auto& alias = s.returns[r].alias_info;
    if (!alias || alias->is_write) continue;
    for (size_t a = 0; a < s.arguments.size(); ++a)
      if (s.may_alias(r, a)) return a;
  }
  return std::nullopt;
}

// Note [Functionalization state]: every value belongs to an alias root (itself, or — for what an
// in-place / out= op returns — the argument it wrote, which is the same tensor object in eager
// mode). `latest[root]` is the value holding the root's current content. A view's content
// follows its base: when the base (root) is written, views made from it are stale and are made
// again from the new base the next time they are read (the view node replayed). Writing into a
// view writes its base too: the base's new content is the old one with the view's new content
// scattered back (Note [Writing through views]).
//
// Note [Writing through views]: for a view made by
//   slice.Tensor -> slice_scatter(base, new, dim, start, end, step)
//   select.int   -> select_scatter(base, new, dim, index)
//   permute      -> permute(new, inverse dims)             (the view covers the whole base)
//   view, alias, squeeze.dim(s), unsqueeze -> view(clone(new, contiguous), base sizes)
// and a view of a view writes its base the same way, up to the root; every view of the root is
// stale from then on. Other views (as_strided, diagonal, expand) are not supported: writing
// through them throws kNotImplemented naming the view op.
class Functionalizer {
 public:
  Functionalizer(const Graph& g, const Registry& r) : in_(g), registry_(r), out_(g) {
    out_.nodes.clear();
    out_.write_backs.clear();
  }

  Graph run() {
    for (const Node& node : in_.nodes) {
      const FunctionSchema& schema = registry_.get(node.op).schema();
      Node copy = node;
      for (auto& a : copy.args) resolve_arg(a);
      if (writes(schema)) {
        functional(node, copy, schema);
      } else {
        if (auto viewed = viewed_argument(schema)) {
          if (const Ref* base = std::get_if<Ref>(&node.args.at(*viewed))) {
            for (ValueId o : node.outputs) views_[o] = {root(base->id), &node};
          }
        }
        out_.nodes.push_back(std::move(copy));
      }
    }
    for (auto& a : out_.outputs) resolve_arg(a);
    for (size_t i = 0; i < in_.inputs.size(); ++i) {
      const ValueId input = in_.inputs[i];
      const ValueId now = resolve(input);
      if (now != input) out_.write_backs.push_back({i, Ref{now}});
    }
    return out_;
  }

 private:
  struct View {
    ValueId base;      // the root of the viewed value
    const Node* node;  // the node that made the view (replayed when stale)
  };

  ValueId root(ValueId v) const {
    auto it = alias_root_.find(v);
    return it == alias_root_.end() ? v : it->second;
  }

  // The value holding v's current content.
  ValueId resolve(ValueId v) {
    // What an in-place op returned is its written argument (a view, perhaps a stale one).
    if (const ValueId r = root(v); r != v) return resolve(r);
    if (auto it = views_.find(v); it != views_.end() && stale_.count(v)) {
      // The view's base was written since: make the view again from the base's current value.
      stale_.erase(v);
      Node again = *it->second.node;
      for (auto& a : again.args) resolve_arg(a);
      const auto& made = it->second.node->outputs;
      const size_t index = static_cast<size_t>(std::find(made.begin(), made.end(), v) - made.begin());
      for (auto& o : again.outputs) o = out_.add_value(out_.value(o).tensor);
      latest_[v] = again.outputs.at(index);
      out_.nodes.push_back(std::move(again));
    }
    auto it = latest_.find(root(v));
    return it == latest_.end() ? v : it->second;
  }

  // Views of `base` (and views of those) read old content now.
  void mark_views_stale(ValueId base) {
    for (auto& [view, info] : views_) {
      if (info.base == base && !stale_.count(view)) {
        stale_.insert(view);
        mark_views_stale(view);
      }
    }
  }

  void resolve_arg(Arg& a) {
    if (Ref* r = std::get_if<Ref>(&a)) {
      r->id = resolve(r->id);
    } else if (RefList* list = std::get_if<RefList>(&a)) {
      for (auto& item : list->items)
        if (item) item->id = resolve(item->id);
    }
  }

  void functional(const Node& original, Node& node, const FunctionSchema& schema) {
    node.functional = true;
    std::vector<ValueId> written;  // original ids of the written values, in argument order
    for (size_t i = 0; i < original.args.size() && i < schema.arguments.size(); ++i) {
      if (!schema.is_mutable(i)) continue;
      if (const Ref* r = std::get_if<Ref>(&original.args[i])) {
        written.push_back(r->id);
      } else if (const RefList* list = std::get_if<RefList>(&original.args[i])) {
        for (const auto& item : list->items)
          if (item) written.push_back(item->id);
      }
    }
    std::vector<std::pair<ValueId, ValueId>> new_contents;  // written value, its new content
    for (ValueId w : written) {
      // Every view between the written value and its root must be one the write can go back through.
      for (auto it = views_.find(root(w)); it != views_.end(); it = views_.find(it->second.base)) {
        if (scatter_supported(it->second.node->op)) continue;
        throw Error(ErrorCode::kNotImplemented, ErrorReason::kNotFunctionalizable,
                    "functionalize: '" + original.op + "' writes " + value_name(in_, w) + ", a view made by '" +
                        it->second.node->op + "': writing through such a view is not supported (Note [Writing "
                        "through views] in compile/src/functionalize.cpp)");
      }
      const ValueId fresh = out_.add_value(in_.value(w).tensor);
      node.outputs.push_back(fresh);
      new_contents.emplace_back(w, fresh);
    }
    // What the op returns that aliases a written argument (self of an in-place op, out of an
    // out= op) is that argument: same root.
    size_t out = 0;
    for (size_t r = 0; r < schema.returns.size() && r < original.return_sizes.size(); ++r) {
      for (size_t k = 0; k < original.return_sizes[r]; ++k, ++out) {
        const auto& alias = schema.returns[r].alias_info;
        if (!alias || !alias->is_write) continue;
        for (size_t a = 0; a < schema.arguments.size(); ++a) {
          if (!schema.may_alias(r, a)) continue;
          if (const Ref* ref = std::get_if<Ref>(&original.args[a])) alias_root_[original.outputs[out]] = root(ref->id);
        }
      }
    }
    out_.nodes.push_back(std::move(node));
    for (const auto& [w, fresh] : new_contents) write(w, fresh);
  }

  static bool scatter_supported(const std::string& view_op) {
    return view_op == "aten::slice.Tensor" || view_op == "aten::select.int" || view_op == "aten::permute" ||
           reshapes(view_op);
  }
  // Views with the same elements as their base, in the same order.
  static bool reshapes(const std::string& view_op) {
    return view_op == "aten::view" || view_op == "aten::alias" || view_op == "aten::squeeze.dim" ||
           view_op == "aten::squeeze.dims" || view_op == "aten::unsqueeze";
  }

  static IValue sym_list(const std::vector<SymInt>& values) {
    std::vector<IValue> items;
    for (const SymInt& s : values) items.emplace_back(s);
    return IValue::list(std::move(items));
  }

  // `target` now holds `content`: a root's latest content changes; a view's base gets the view's
  // content scattered back (Note [Writing through views]), up to the root.
  void write(ValueId target, ValueId content) {
    target = root(target);  // what an in-place op on a view returned is that view
    auto it = views_.find(target);
    if (it == views_.end()) {
      const ValueId r = root(target);
      latest_[r] = content;
      mark_views_stale(r);
      return;
    }
    const Node& made = *it->second.node;
    const ValueId base = it->second.base;
    const ValueId base_now = resolve(base);
    const TensorMeta& base_meta = *out_.value(base_now).tensor;
    Node scatter;
    scatter.return_sizes = {1};
    auto arg = [&](size_t i) -> Arg {
      Arg a = made.args.at(i);
      resolve_arg(a);
      return a;
    };
    if (made.op == "aten::slice.Tensor") {
      scatter.op = "aten::slice_scatter";
      scatter.args = {Ref{base_now}, Ref{content}, arg(1), arg(2), arg(3), arg(4)};
    } else if (made.op == "aten::select.int") {
      scatter.op = "aten::select_scatter";
      scatter.args = {Ref{base_now}, Ref{content}, arg(1), arg(2)};
    } else if (made.op == "aten::permute") {
      const auto dims = std::get<IValue>(made.args.at(1)).to<std::vector<int64_t>>();
      std::vector<int64_t> inverse(dims.size());
      const auto n = static_cast<int64_t>(dims.size());
      for (int64_t i = 0; i < n; ++i) inverse[static_cast<size_t>((dims[static_cast<size_t>(i)] % n + n) % n)] = i;
      scatter.op = "aten::permute";
      scatter.args = {Ref{content}, IValue(inverse)};
    } else {
      // reshapes(made.op): scatter_supported() was checked for the whole chain. The content's
      // layout need not be viewable as the base's sizes (it came back through a permute of a
      // non-dense view, say): a contiguous copy first, then the view.
      Node copy;
      copy.op = "aten::clone";
      copy.args = {Ref{content}, IValue(MemoryFormat::Contiguous)};
      copy.return_sizes = {1};
      TensorMeta dense_meta = *out_.value(content).tensor;
      dense_meta.strides = contiguous_strides(dense_meta.sizes);
      dense_meta.storage_offset = 0;
      const ValueId dense = out_.add_value(dense_meta);
      copy.outputs = {dense};
      out_.nodes.push_back(std::move(copy));
      scatter.op = "aten::view";
      scatter.args = {Ref{dense}, sym_list(base_meta.sizes)};
    }
    TensorMeta meta = base_meta;
    if (scatter.op == "aten::permute") {  // the content's strides, permuted back
      const TensorMeta& c = *out_.value(content).tensor;
      const auto dims = std::get<IValue>(scatter.args.at(1)).to<std::vector<int64_t>>();
      for (size_t i = 0; i < dims.size() && i < c.strides.size(); ++i) meta.strides[i] = c.strides[static_cast<size_t>(dims[i])];
      meta.storage_offset = c.storage_offset;
    } else if (scatter.op == "aten::view") {
      meta.strides = contiguous_strides(meta.sizes);
      meta.storage_offset = 0;
    }
    const ValueId new_base = out_.add_value(meta);
    scatter.outputs = {new_base};
    out_.nodes.push_back(std::move(scatter));
    write(base, new_base);
  }

  const Graph& in_;
  const Registry& registry_;
  Graph out_;
  std::map<ValueId, ValueId> alias_root_;
  std::map<ValueId, ValueId> latest_;
  std::map<ValueId, View> views_;
  std::set<ValueId> stale_;
};

}  // namespace

Graph functionalize(const Graph& graph, const Registry& registry) { return Functionalizer(graph, registry).run(); }

bool has_mutation(const Graph& graph, const Registry& registry) {
  for (const Node& n : graph.nodes)
    if (!n.functional && registry.get(n.op).schema().is_mutable()) return true;
  return false;
}

}  // namespace opconform::compile
