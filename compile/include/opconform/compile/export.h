// export: a Graph as text and back. The text is Graph::to_string(), exactly; load_graph reads it
// and rebuilds the same Graph (value ids, names, metadata, symbolic expressions, guards), so that
//
//   load_graph(export_graph(g)).to_string() == export_graph(g)
//
// for every graph whose value names are distinct and whose symbols are plain identifiers.
//
//   graph(%x: float32[s0, 3], %y: float32[s0, 3]):
//     %2: float32[s0, 3] = aten::mul.Tensor(%x, %y)
//     %3: float32[s0] = aten::sum.dim_IntList(%2, [1], False, None)
//     return (%3)
//   guards: s0 >= 2
//   symbols: s0 = %x.size(0)
//
// Note [Graph text format] in export.cpp gives the grammar. In short:
//   - the first line declares the inputs, then one line per node: its outputs with their
//     metadata, `=`, the operator and its arguments; `functional` marks a functionalized node and
//     ` | ` separates its written-argument outputs from its returns; a Tensor[] return is a
//     bracketed group;
//   - tensor metadata is `dtype[sizes]`, followed by `{stride=[..], offset=.., device=..,
//     requires_grad}` for whatever differs from a contiguous cpu tensor at offset 0;
//   - constants are spelled so that their kind is never ambiguous: `1` (int), `1.0` (float, the
//     shortest spelling that reads back exactly; `inf`, `-inf`, `nan`), `True`, `None`, `"str"`,
//     `torch.float32`, `torch.strided`, `torch.contiguous_format`, `device(cuda:0)`,
//     `complex(1.0, -2.0)`, `[1, 2]` (int[]), `s0*2 + 1` (a SymInt), `[s0, 3]` (SymInt[]),
//     `[%1, %2]` (Tensor[]), `[%1, None]` (Tensor?[]); lists whose kind the elements do not show
//     carry a prefix: `float[]`, `bool[]`, `list[1, 2]`, `Tensor?[%1]`;
//   - `guards:` and `symbols:` lines close the text.
// Tensor constants (a tensor baked into a graph) print as `tensor(float32[2], cpu)` but cannot be
// loaded: there is no data in the text.
//
// Symbols are re-created by name (one SymNode per name, shared by every use) without a hint:
// a loaded graph is run by binding its symbols from its inputs (Graph::symbol_sources), as
// run_graph does. Symbols named s<N> get the range of sizes, [2, INT64_MAX]; others [0, INT64_MAX].
#pragma once
#include <string>
#include <string_view>

#include "opconform/compile/graph.h"

namespace opconform::compile {

// The text of a graph (Graph::to_string()).
std::string export_graph(const Graph& graph);

// The graph a text describes. Throws Error(kInvalidArgument) naming the line and column and what
// was expected there ("line 3, column 14: expected ')' after the arguments of aten::mul.Tensor");
// any input, however malformed, gives a graph or that error.
Graph load_graph(std::string_view text);

// One argument as the text writes it ("%3", "[%1, None]", "s0*2", "1.0", "torch.float32").
// Two arguments of a graph print the same exactly when they are the same reference or equal
// constants of the same kind (floats compare bitwise but for NaN: every NaN prints "nan").
std::string arg_to_string(const Graph& graph, const Arg& arg);

// Tensor metadata as the text writes it: "float32[s0, 3]", "int64[4, 2]{stride=[1, 4]}".
std::string meta_to_string(const TensorMeta& meta);

}  // namespace opconform::compile
