// The property behind the compile path: a random chain of registry ops (in-place ones on the
// inputs included), captured, functionalized, cleaned by DCE and CSE, exported to text and loaded
// back, replays exactly as eager mode — the same outputs and the same writes into its inputs.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "support/compile_test_support.h"
#include "opconform/compile/capture.h"
#include "opconform/compile/export.h"
#include "opconform/compile/functionalize.h"
#include "opconform/compile/interpreter.h"
#include "opconform/compile/passes.h"
#include "opconform/conformance/tolerance.h"
#include "opconform/reference/reference.h"

namespace opconform::compile {
namespace {

using testing::registry;
using testing::call1;

enum class Step { mul, add, sub, neg, sin, relu, add_into_x, mul_into_y, dead_exp, duplicate_mul };

// Runs the chain on x, y (which it may write); returns the final value.
Stack run_chain(const std::vector<Step>& steps, const Stack& in) {
  const Tensor& x = in[0].to_tensor();
  const Tensor& y = in[1].to_tensor();
  Tensor v = call1("aten::mul.Tensor", {x, y});
  for (Step s : steps) {
    switch (s) {
      case Step::mul: v = call1("aten::mul.Tensor", {v, y}); break;
      case Step::add: v = call1("aten::add.Tensor", {v, x, 1}); break;
      case Step::sub: v = call1("aten::sub.Tensor", {v, y, 1}); break;
      case Step::neg: v = call1("aten::neg", {v}); break;
      case Step::sin: v = call1("aten::sin", {v}); break;
      case Step::relu: v = call1("aten::relu", {v}); break;
      case Step::add_into_x: call1("aten::add_.Tensor", {x, v, 1}); break;  // writes an input
      case Step::mul_into_y: call1("aten::mul_.Tensor", {y, v}); break;
      case Step::dead_exp: (void)call1("aten::exp", {v}); break;           // unused: DCE drops it
      case Step::duplicate_mul: {                                          // CSE merges the two
        Tensor a = call1("aten::mul.Tensor", {v, x});
        Tensor b = call1("aten::mul.Tensor", {v, x});
        v = call1("aten::add.Tensor", {a, b, 1});
        break;
      }
    }
  }
  return {IValue(v)};
}

Tensor random_tensor(const std::vector<int64_t>& sizes) {
  int64_t n = 1;
  for (auto s : sizes) n *= s;
  const auto values = *rc::gen::container<std::vector<double>>(static_cast<size_t>(n), rc::gen::inRange(-40, 40));
  std::vector<double> scaled;
  for (int v : std::vector<int>(values.begin(), values.end())) scaled.push_back(v / 8.0);
  return from_vector<double>(scaled, sizes);
}

RC_GTEST_PROP(ChainProperty, CaptureFunctionalizePassesExportReplayEqualEager, ()) {
  const auto steps = *rc::gen::container<std::vector<Step>>(
      rc::gen::element(Step::mul, Step::add, Step::sub, Step::neg, Step::sin, Step::relu, Step::add_into_x,
                       Step::mul_into_y, Step::dead_exp, Step::duplicate_mul));
  RC_PRE(steps.size() <= 12);
  const auto sizes = *rc::gen::container<std::vector<int64_t>>(*rc::gen::inRange<size_t>(0, 4), rc::gen::inRange<int64_t>(1, 5));
  const Tensor x = random_tensor(sizes), y = random_tensor(sizes);

  Stack eager_in{IValue(x.clone()), IValue(y.clone())};
  const Stack eager_out = run_chain(steps, eager_in);

  Graph g = capture([&](const Stack& in) { return run_chain(steps, in); }, {IValue(x.clone()), IValue(y.clone())},
                    {.registry = &registry()});
  g = functionalize(g, registry());
  RC_ASSERT(!has_mutation(g, registry()));
  g = eliminate_common_subexpressions(eliminate_dead_code(g, registry()), registry());
  const Graph loaded = load_graph(export_graph(g));
  RC_ASSERT(export_graph(loaded) == export_graph(g));

  Stack replay_in{IValue(x.clone()), IValue(y.clone())};
  const Stack replay_out = run_graph(loaded, replay_in, registry());
  RC_ASSERT(conformance::bitwise_equal(replay_out.at(0).to_tensor(), eager_out.at(0).to_tensor()));
  RC_ASSERT(conformance::bitwise_equal(replay_in[0].to_tensor(), eager_in[0].to_tensor()));
  RC_ASSERT(conformance::bitwise_equal(replay_in[1].to_tensor(), eager_in[1].to_tensor()));
}

}  // namespace
}  // namespace opconform::compile
