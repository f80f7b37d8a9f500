// functionalize: a Graph without mutation inside. Each op that writes an argument (in-place, out=,
// mutable) becomes a functional node: it runs on clones of what it writes and returns the new
// values after its own returns (Node::functional; the auto_functionalize idea). Later uses of a
// written value read the new one; views of a written value are regenerated from the new base (the
// view nodes replayed). Inputs whose content changed get a write-back at the end
// (Graph::write_backs: the interpreter copies them in after the last node).
//
// Writing through a view of an input into the input is not supported yet: functionalize throws
// naming the op and the view (see Note in functionalize.cpp).
#pragma once
#include "opconform/compile/graph.h"
#include "opconform/core/registry.h"

namespace opconform::compile {

Graph functionalize(const Graph& graph, const Registry& registry);

// Whether a graph still mutates inside (a node that writes an argument and is not functional).
bool has_mutation(const Graph& graph, const Registry& registry);

}  // namespace opconform::compile
