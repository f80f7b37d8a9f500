// capture: run a program of operator calls once with fake tensors and symbolic sizes and record
// every dispatcher call as a Graph node (the torch.compile / make_fx idea, through our dispatcher).
//
//   Graph g = capture([&](const Stack& in) {
//     Stack s{in[0], in[1]};
//     registry.get("aten::mul.Tensor").call_boxed(s);
//     return s;
//   }, {x, y}, {.registry = &registry});
//
// The program sees fake tensors (every dimension of size >= 2 gets its own symbol when dynamic);
// what it returns must be tensors it received or made through operator calls. Guards recorded
// while tracing (decisions on symbols) are kept in the graph. A fake kernel that reads data makes
// capture fail with an error naming the op (its fake kernel's message), as does a tensor the graph
// did not make reaching an op (it would be baked into the graph).
#pragma once
#include <functional>

#include "opconform/compile/graph.h"
#include "opconform/core/registry.h"

namespace opconform::compile {

using Program = std::function<Stack(const Stack& inputs)>;

struct CaptureOptions {
  bool dynamic = true;                   // symbolic sizes (else every size is a constant)
  Registry* registry = nullptr;          // null: Registry::global()
  std::vector<std::string> input_names;  // names of the inputs (default x0, x1, ...)
};

// Tensor arguments of `example_inputs` become the graph's inputs; other values are passed to the
// program as they are (and so are constants of the graph).
Graph capture(const Program& program, const Stack& example_inputs, const CaptureOptions& options = {});

}  // namespace opconform::compile
