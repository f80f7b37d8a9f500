// The joint forward/backward graph (the AOT autograd idea): the program is captured, then its
// backward — the registered autograd formulas, run by the engine on the fake outputs — is captured
// into the same graph, and the whole is partitioned into a forward graph (which also returns what
// the backward needs) and a backward graph (saved values and output gradients in, input gradients
// out).
#pragma once
#include "opconform/compile/capture.h"
#include "opconform/compile/graph.h"

namespace opconform::compile {

struct JointGraph {
  Graph joint;     // inputs: the program's tensors, then one gradient per differentiable output
  Graph forward;   // inputs: the program's tensors; outputs: its outputs, then the saved values
  Graph backward;  // inputs: the program's tensors, the saved values, then the output gradients;
                   // outputs: one gradient per input that requires grad (None for none)
  size_t num_outputs = 0;         // the program's outputs at the front of forward's outputs
  std::vector<size_t> grad_inputs;  // which program inputs (tensor index) get a gradient, in order
};

// The inputs that require grad get gradients; outputs that require grad get gradient inputs.
// A formula that cannot be captured (reads data, makes tensors outside the operator model) makes
// this throw with the op's name.
JointGraph capture_joint(const Program& program, const Stack& example_inputs, const CaptureOptions& options = {});

}  // namespace opconform::compile
