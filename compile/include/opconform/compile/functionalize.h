// functionalize: a Graph without mutation inside. Each op that writes an argument (in-place, out=,
// mutable) becomes a functional node: it runs on clones of what it writes and returns the new
// values after its own returns (Node::functional; the auto_functionalize idea). Later uses of a
// written value read the new one; views of a written value are regenerated from the new base (the
// view nodes replayed). Inputs whose content changed get a write-back at the end
// (Graph::write_backs: the interpreter copies them in after the last node).
//
// Writing through a view writes its base: the base's new content is the old one with the view's
// scattered back (slice_scatter, select_scatter, the inverse permute, a view back to the base's
// sizes), up to the root. Views of other kinds (as_strided, diagonal, expand) make functionalize
// throw kNotImplemented naming the op and the view (Note [Writing through views]).
#pragma once
#include "opconform/compile/graph.h"
#include "opconform/core/registry.h"

namespace opconform::compile {

Graph functionalize(const Graph& graph, const Registry& registry);

// Whether a graph still mutates inside (a node that writes an argument and is not functional).
bool has_mutation(const Graph& graph, const Registry& registry);

}  // namespace opconform::compile
