// Running a Graph on real tensors: every symbol is bound from the inputs' actual sizes, every guard
// is checked first (a failing guard throws GuardError saying which guard and why), then the nodes
// run through the registry in order, and the write-backs copy new values into the inputs.
#pragma once
#include "opconform/compile/graph.h"
#include "opconform/core/error.h"
#include "opconform/core/registry.h"

namespace opconform::compile {

class GuardError : public Error {
 public:
  explicit GuardError(std::string message)
      : Error(ErrorCode::kInvalidArgument, ErrorReason::kGuardFailed, std::move(message)) {}
};

// The graph's outputs. `inputs` are the tensors (in Graph::inputs order).
Stack run_graph(const Graph& graph, const Stack& inputs, Registry& registry);

}  // namespace opconform::compile
