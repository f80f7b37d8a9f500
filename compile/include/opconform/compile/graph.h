// Graph: what capture() records — a straight-line program of operator calls over values, with
// symbolic tensor metadata and the guards its symbols must satisfy (the FX graph idea, small).
//
//   graph(%x: float32[s0, 3], %y: float32[s0, 3]):
//     %2: float32[s0, 3] = aten::mul.Tensor(%x, %y)
//     %3: float32[s0] = aten::sum.dim_IntList(%2, [1], False, None)
//     return (%3)
//   guards: s0 >= 2
//   symbols: s0 = %x.size(0)
//
// (to_string() prints this form; export.h reads it back; its Note [Graph text format] has the
// whole grammar.)
//
// A node's arguments are in schema order: references to values (Ref), constants (IValue; ints may
// be symbolic expressions over the graph's symbols), or lists of references (Tensor[] /
// Tensor?[]). A node has one value per returned tensor or scalar; a Tensor[] return gives one value
// per element (its count fixed at capture). Values are numbered in order of definition; inputs
// come first. Graphs are values: copy them, edit them (passes return new graphs).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "opconform/core/device.h"
#include "opconform/core/dtype.h"
#include "opconform/core/ivalue.h"
#include "opconform/core/symint.h"

namespace opconform::compile {

using ValueId = uint32_t;

// A reference to a value of the graph.
struct Ref {
  ValueId id = 0;
  friend bool operator==(const Ref&, const Ref&) = default;
};

// A list argument whose items are values (Tensor[]) or absent (None in Tensor?[]).
struct RefList {
  std::vector<std::optional<Ref>> items;
  bool optional_items = false;  // Tensor?[] (None allowed) rather than Tensor[]
};

// One argument of a node.
using Arg = std::variant<Ref, RefList, IValue>;

// What a value holds: a tensor (with symbolic metadata), or a scalar a node returned.
struct TensorMeta {
  std::vector<SymInt> sizes, strides;
  SymInt storage_offset = 0;
  DType dtype = DType::Float32;
  Device device = Device::cpu();
  bool requires_grad = false;
};

struct Value {
  ValueId id = 0;
  std::string name;                 // "x" for inputs, "" for the rest (printed as %<id>)
  std::optional<TensorMeta> tensor; // nullopt: a non-tensor value (int, float, bool returned by a node)
};

struct Node {
  std::string op;         // the operator's full name, "aten::add.Tensor"; wrapped kernels: "wrap_kernel::<name>"
  std::vector<Arg> args;  // schema order
  std::vector<ValueId> outputs;
  // How outputs group into the schema's returns: return_sizes[i] values for return i (1, or the
  // length of a Tensor[] return; 0 for a Tensor? return that was None).
  std::vector<size_t> return_sizes;
  // Set by functionalize(): the op runs on clones of the arguments it writes, and the node's
  // outputs end with one value per written argument (in argument order): its new content.
  bool functional = false;
};

// A guard the graph's symbols must satisfy for the graph to be valid ("s0 >= 2"), kept as the
// compared expressions so that a graph can be checked against new sizes.
struct Guard {
  SymInt lhs, rhs;
  CompareOp op = CompareOp::EQ;
  std::string text;
};

// Where the value of a symbol comes from: input `input`'s size of dimension `dim`.
struct SymbolSource {
  std::string symbol;  // "s0"
  size_t input = 0;    // index into Graph::inputs
  size_t dim = 0;
};

struct Graph {
  std::vector<Value> values;
  std::vector<ValueId> inputs;
  std::vector<Node> nodes;
  std::vector<Arg> outputs;      // what the program returns (refs or constants)
  std::vector<SymbolSource> symbol_sources;
  std::vector<Guard> guards;
  // Inputs the program writes: after functionalize(), the values to copy back into them.
  struct WriteBack {
    size_t input = 0;  // index into inputs
    Ref value;
  };
  std::vector<WriteBack> write_backs;

  const Value& value(ValueId id) const { return values.at(id); }
  // A new value (id = values.size()).
  ValueId add_value(std::optional<TensorMeta> tensor, std::string name = "");
  // The readable form shown at the top of this file (also the export format: export.h).
  std::string to_string() const;
};

// "%3", or "%x" for a named input.
std::string value_name(const Graph& g, ValueId id);

}  // namespace opconform::compile
