// Graph passes: dead code elimination and common subexpression elimination (the FX passes of the
// same names, small). Each takes a graph and returns a new one; the registry says what each
// operator does (its schema's written arguments, its tags).
//
// Value ids: the result is renumbered in order of definition (inputs first, then node outputs in
// node order), as capture() numbers a graph, so `values` holds exactly the values the graph
// defines. Names, metadata, guards, symbol sources and write-backs are kept.
//
// What a pass will not touch (Note [Side effects] in passes.cpp):
//   - a node that writes an argument (in-place, out=, mutable ops) and is not functional: its
//     effect is the write, not its outputs;
//   - an op tagged nondeterministic_seeded (rand, dropout, ...): it draws from the generator, so
//     removing or merging it changes every later random draw;
//   - an op the registry does not know (a wrapped kernel, say): nothing is known of it.
// And a node whose outputs bring in a size known only at run time (nonzero's u0) stays while a
// kept node uses that symbol, even without using the node's outputs (Note [Symbols made by nodes]).
#pragma once
#include "opconform/compile/graph.h"
#include "opconform/core/registry.h"

namespace opconform::compile {

// Removes the nodes none of whose outputs reaches the graph's outputs or write-backs, keeping
// those with side effects (see above) and what they read.
Graph eliminate_dead_code(const Graph& graph, const Registry& registry);

// Merges nodes that compute the same thing: the same operator on the same arguments (the same
// values, constants equal in kind and value, symbolic expressions equal as text) with the same
// output grouping. Uses of the later node's outputs read the earlier node's instead, and the later
// node is dropped. Functional nodes (they clone), nodes with side effects, nodes without outputs,
// nodes with tensor constants and nodes that bring in new symbols are never merged; a node that writes an argument ends every match made before it (the
// values it may write read differently afterwards).
Graph eliminate_common_subexpressions(const Graph& graph, const Registry& registry);

}  // namespace opconform::compile
