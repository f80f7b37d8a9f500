// Dead code and common subexpression elimination: what goes, what stays (writes, random ops,
// unknown ops, functional nodes), renumbering, and captured graphs that run the same afterwards.
#include <gtest/gtest.h>

#include "support/compile_test_support.h"
#include "opconform/compile/capture.h"
#include "opconform/compile/export.h"
#include "opconform/compile/functionalize.h"
#include "opconform/compile/interpreter.h"
#include "opconform/compile/passes.h"
#include "opconform/core/fake_tensor.h"
#include "opconform/core/library.h"
#include "opconform/core/shape_env.h"
#include "opconform/reference/reference.h"

namespace opconform::compile {
namespace {

using testing::registry;
using testing::call1;
using testing::iota;

TensorMeta meta(std::vector<SymInt> sizes) {
  TensorMeta m;
  m.strides = contiguous_strides(sizes);
  m.sizes = std::move(sizes);
  return m;
}

// A graph over inputs %x, %y (float32[2]) built one node at a time.
struct Builder {
  Graph g;
  ValueId x, y;
  Builder() {
    x = g.add_value(meta({2}), "x");
    y = g.add_value(meta({2}), "y");
    g.inputs = {x, y};
  }
  ValueId add(std::string op, std::vector<Arg> args, size_t outputs = 1) {
    Node n;
    n.op = std::move(op);
    n.args = std::move(args);
    for (size_t i = 0; i < outputs; ++i) n.outputs.push_back(g.add_value(meta({2})));
    n.return_sizes.assign(outputs, 1);
    g.nodes.push_back(std::move(n));
    return g.nodes.back().outputs.empty() ? 0 : g.nodes.back().outputs.front();
  }
};

const IValue kNone;
const std::vector<Arg> kRandArgs = {IValue(std::vector<int64_t>{2}), kNone, kNone, kNone, kNone};

TEST(DeadCode, AnUnusedChainGoesAndTheRestIsRenumbered) {
  Builder b;
  ValueId m = b.add("aten::mul.Tensor", {Ref{b.x}, Ref{b.y}});
  b.add("aten::exp", {Ref{m}});
  ValueId sum = b.add("aten::add.Tensor", {Ref{b.x}, Ref{b.y}, 1});
  b.g.outputs = {Ref{sum}};
  const Graph out = eliminate_dead_code(b.g, registry());
  EXPECT_EQ(out.to_string(),
            "graph(%x: float32[2], %y: float32[2]):\n"
            "  %2: float32[2] = aten::add.Tensor(%x, %y, 1)\n"
            "  return (%2)\n");
  EXPECT_EQ(out.values.size(), 3u) << "values holds what the graph defines";
}

TEST(DeadCode, WritesRandomOpsAndUnknownOpsStay) {
  Builder b;
  b.add("aten::add_.Tensor", {Ref{b.x}, Ref{b.y}, 1});           // writes an input
  ValueId t = b.add("aten::mul.Tensor", {Ref{b.x}, Ref{b.y}});   // read by an in-place op below
  b.add("aten::mul_.Tensor", {Ref{t}, Ref{b.y}});                // writes an intermediate
  b.add("aten::rand", kRandArgs);                                // draws from the generator
  b.add("wrap_kernel::<opaque>", {Ref{b.y}});                    // nothing known
  b.add("aten::neg", {Ref{b.y}});                                // pure and unused: goes
  b.g.outputs = {Ref{b.x}};
  const Graph out = eliminate_dead_code(b.g, registry());
  EXPECT_EQ(out.to_string(),
            "graph(%x: float32[2], %y: float32[2]):\n"
            "  %2: float32[2] = aten::add_.Tensor(%x, %y, 1)\n"
            "  %3: float32[2] = aten::mul.Tensor(%x, %y)\n"
            "  %4: float32[2] = aten::mul_.Tensor(%3, %y)\n"
            "  %5: float32[2] = aten::rand([2], None, None, None, None)\n"
            "  %6: float32[2] = wrap_kernel::<opaque>(%y)\n"
            "  return (%x)\n");
}

TEST(DeadCode, AnUnusedFunctionalNodeGoesAWrittenBackOneStays) {
  Builder b;
  Node f;
  f.op = "aten::add_.Tensor";
  f.args = {Ref{b.x}, Ref{b.y}, 1};
  f.functional = true;
  f.return_sizes = {1};
  f.outputs = {b.g.add_value(meta({2})), b.g.add_value(meta({2}))};
  b.g.nodes = {f, f};
  b.g.nodes[1].outputs = {b.g.add_value(meta({2})), b.g.add_value(meta({2}))};
  b.g.write_backs.push_back({0, Ref{b.g.nodes[1].outputs[1]}});
  const Graph out = eliminate_dead_code(b.g, registry());
  EXPECT_EQ(out.to_string(),
            "graph(%x: float32[2], %y: float32[2]):\n"
            "  %2: float32[2] | %3: float32[2] = functional aten::add_.Tensor(%x, %y, 1)\n"
            "  return ()\n"
            "  write_back %x <- %3\n");
}

TEST(CommonSubexpressions, ADuplicateMulIsMergedAndSoAreItsUses) {
  Builder b;
  ValueId m1 = b.add("aten::mul.Tensor", {Ref{b.x}, Ref{b.y}});
  ValueId m2 = b.add("aten::mul.Tensor", {Ref{b.x}, Ref{b.y}});
  ValueId e1 = b.add("aten::exp", {Ref{m1}});
  ValueId e2 = b.add("aten::exp", {Ref{m2}});
  ValueId sum = b.add("aten::add.Tensor", {Ref{e1}, Ref{e2}, 1});
  b.add("aten::mul.Tensor", {Ref{b.y}, Ref{b.x}});  // other argument order: not the same call
  b.g.outputs = {Ref{sum}, Ref{m2}};
  const Graph out = eliminate_common_subexpressions(b.g, registry());
  EXPECT_EQ(out.to_string(),
            "graph(%x: float32[2], %y: float32[2]):\n"
            "  %2: float32[2] = aten::mul.Tensor(%x, %y)\n"
            "  %3: float32[2] = aten::exp(%2)\n"
            "  %4: float32[2] = aten::add.Tensor(%3, %3, 1)\n"
            "  %5: float32[2] = aten::mul.Tensor(%y, %x)\n"
            "  return (%4, %2)\n");
}

TEST(CommonSubexpressions, RandomOpsAreNeverMerged) {
  Builder b;
  ValueId r1 = b.add("aten::rand", kRandArgs);
  ValueId r2 = b.add("aten::rand", kRandArgs);
  b.g.outputs = {Ref{r1}, Ref{r2}};
  EXPECT_EQ(eliminate_common_subexpressions(b.g, registry()).to_string(), b.g.to_string());
}

TEST(CommonSubexpressions, ConstantsMustAgreeInKindAndValue) {
  ShapeEnv env;
  SymInt s0 = env.create_symbol(4, "x.size(0)");
  Builder b;
  ValueId a = b.add("aten::mul.Scalar", {Ref{b.x}, 2});
  ValueId c = b.add("aten::mul.Scalar", {Ref{b.x}, 2.0});   // a float: another call
  ValueId d = b.add("aten::add.Tensor", {Ref{b.x}, Ref{b.y}, 1});
  ValueId e = b.add("aten::add.Tensor", {Ref{b.x}, Ref{b.y}, 2});
  // Symbolic sizes built apart but equal as expressions are the same argument.
  ValueId f = b.add("aten::expand", {Ref{b.x}, IValue::list({IValue(s0 * 2), 2}), false});
  ValueId g = b.add("aten::expand", {Ref{b.x}, IValue::list({IValue(s0 + s0), 2}), false});
  ValueId h = b.add("aten::expand", {Ref{b.x}, IValue::list({IValue(s0 * 3), 2}), false});
  b.g.outputs = {Ref{a}, Ref{c}, Ref{d}, Ref{e}, Ref{f}, Ref{g}, Ref{h}};
  const Graph out = eliminate_common_subexpressions(b.g, registry());
  EXPECT_EQ(out.to_string(),
            "graph(%x: float32[2], %y: float32[2]):\n"
            "  %2: float32[2] = aten::mul.Scalar(%x, 2)\n"
            "  %3: float32[2] = aten::mul.Scalar(%x, 2.0)\n"
            "  %4: float32[2] = aten::add.Tensor(%x, %y, 1)\n"
            "  %5: float32[2] = aten::add.Tensor(%x, %y, 2)\n"
            "  %6: float32[2] = aten::expand(%x, [s0*2, 2], False)\n"
            "  %7: float32[2] = aten::expand(%x, [s0*3, 2], False)\n"
            "  return (%2, %3, %4, %5, %6, %6, %7)\n");
}

TEST(CommonSubexpressions, AWriteEndsEveryMatchAndWritingNodesStay) {
  Builder b;
  ValueId before = b.add("aten::mul.Tensor", {Ref{b.x}, Ref{b.y}});
  b.add("aten::add_.Tensor", {Ref{b.x}, Ref{b.y}, 1});  // x changes: x * y reads differently now
  b.add("aten::add_.Tensor", {Ref{b.x}, Ref{b.y}, 1});  // a second write is a second write
  ValueId after = b.add("aten::mul.Tensor", {Ref{b.x}, Ref{b.y}});
  b.g.outputs = {Ref{before}, Ref{after}};
  EXPECT_EQ(eliminate_common_subexpressions(b.g, registry()).to_string(), b.g.to_string());
}

TEST(CommonSubexpressions, FunctionalNodesAndNodesWithoutOutputsAreNotMerged) {
  Builder b;
  Node f;
  f.op = "aten::add_.Tensor";
  f.args = {Ref{b.x}, Ref{b.y}, 1};
  f.functional = true;
  f.return_sizes = {1};
  f.outputs = {b.g.add_value(meta({2})), b.g.add_value(meta({2}))};
  Node f2 = f;
  f2.outputs = {b.g.add_value(meta({2})), b.g.add_value(meta({2}))};
  Node check;
  check.op = "aten::neg";  // its output dropped: a node without outputs
  check.args = {Ref{b.x}};
  b.g.nodes = {f, f2, check, check};
  b.g.outputs = {Ref{f.outputs[1]}, Ref{f2.outputs[1]}};
  EXPECT_EQ(eliminate_common_subexpressions(b.g, registry()).to_string(), b.g.to_string());
}

// n = nonzero(x) makes u0; full([u0], 1.0) uses the symbol, not n.
TEST(DeadCode, ANodeWhoseRunTimeSizeIsUsedStays) {
  ShapeEnv env;
  SymInt u0 = env.create_unbacked(0, 2, "nonzero");
  Builder b;
  TensorMeta indices = meta({u0, 1});
  indices.dtype = DType::Int64;
  Node nonzero;
  nonzero.op = "aten::nonzero";
  nonzero.args = {Ref{b.x}};
  nonzero.outputs = {b.g.add_value(indices)};
  nonzero.return_sizes = {1};
  b.g.nodes.push_back(nonzero);
  Node unused = nonzero;  // its own u1, used by nobody: goes
  TensorMeta other = indices;
  other.sizes[0] = env.create_unbacked(0, 2, "nonzero");
  unused.outputs = {b.g.add_value(other)};
  b.g.nodes.push_back(unused);
  ValueId full = b.add("aten::full", {IValue::list({IValue(u0)}), 1.0, kNone, kNone, kNone, kNone});
  b.g.outputs = {Ref{full}};
  const Graph out = eliminate_dead_code(b.g, registry());
  EXPECT_EQ(out.to_string(),
            "graph(%x: float32[2], %y: float32[2]):\n"
            "  %2: int64[u0, 1] = aten::nonzero(%x)\n"
            "  %3: float32[2] = aten::full([u0], 1.0, None, None, None, None)\n"
            "  return (%3)\n");
  // Two nonzero calls make two symbols: merging them would leave u1 without a value.
  b.g.nodes[1].outputs = {b.g.nodes[1].outputs[0]};
  b.g.outputs = {Ref{full}, Ref{b.g.nodes[1].outputs[0]}};
  EXPECT_EQ(eliminate_common_subexpressions(b.g, registry()).nodes.size(), 3u);
}

// ---- captured programs

TEST(PassesCaptured, CseThenDceOfACapturedProgramRunsTheSame) {
  // a = x * y; b = x * y; exp(x) (unused); return a + b
  auto program = [](const Stack& in) {
    Tensor a = call1("aten::mul.Tensor", {in[0], in[1]});
    Tensor b = call1("aten::mul.Tensor", {in[0], in[1]});
    call1("aten::exp", {in[0]});
    return Stack{IValue(call1("aten::add.Tensor", {a, b, 1}))};
  };
  Graph g = capture(program, {iota({4, 3}), iota({4, 3}, 2)}, {.registry = &registry(), .input_names = {"x", "y"}});
  ASSERT_EQ(g.nodes.size(), 4u);
  Graph out = eliminate_dead_code(eliminate_common_subexpressions(g, registry()), registry());
  ASSERT_EQ(out.nodes.size(), 2u) << out.to_string();
  EXPECT_EQ(out.nodes[0].op, "aten::mul.Tensor");
  EXPECT_EQ(out.nodes[1].op, "aten::add.Tensor");
  EXPECT_EQ(std::get<Ref>(out.nodes[1].args[0]), std::get<Ref>(out.nodes[1].args[1]));
  EXPECT_EQ(load_graph(export_graph(out)).to_string(), out.to_string());
  Tensor x = iota({4, 3}, 0.5), y = iota({4, 3}, -3);
  EXPECT_EQ(run_graph(out, {x, y}, registry()).at(0).to_tensor().to_vector<double>(),
            program({x, y})[0].to_tensor().to_vector<double>());
}

TEST(PassesCaptured, ASizeOnlyKnownAtRunTimeKeepsItsNode) {
  // passes_t::filled(Tensor like, SymInt n) -> Tensor: n twos (the reference's fake kernels take
  // concrete sizes only, so this op's fake kernel is the symbolic one).
  Library lib("passes_t", LibraryKind::DEF, std::nullopt, registry());
  lib.define("filled(Tensor like, SymInt n) -> Tensor");
  lib.impl("filled", [](const Tensor&, SymInt n) {
    const int64_t k = n.expect_int();
    return from_vector<double>(std::vector<double>(static_cast<size_t>(k), 2.0), {k});
  }, DispatchKey::CPU);
  lib.impl("filled", wrap_fake_kernel([](const Tensor& like, SymInt n) {
    return make_fake_tensor({n}, DType::Float64, like.device());
  }), DispatchKey::Fake);
  // n = nonzero(x); return filled(x, n.size(0)): filled reads n's size, not n.
  auto program = [](const Stack& in) {
    Tensor n = call1("aten::nonzero", {in[0]});
    return Stack{IValue(call1("passes_t::filled", {in[0], IValue(n.sym_sizes()[0])}))};
  };
  Tensor x = from_vector<double>({0, 1, 0, 3, 5}, {5});
  Graph g = capture(program, {x}, {.registry = &registry()});
  Graph out = eliminate_dead_code(eliminate_common_subexpressions(g, registry()), registry());
  ASSERT_EQ(out.nodes.size(), 2u) << out.to_string();
  EXPECT_EQ(run_graph(out, {x}, registry()).at(0).to_tensor().to_vector<double>(), std::vector<double>({2, 2, 2}));
}

TEST(PassesCaptured, DceDropsTheStaleViewOfAFunctionalizedGraph) {
  // v = x.view([2, 3]); x.mul_(y); return -v: functionalize replays the view on the new x, and the
  // first view is left unused.
  auto program = [](const Stack& in) {
    Tensor v = call1("aten::view", {in[0], std::vector<int64_t>{2, 3}});
    Stack s{in[0], in[1]};
    registry().get("aten::mul_.Tensor").call_boxed(s);
    return Stack{IValue(call1("aten::neg", {v}))};
  };
  Tensor x = iota({6}), y = iota({6}, 2);
  Graph f = functionalize(capture(program, {x.clone(), y}, {.registry = &registry()}), registry());
  Graph out = eliminate_dead_code(f, registry());
  size_t views = 0;
  for (const auto& n : out.nodes) views += n.op == "aten::view";
  EXPECT_EQ(views, 1u) << out.to_string();
  EXPECT_EQ(out.nodes.size() + 1, f.nodes.size());
  Tensor ex = x.clone(), rx = x.clone();
  const Tensor eager = program({ex, y})[0].to_tensor();
  EXPECT_EQ(run_graph(out, {rx, y}, registry()).at(0).to_tensor().to_vector<double>(), eager.to_vector<double>());
  EXPECT_EQ(rx.to_vector<double>(), ex.to_vector<double>()) << "the write-back still happens";
}

}  // namespace
}  // namespace opconform::compile
