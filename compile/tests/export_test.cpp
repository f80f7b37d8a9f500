// The graph text format: golden texts, every constant kind, metadata, output groups, ids and
// names, symbolic expressions (canonical and raw trees), error messages, round trips of random
// graphs, garbage and mutated texts (only opconform::Error), and captured programs run again.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <limits>

#include "support/compile_test_support.h"
#include "opconform/compile/capture.h"
#include "opconform/compile/export.h"
#include "opconform/compile/functionalize.h"
#include "opconform/compile/interpreter.h"
#include "opconform/core/fake_tensor.h"
#include "opconform/core/shape_env.h"
#include "opconform/reference/reference.h"

namespace opconform::compile {
namespace {

using testing::registry;
using testing::call1;
using testing::iota;

using ::testing::HasSubstr;

TensorMeta meta(std::vector<SymInt> sizes, DType dtype = DType::Float32) {
  TensorMeta m;
  m.strides = contiguous_strides(sizes);
  m.sizes = std::move(sizes);
  m.dtype = dtype;
  return m;
}

Node node(std::string op, std::vector<Arg> args, std::vector<ValueId> outputs) {
  Node n;
  n.op = std::move(op);
  n.args = std::move(args);
  n.return_sizes.assign(outputs.size(), 1);
  n.outputs = std::move(outputs);
  return n;
}

Error error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "expected an opconform::Error";
  return Error(ErrorCode::kInternal, "no error");
}

// Everything a Graph holds, compared: ids, names and metadata of every value (as text), nodes,
// outputs, write-backs, guards (text and structure), symbol sources.
void expect_same_graph(const Graph& a, const Graph& b) {
  ASSERT_EQ(a.values.size(), b.values.size());
  for (size_t i = 0; i < a.values.size(); ++i) {
    EXPECT_EQ(b.values[i].id, i);
    EXPECT_EQ(a.values[i].name, b.values[i].name) << i;
    ASSERT_EQ(a.values[i].tensor.has_value(), b.values[i].tensor.has_value()) << i;
    if (a.values[i].tensor) {
      const TensorMeta &x = *a.values[i].tensor, &y = *b.values[i].tensor;
      EXPECT_EQ(meta_to_string(x), meta_to_string(y));
      ASSERT_EQ(x.strides.size(), y.strides.size());
      for (size_t d = 0; d < x.strides.size(); ++d) EXPECT_EQ(x.strides[d].to_string(), y.strides[d].to_string());
    }
  }
  EXPECT_EQ(a.inputs, b.inputs);
  ASSERT_EQ(a.nodes.size(), b.nodes.size());
  for (size_t i = 0; i < a.nodes.size(); ++i) {
    const Node &x = a.nodes[i], &y = b.nodes[i];
    EXPECT_EQ(x.op, y.op);
    EXPECT_EQ(x.outputs, y.outputs);
    EXPECT_EQ(x.return_sizes, y.return_sizes);
    EXPECT_EQ(x.functional, y.functional);
    ASSERT_EQ(x.args.size(), y.args.size());
    for (size_t j = 0; j < x.args.size(); ++j) {
      EXPECT_EQ(x.args[j].index(), y.args[j].index());
      EXPECT_EQ(arg_to_string(a, x.args[j]), arg_to_string(b, y.args[j]));
    }
  }
  ASSERT_EQ(a.write_backs.size(), b.write_backs.size());
  for (size_t i = 0; i < a.write_backs.size(); ++i) {
    EXPECT_EQ(a.write_backs[i].input, b.write_backs[i].input);
    EXPECT_EQ(a.write_backs[i].value, b.write_backs[i].value);
  }
  ASSERT_EQ(a.guards.size(), b.guards.size());
  for (size_t i = 0; i < a.guards.size(); ++i) {
    EXPECT_EQ(a.guards[i].op, b.guards[i].op);
    EXPECT_EQ(a.guards[i].lhs.to_string() + " " + a.guards[i].rhs.to_string(),
              b.guards[i].lhs.to_string() + " " + b.guards[i].rhs.to_string());
  }
  ASSERT_EQ(a.symbol_sources.size(), b.symbol_sources.size());
  for (size_t i = 0; i < a.symbol_sources.size(); ++i) {
    EXPECT_EQ(a.symbol_sources[i].symbol, b.symbol_sources[i].symbol);
    EXPECT_EQ(a.symbol_sources[i].input, b.symbol_sources[i].input);
    EXPECT_EQ(a.symbol_sources[i].dim, b.symbol_sources[i].dim);
  }
}

// load_graph(export_graph(g)) is g again, and prints the same.
void expect_round_trip(const Graph& g) {
  const std::string text = export_graph(g);
  Graph loaded;
  try {
    loaded = load_graph(text);
  } catch (const Error& e) {
    FAIL() << e.what() << "\n" << text;
  }
  EXPECT_EQ(loaded.to_string(), text);
  expect_same_graph(g, loaded);
}

class ExportTest : public ::testing::Test {
 protected:
  ShapeEnv env;
  SymInt s0 = env.create_symbol(5, "x.size(0)");
  SymInt s1 = env.create_symbol(7, "y.size(1)");
  SymInt u0 = env.create_unbacked();

  // The example at the top of graph.h.
  Graph mul_sum() {
    Graph g;
    ValueId x = g.add_value(meta({s0, 3}), "x");
    ValueId y = g.add_value(meta({s0, 3}), "y");
    g.inputs = {x, y};
    ValueId m = g.add_value(meta({s0, 3}));
    g.nodes.push_back(node("aten::mul.Tensor", {Ref{x}, Ref{y}}, {m}));
    ValueId s = g.add_value(meta({s0}));
    g.nodes.push_back(node("aten::sum.dim_IntList", {Ref{m}, IValue(std::vector<int64_t>{1}), IValue(false), IValue()}, {s}));
    g.outputs = {Ref{s}};
    g.guards.push_back({s0, 2, CompareOp::GE, "s0 >= 2"});
    g.symbol_sources.push_back({"s0", 0, 0});
    return g;
  }
};

TEST_F(ExportTest, TheHeaderExampleReadsAsDocumented) {
  const Graph g = mul_sum();
  EXPECT_EQ(g.to_string(),
            "graph(%x: float32[s0, 3], %y: float32[s0, 3]):\n"
            "  %2: float32[s0, 3] = aten::mul.Tensor(%x, %y)\n"
            "  %3: float32[s0] = aten::sum.dim_IntList(%2, [1], False, None)\n"
            "  return (%3)\n"
            "guards: s0 >= 2\n"
            "symbols: s0 = %x.size(0)\n");
  EXPECT_EQ(export_graph(g), g.to_string());
  expect_round_trip(g);
}

TEST_F(ExportTest, ValueNamesAndIds) {
  Graph g;
  EXPECT_EQ(g.add_value(meta({2}), "x"), 0u);
  EXPECT_EQ(g.add_value(std::nullopt), 1u);
  EXPECT_EQ(g.add_value(meta({2}), "a b"), 2u);
  EXPECT_EQ(g.add_value(meta({2}), "3"), 3u);
  EXPECT_EQ(value_name(g, 0), "%x");
  EXPECT_EQ(value_name(g, 1), "%1");
  EXPECT_EQ(value_name(g, 2), "%\"a b\"");
  EXPECT_EQ(value_name(g, 3), "%\"3\"") << "a name that reads as an id is quoted";
  EXPECT_EQ(value_name(g, 9), "%9");
}

TEST_F(ExportTest, LoadingSharesOneSymbolNodePerName) {
  Graph loaded = load_graph(export_graph(mul_sum()));
  const auto& x = *loaded.value(0).tensor;
  const auto& y = *loaded.value(1).tensor;
  ASSERT_TRUE(x.sizes[0].is_symbolic());
  EXPECT_EQ(x.sizes[0].node(), y.sizes[0].node());
  EXPECT_EQ(loaded.guards.at(0).lhs.node(), x.sizes[0].node());
  EXPECT_EQ(loaded.guards.at(0).text, "s0 >= 2");
  EXPECT_EQ(loaded.guards.at(0).op, CompareOp::GE);
  const SymNode::SymbolInfo& info = x.sizes[0].node()->symbol();
  EXPECT_EQ(info.name, "s0");
  EXPECT_EQ(info.source, "x.size(0)");
  EXPECT_FALSE(info.hint.has_value());
  EXPECT_EQ(info.min, 2);
  EXPECT_EQ(x.strides[0].to_string(), "3");
}

TEST_F(ExportTest, EveryConstantKindHasOneSpelling) {
  Graph g;
  ValueId x = g.add_value(meta({2}), "x");
  ValueId y = g.add_value(meta({2}), "y");
  g.inputs = {x, y};
  const std::vector<std::pair<Arg, std::string>> cases = {
      {IValue(), "None"},
      {IValue(int64_t{-7}), "-7"},
      {IValue(std::numeric_limits<int64_t>::min()), "-9223372036854775808"},
      {IValue(1.0), "1.0"},
      {IValue(0.1), "0.1"},
      {IValue(-0.0), "-0.0"},
      {IValue(1e300), "1e+300"},
      {IValue(5e-324), "5e-324"},
      {IValue(1.0 / 3), "0.3333333333333333"},
      {IValue(HUGE_VAL), "inf"},
      {IValue(-HUGE_VAL), "-inf"},
      {IValue(std::nan("")), "nan"},
      {IValue(true), "True"},
      {IValue(false), "False"},
      {IValue(complex128(1.5, -2)), "complex(1.5, -2.0)"},
      {IValue(DType::Float16), "torch.float16"},
      {IValue(Device::cuda(1)), "device(cuda:1)"},
      {IValue(Device::cpu()), "device(cpu)"},
      {IValue(Device::meta()), "device(meta)"},
      {IValue(Layout::Strided), "torch.strided"},
      {IValue(MemoryFormat::ChannelsLast), "torch.channels_last"},
      {IValue(std::string("a\"b\\c\n\x01\xc3\xa9")), "\"a\\\"b\\\\c\\n\\x01\\xc3\\xa9\""},
      {IValue(std::string("")), "\"\""},
      {IValue(std::vector<int64_t>{}), "[]"},
      {IValue(std::vector<int64_t>{1, -2}), "[1, -2]"},
      {IValue(std::vector<double>{}), "float[]"},
      {IValue(std::vector<double>{0.5, 2}), "[0.5, 2.0]"},
      {IValue(std::vector<bool>{}), "bool[]"},
      {IValue(std::vector<bool>{true, false}), "[True, False]"},
      {IValue::list({}), "list[]"},
      {IValue::list({1, 2}), "list[1, 2]"},
      {IValue::list({1.5}), "list[1.5]"},
      {IValue::list({IValue(s0), 3}), "[s0, 3]"},
      {IValue::list({1, 2.5}), "[1, 2.5]"},
      {IValue::list({IValue(), IValue()}), "[None, None]"},
      {IValue::list({IValue(std::vector<int64_t>{1}), IValue(std::vector<int64_t>{})}), "[[1], []]"},
      {IValue(s0 * 2), "s0*2"},
      {IValue(floordiv(s0 + 1, 2)), "(s0 + 1)//2"},
      {IValue(mod(s1, 3)), "s1 % 3"},
      {IValue(s0 * s1 - 3), "s0*s1 - 3"},
      {IValue(SymInt(5) - s0 * 2), "-s0*2 + 5"},
      {IValue(u0 + s0), "s0 + u0"},
      {IValue(floordiv(s0, s1)), "s0//s1"},
      {IValue(Tensor()), "tensor(undefined)"},
      {IValue(std::vector<std::optional<Tensor>>{std::nullopt, std::nullopt}), "const Tensor?[None, None]"},
      {IValue(std::vector<Tensor>{}), "const Tensor[]"},
      {Ref{x}, "%x"},
      {RefList{{Ref{x}, Ref{y}}, false}, "[%x, %y]"},
      {RefList{{Ref{x}, std::nullopt}, true}, "[%x, None]"},
      {RefList{{Ref{x}}, true}, "Tensor?[%x]"},
      {RefList{{std::nullopt}, true}, "Tensor?[None]"},
      {RefList{{}, false}, "Tensor[]"},
      {RefList{{}, true}, "Tensor?[]"},
      {RefList{{Ref{y}, std::nullopt}, false}, "Tensor[%y, None]"},
  };
  std::vector<Arg> args;
  for (const auto& [arg, text] : cases) {
    EXPECT_EQ(arg_to_string(g, arg), text);
    args.push_back(arg);
  }
  ValueId out = g.add_value(meta({2}));
  g.nodes.push_back(node("test::every_kind", args, {out}));
  g.outputs = {Ref{out}, IValue(2.5), RefList{{Ref{x}}, false}};
  expect_round_trip(g);

  // The kinds come back, not only the spelling.
  const Graph loaded = load_graph(export_graph(g));
  const auto& loaded_args = loaded.nodes.at(0).args;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Arg& a = cases[i].first;
    ASSERT_EQ(a.index(), loaded_args[i].index()) << cases[i].second;
    if (const IValue* v = std::get_if<IValue>(&a)) {
      const IValue& w = std::get<IValue>(loaded_args[i]);
      EXPECT_EQ(v->tag(), w.tag()) << cases[i].second;
      if (v->tag() != IValue::Tag::SymInt && v->tag() != IValue::Tag::Tensor) {
        EXPECT_TRUE(v->identical(w)) << cases[i].second << " came back as " << w.repr();
      }
    } else if (const RefList* l = std::get_if<RefList>(&a)) {
      EXPECT_EQ(l->optional_items, std::get<RefList>(loaded_args[i]).optional_items) << cases[i].second;
    }
  }
}

TEST_F(ExportTest, TensorConstantsPrintButDoNotLoad) {
  Graph g;
  ValueId out = g.add_value(meta({2}));
  g.nodes.push_back(node("test::f", {IValue(from_vector<float>({1, 2}, {2}))}, {out}));
  g.outputs = {Ref{out}};
  const std::string text = g.to_string();
  EXPECT_THAT(text, HasSubstr("test::f(tensor(float32[2], cpu))"));
  EXPECT_THAT(error_of([&] { load_graph(text); }).what(),
              HasSubstr("line 2, column 35: expected 'undefined)': tensor constants cannot be loaded"));
}

TEST_F(ExportTest, MetadataBeyondContiguousCpuIsWritten) {
  Graph g;
  TensorMeta strided = meta({s0, 3});
  strided.strides = {1, s0};
  TensorMeta moved = meta({4});
  moved.storage_offset = s0 * 2;
  moved.device = Device::cuda(0);
  moved.requires_grad = true;
  TensorMeta no_strides;  // hand-built: sizes without strides
  no_strides.sizes = {2, 3};
  TensorMeta scalar = meta({}, DType::Int64);
  TensorMeta big;  // contiguous strides would overflow: written out
  big.sizes = {INT64_MAX, 2};
  TensorMeta zero = meta({0, 3}, DType::Bool);
  g.inputs = {g.add_value(strided, "a"), g.add_value(moved, "b"), g.add_value(no_strides, "c"),
              g.add_value(scalar, "d"), g.add_value(zero, "e")};
  big.strides = {2, 1};
  ValueId n = g.add_value(std::nullopt);
  ValueId b = g.add_value(big);
  g.nodes.push_back(node("test::f", {Ref{0}}, {n, b}));
  g.outputs = {Ref{n}};
  EXPECT_EQ(g.to_string(),
            "graph(%a: float32[s0, 3]{stride=[1, s0]}, "
            "%b: float32[4]{offset=s0*2, device=cuda:0, requires_grad}, %c: float32[2, 3]{stride=[]}, "
            "%d: int64[], %e: bool[0, 3]):\n"
            "  %5, %6: float32[9223372036854775807, 2]{stride=[2, 1]} = test::f(%a)\n"
            "  return (%5)\n");
  expect_round_trip(g);
}

TEST_F(ExportTest, OutputGroupsFunctionalNodesAndWriteBacks) {
  Graph g;
  ValueId x = g.add_value(meta({s0}), "x");
  g.inputs = {x};
  // max.dim: two returns; split: one Tensor[] return of three; none: a Tensor? return that was None.
  Node max = node("aten::max.dim", {Ref{x}, 0, false}, {g.add_value(meta({})), g.add_value(meta({}, DType::Int64))});
  Node split;
  split.op = "aten::split.Tensor";
  split.args = {Ref{x}, 1};
  split.outputs = {g.add_value(meta({1})), g.add_value(meta({1})), g.add_value(meta({1}))};
  split.return_sizes = {3};
  Node optional_none;
  optional_none.op = "test::maybe";
  optional_none.args = {Ref{x}};
  optional_none.return_sizes = {1, 0};
  optional_none.outputs = {g.add_value(meta({s0}))};
  Node functional = node("aten::add_.Tensor", {Ref{x}, Ref{2}, 1}, {g.add_value(meta({s0})), g.add_value(meta({s0}))});
  functional.functional = true;
  functional.return_sizes = {1};
  Node bare;  // no outputs, no return sizes
  bare.op = "test::check";
  bare.args = {Ref{x}};
  Node loose;  // outputs without return sizes
  loose.op = "test::loose";
  loose.outputs = {g.add_value(std::nullopt)};
  g.nodes = {max, split, optional_none, functional, bare, loose};
  g.outputs = {Ref{8}, RefList{{Ref{3}, Ref{4}, Ref{5}}, false}};
  g.write_backs.push_back({0, Ref{9}});
  EXPECT_EQ(g.to_string(),
            "graph(%x: float32[s0]):\n"
            "  %1: float32[], %2: int64[] = aten::max.dim(%x, 0, False)\n"
            "  [%3: float32[1], %4: float32[1], %5: float32[1]] = aten::split.Tensor(%x, 1)\n"
            "  %6: float32[s0], [] = test::maybe(%x)\n"
            "  %7: float32[s0] | %8: float32[s0] = functional aten::add_.Tensor(%x, %2, 1)\n"
            "  test::check(%x)\n"
            "  | %9 = test::loose()\n"
            "  return (%8, [%3, %4, %5])\n"
            "  write_back %x <- %9\n");
  expect_round_trip(g);
}

TEST_F(ExportTest, IdsNamesAndUnusedValuesSurvive) {
  Graph g;
  ValueId u = g.add_value(meta({2}));       // %0: never defined by an input or a node
  ValueId x = g.add_value(meta({2}), "x");  // %1: an input whose id is not its position
  ValueId t = g.add_value(meta({2}), "t");  // %2: a named node output
  ValueId q = g.add_value(meta({2}), "the \"q\"");
  g.inputs = {x};
  g.nodes.push_back(node("aten::neg", {Ref{x}}, {q}));
  g.nodes.push_back(node("aten::neg", {Ref{q}}, {t}));
  g.outputs = {Ref{t}, Ref{u}};
  (void)u;
  EXPECT_EQ(g.to_string(),
            "graph(%x#1: float32[2]):\n"
            "  %\"the \\\"q\\\"\"#3: float32[2] = aten::neg(%x)\n"
            "  %t: float32[2] = aten::neg(%\"the \\\"q\\\"\")\n"
            "  unused %0: float32[2]\n"
            "  return (%t, %0)\n");
  expect_round_trip(g);
}

TEST_F(ExportTest, OperatorNamesThatAreNotBareAreQuoted) {
  Graph g;
  g.nodes.push_back(node("no namespace", {}, {}));
  g.nodes.push_back(node("wrap_kernel::<my_fn>", {}, {}));
  EXPECT_EQ(g.to_string(), "graph():\n  \"no namespace\"()\n  wrap_kernel::<my_fn>()\n  return ()\n");
  expect_round_trip(g);
}

// Expressions built by SymNode::make_binary need not be canonical; they print back the same.
TEST_F(ExportTest, RawExpressionTreesPrintBackTheSame) {
  using K = SymNode::Kind;
  auto c = [](int64_t v) { return SymNode::make_constant(v); };
  auto b = [](K k, std::shared_ptr<SymNode> l, std::shared_ptr<SymNode> r) { return SymNode::make_binary(k, l, r); };
  auto s = s0.node(), t = s1.node();
  const std::vector<std::shared_ptr<SymNode>> trees = {
      b(K::Add, s, c(-3)),                                  // s0 + (-3)
      b(K::Add, s, b(K::Mul, c(3), c(-1))),                 // s0 + -3
      b(K::Mul, s, c(std::numeric_limits<int64_t>::min())), // s0*(-9223372036854775808)
      b(K::Mul, b(K::Mul, s, c(-2)), t),                    // -s0*2*s1
      b(K::Mul, b(K::Mul, s, c(-2)), c(-3)),                // --s0*2*3
      b(K::Mul, t, b(K::Mul, s, c(-2))),                    // s1*-s0*2
      b(K::Mul, b(K::Mul, c(3), c(-1)), c(-1)),             // --3
      b(K::Mul, c(-3), c(-2)),                              // -(-3)*2
      b(K::Mul, b(K::FloorDiv, s, c(2)), c(-3)),            // -(s0//2)*3
      b(K::Sub, s, b(K::Sub, t, c(1))),                     // s0 - (s1 - 1)
      b(K::Mod, b(K::Mul, s, c(2)), c(-4)),                 // (s0*2) % (-4)
      b(K::Add, c(-5), s),                                  // -5 + s0
      b(K::Mul, s, c(1)),                                   // s0*1
      b(K::Mul, b(K::Mul, s, c(1)), c(-1)),                 // -s0*1
      b(K::Add, c(1), c(2)),                                // 1 + 2 (a SymInt, not folded)
      b(K::FloorDiv, b(K::Mul, c(0), c(-1)), c(2)),         // (-0)//2
      b(K::Mul, c(2), b(K::Mul, c(-1), t)),                 // 2*(-1)*s1
      b(K::Mul, b(K::Mul, c(-7), c(-1)), b(K::Mul, c(-1), c(2))),  // -(-7)*(-1)*2
  };
  Graph g;
  std::vector<Arg> args;
  for (const auto& tree : trees) {
    args.push_back(IValue(SymInt(tree)));
    g.guards.push_back({SymInt(tree), SymInt(tree), CompareOp::LE, ""});
  }
  g.nodes.push_back(node("test::f", args, {}));
  const std::string text = g.to_string();
  EXPECT_THAT(text, HasSubstr("test::f(s0 + (-3), s0 + -3, s0*(-9223372036854775808), -s0*2*s1, --s0*2*3, "
                              "s1*-s0*2, --3, -(-3)*2, -(s0//2)*3, s0 - (s1 - 1), (s0*2) % (-4), -5 + s0, s0*1, "
                              "-s0*1, 1 + 2, (-0)//2, 2*(-1)*s1, -(-7)*(-1)*2)"));
  EXPECT_EQ(load_graph(text).to_string(), text);
}

TEST_F(ExportTest, ErrorsNameTheLineAndWhatWasExpected) {
  auto message = [](std::string_view text) { return std::string(error_of([&] { load_graph(text); }).what()); };
  EXPECT_EQ(error_of([] { load_graph(""); }).code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(message(""), HasSubstr("line 1, column 1: expected 'graph(' starting the text"));
  EXPECT_THAT(message("graph(%x: float32[2]):\n  %1: float32[2] = aten::neg(%x\n  return (%1)\n"),
              HasSubstr("line 2, column 32: expected ', ' or ')' after an argument, got the end of the line"));
  EXPECT_THAT(message("graph(%x: float33[2]):\n  return (%x)\n"), HasSubstr("line 1, column 11: expected a dtype (float32, int64, ...), got \"float33[2]):\""));
  EXPECT_THAT(message("graph(%x: float32[2]):\n  %1 = aten::neg(%y)\n  return (%1)\n"),
              HasSubstr("line 2, column 18: expected a defined value (there is no %y)"));
  EXPECT_THAT(message("graph(%x: float32[2]):\n  %5 = aten::neg(%x)\n  return (%5)\n"),
              HasSubstr("line 2, column 3: expected a value id below 2 (the text defines 2 values)"));
  EXPECT_THAT(message("graph(%x: float32[2]):\n  %x = aten::neg(%x)\n  return (%x)\n"),
              HasSubstr("line 2, column 3: expected a value name used once (%x is defined before)"));
  EXPECT_THAT(message("graph(%x: float32[2]):\n  %1 = aten::neg(%x)\n"), HasSubstr("expected a return line"));
  EXPECT_THAT(message("graph():\n  return ()\nguards: s0 >= \n"), HasSubstr("line 3, column 15: expected a number, a symbol or '('"));
  EXPECT_THAT(message("graph():\n  return (99999999999999999999)\n"),
              HasSubstr("line 2, column 11: expected an integer that fits in int64"));
  EXPECT_THAT(message("graph():\n  return (\"abc)\n"), HasSubstr("expected '\"' closing the string"));
  EXPECT_THAT(message("graph():\n  return (device(gpu:0))\n"), HasSubstr("expected a device (unknown device type"));
  EXPECT_THAT(message("graph(%x: float32[2]):\n  return ()\nsymbols: s0 = %x.size(0\n"),
              HasSubstr("line 3, column 24: expected ')' after the dimension"));
  EXPECT_THAT(message("graph():\n  return (" + std::string(500, '(') + "1" + std::string(500, ')') + ")\n"),
              HasSubstr("expected less nesting"));
  EXPECT_THAT(message("graph():\n  return ([%1, 2])\n"), HasSubstr("expected a defined value"));
  EXPECT_THAT(message("graph(%x: float32[2]):\n  return ([%x, 2])\n"),
              HasSubstr("expected a list of values or of constants, not both"));
}

// ---- properties

// Symbolic expressions from canonical arithmetic over s0, s1 and u0.
SymInt gen_expression(const std::vector<SymInt>& symbols, int depth) {
  const int choice = *rc::gen::inRange(0, depth > 3 ? 2 : 8);
  switch (choice) {
    case 0: return *rc::gen::inRange<int64_t>(-5, 6);
    case 1: return symbols[*rc::gen::inRange<size_t>(0, symbols.size())];
    case 2: return gen_expression(symbols, depth + 1) + gen_expression(symbols, depth + 1);
    case 3: return gen_expression(symbols, depth + 1) - gen_expression(symbols, depth + 1);
    case 4: return gen_expression(symbols, depth + 1) * gen_expression(symbols, depth + 1);
    case 5: return floordiv(gen_expression(symbols, depth + 1), *rc::gen::inRange<int64_t>(1, 5));
    case 6: return mod(gen_expression(symbols, depth + 1), symbols[*rc::gen::inRange<size_t>(0, symbols.size())]);
    default: return gen_expression(symbols, depth + 1) * *rc::gen::inRange<int64_t>(-4, 5);
  }
}

// Raw trees: any shape make_binary can build, constants of any sign.
std::shared_ptr<SymNode> gen_raw_tree(const std::vector<SymInt>& symbols, int depth) {
  const int choice = *rc::gen::inRange(0, depth > 3 ? 2 : 7);
  if (choice == 0) {
    const int64_t special[] = {0, 1, -1, 2, -2, 7, -7, INT64_MAX, INT64_MIN};
    return SymNode::make_constant(*rc::gen::elementOf(std::vector<int64_t>(std::begin(special), std::end(special))));
  }
  if (choice == 1) return symbols[*rc::gen::inRange<size_t>(0, symbols.size())].node();
  const SymNode::Kind kinds[] = {SymNode::Kind::Add, SymNode::Kind::Sub, SymNode::Kind::Mul, SymNode::Kind::FloorDiv,
                                 SymNode::Kind::Mod};
  return SymNode::make_binary(kinds[choice - 2], gen_raw_tree(symbols, depth + 1), gen_raw_tree(symbols, depth + 1));
}

// Every IValue kind a graph can load (no tensors), nested lists included.
IValue gen_constant(const std::vector<SymInt>& symbols, int depth) {
  switch (*rc::gen::inRange(0, depth > 1 ? 17 : 20)) {
    case 0: return IValue();
    case 1: return *rc::gen::arbitrary<int64_t>();
    case 2: return *rc::gen::arbitrary<double>();
    case 3: {
      const double special[] = {0.0, -0.0, 0.1, 1.0, 1e300, 5e-324, HUGE_VAL, -HUGE_VAL, std::nan("")};
      return *rc::gen::elementOf(std::vector<double>(std::begin(special), std::end(special)));
    }
    case 4: return *rc::gen::arbitrary<bool>();
    case 5: return complex128(*rc::gen::arbitrary<double>(), *rc::gen::arbitrary<double>());
    case 6: return static_cast<DType>(*rc::gen::inRange(0, kNumDTypes));
    case 7: return *rc::gen::elementOf(std::vector<Device>{Device::cpu(), Device::cuda(0), Device::cuda(3), Device::meta()});
    case 8: return static_cast<Layout>(*rc::gen::inRange(0, 4));
    case 9: return static_cast<MemoryFormat>(*rc::gen::inRange(0, 4));
    case 10: return *rc::gen::arbitrary<std::string>();
    case 11: return *rc::gen::arbitrary<std::vector<int64_t>>();
    case 12: return *rc::gen::container<std::vector<double>>(rc::gen::arbitrary<double>());
    case 13: return *rc::gen::arbitrary<std::vector<bool>>();
    case 14: return IValue(gen_expression(symbols, 0));
    case 15: return IValue(SymInt(gen_raw_tree(symbols, 0)));
    case 16: return std::vector<std::optional<Tensor>>(*rc::gen::inRange<size_t>(0, 3), std::nullopt);
    default: {
      std::vector<IValue> elements;
      const int n = *rc::gen::inRange(0, 4);
      for (int i = 0; i < n; ++i) elements.push_back(gen_constant(symbols, depth + 1));
      return IValue::list(std::move(elements));
    }
  }
}

TensorMeta gen_meta(const std::vector<SymInt>& symbols) {
  std::vector<SymInt> sizes;
  const int dims = *rc::gen::inRange(0, 4);
  for (int d = 0; d < dims; ++d) {
    sizes.push_back(*rc::gen::inRange(0, 3) == 0 ? gen_expression(symbols, 2) : SymInt(*rc::gen::inRange<int64_t>(0, 5)));
  }
  TensorMeta m = meta(sizes, static_cast<DType>(*rc::gen::inRange(0, kNumDTypes)));
  if (*rc::gen::inRange(0, 4) == 0) {
    for (auto& s : m.strides) s = gen_expression(symbols, 2);
  }
  if (*rc::gen::inRange(0, 4) == 0) m.storage_offset = gen_expression(symbols, 2);
  if (*rc::gen::inRange(0, 4) == 0) m.device = Device::cuda(*rc::gen::inRange<int16_t>(0, 4));
  m.requires_grad = *rc::gen::inRange(0, 4) == 0;
  return m;
}

Graph gen_graph(const std::vector<SymInt>& symbols) {
  Graph g;
  const int inputs = *rc::gen::inRange(0, 4);
  for (int i = 0; i < inputs; ++i) g.inputs.push_back(g.add_value(gen_meta(symbols), "in" + std::to_string(i)));
  auto gen_ref = [&]() { return Ref{*rc::gen::inRange<ValueId>(0, static_cast<ValueId>(g.values.size()))}; };
  auto gen_arg = [&]() -> Arg {
    const int choice = *rc::gen::inRange(0, 4);
    if (choice == 0 && !g.values.empty()) return gen_ref();
    if (choice == 1 && !g.values.empty()) {
      RefList l;
      l.optional_items = *rc::gen::arbitrary<bool>();
      const int n = *rc::gen::inRange(0, 4);
      for (int i = 0; i < n; ++i) {
        if (l.optional_items && *rc::gen::inRange(0, 3) == 0) l.items.push_back(std::nullopt);
        else l.items.push_back(gen_ref());
      }
      return l;
    }
    return gen_constant(symbols, 0);
  };
  const int nodes = *rc::gen::inRange(0, 5);
  for (int i = 0; i < nodes; ++i) {
    Node n;
    n.op = *rc::gen::elementOf(std::vector<std::string>{"aten::mul.Tensor", "aten::split.Tensor", "test::f",
                                                         "wrap_kernel::<k>", "odd op(name)"});
    const int args = *rc::gen::inRange(0, 5);
    for (int a = 0; a < args; ++a) n.args.push_back(gen_arg());
    const int returns = *rc::gen::inRange(0, 3);
    for (int r = 0; r < returns; ++r) {
      const size_t size = *rc::gen::elementOf(std::vector<size_t>{1, 1, 0, 2});
      n.return_sizes.push_back(size);
      for (size_t k = 0; k < size; ++k) {
        const bool tensor = *rc::gen::inRange(0, 5) != 0;
        const bool named = *rc::gen::inRange(0, 6) == 0;
        n.outputs.push_back(g.add_value(tensor ? std::optional<TensorMeta>(gen_meta(symbols)) : std::nullopt,
                                        named ? "v" + std::to_string(g.values.size()) : ""));
      }
    }
    n.functional = *rc::gen::inRange(0, 4) == 0;
    if (n.functional) n.outputs.push_back(g.add_value(gen_meta(symbols)));
    g.nodes.push_back(std::move(n));
  }
  if (*rc::gen::inRange(0, 4) == 0) g.add_value(gen_meta(symbols));  // a value nothing defines
  const int outputs = *rc::gen::inRange(0, 3);
  for (int i = 0; i < outputs; ++i) g.outputs.push_back(gen_arg());
  if (inputs > 0 && !g.values.empty() && *rc::gen::arbitrary<bool>()) g.write_backs.push_back({0, gen_ref()});
  const int guards = *rc::gen::inRange(0, 3);
  for (int i = 0; i < guards; ++i) {
    g.guards.push_back({gen_expression(symbols, 1), gen_expression(symbols, 1),
                        static_cast<CompareOp>(*rc::gen::inRange(0, 6)), ""});
  }
  if (inputs > 0) g.symbol_sources.push_back({"s0", 0, 0});
  return g;
}

RC_GTEST_FIXTURE_PROP(ExportTest, RandomGraphsRoundTrip, ()) {
  const Graph g = gen_graph({s0, s1, u0});
  const std::string text = export_graph(g);
  Graph loaded;
  try {
    loaded = load_graph(text);
  } catch (const Error& e) {
    RC_FAIL(std::string(e.what()) + "\n" + text);
  }
  RC_ASSERT(loaded.to_string() == text);
  RC_ASSERT(loaded.values.size() == g.values.size());
  for (size_t i = 0; i < g.values.size(); ++i) {
    RC_ASSERT(loaded.values[i].name == g.values[i].name);
    RC_ASSERT(loaded.values[i].tensor.has_value() == g.values[i].tensor.has_value());
  }
}

RC_GTEST_FIXTURE_PROP(ExportTest, ExpressionsPrintBackTheSame, ()) {
  std::vector<SymInt> symbols = {s0, s1, u0};
  Graph g;
  const SymInt canonical = gen_expression(symbols, 0);
  const SymInt raw(gen_raw_tree(symbols, 0));
  g.outputs = {IValue(canonical), IValue(raw), IValue::list({IValue(canonical), IValue(raw)})};
  g.guards.push_back({canonical, raw, CompareOp::NE, ""});
  const std::string text = export_graph(g);
  try {
    RC_ASSERT(load_graph(text).to_string() == text);
  } catch (const Error& e) {
    RC_FAIL(std::string(e.what()) + "\n" + text);
  }
}

// A text that loads is a fixed point after one export.
void expect_only_errors(const std::string& text) {
  std::string once;
  try {
    once = export_graph(load_graph(text));
  } catch (const Error&) {
    return;
  }
  try {
    RC_ASSERT(export_graph(load_graph(once)) == once);
  } catch (const Error& e) {
    RC_FAIL(std::string("the export of a loaded text does not load: ") + e.what() + "\n" + once);
  }
}

RC_GTEST_PROP(Export, GarbageOnlyThrowsErrors, ()) {
  const std::string alphabet = "graph(%x: float32[s0, 3]){}=-+*/ %_\"\\,.:|#<>!0123456789\nreturnNoneTrue[]()";
  const std::string text = *rc::gen::oneOf(
      rc::gen::arbitrary<std::string>(),
      rc::gen::container<std::string>(rc::gen::elementOf(alphabet)),
      rc::gen::map(rc::gen::container<std::string>(rc::gen::elementOf(alphabet)),
                   [](std::string s) { return "graph():\n  " + s; }));
  expect_only_errors(text);
}

RC_GTEST_FIXTURE_PROP(ExportTest, MutatedExportsOnlyThrowErrors, ()) {
  std::string text = export_graph(*rc::gen::oneOf(rc::gen::just(mul_sum()), rc::gen::exec([&] {
    return gen_graph({s0, s1, u0});
  })));
  const int mutations = *rc::gen::inRange(1, 4);
  for (int m = 0; m < mutations && !text.empty(); ++m) {
    const size_t at = *rc::gen::inRange<size_t>(0, text.size());
    switch (*rc::gen::inRange(0, 5)) {
      case 0: text.resize(at); break;                                           // truncate
      case 1: text.erase(at, *rc::gen::inRange<size_t>(1, 8)); break;           // delete
      case 2: text.insert(at, 1, *rc::gen::arbitrary<char>()); break;           // insert
      case 3: text[at] = *rc::gen::elementOf(std::string("%[](),: -*\"#|{}=0s\n")); break;
      default: text.insert(at, text.substr(at, *rc::gen::inRange<size_t>(1, 40))); break;  // duplicate
    }
  }
  expect_only_errors(text);
}

// ---- captured programs

TEST(ExportCaptured, ACapturedGraphLoadsAndRunsTheSame) {
  auto program = [](const Stack& in) {
    Tensor m = call1("aten::mul.Tensor", {in[0], in[1]});
    Tensor s = call1("aten::sum.dim_IntList", {m, std::vector<int64_t>{1}, true, IValue()});
    return Stack{IValue(call1("aten::add.Tensor", {m, s, 2}))};
  };
  Graph g = capture(program, {iota({4, 3}), iota({4, 3}, 2)}, {.registry = &registry(), .input_names = {"x", "y"}});
  const std::string text = export_graph(g);
  Graph loaded = load_graph(text);
  EXPECT_EQ(loaded.to_string(), text);
  expect_same_graph(g, loaded);
  // (The reference's fake kernels compute concrete sizes: the graph replays at the captured sizes.)
  for (double start : {0.5, -3.0}) {
    Tensor x = iota({4, 3}, start), y = iota({4, 3}, start * 2);
    const Stack a = run_graph(g, {x, y}, registry());
    const Stack b = run_graph(loaded, {x, y}, registry());
    EXPECT_EQ(a.at(0).to_tensor().to_vector<double>(), b.at(0).to_tensor().to_vector<double>());
    EXPECT_EQ(b.at(0).to_tensor().to_vector<double>(), program({x, y})[0].to_tensor().to_vector<double>());
  }
}

TEST(ExportCaptured, AFunctionalizedGraphKeepsItsWriteBack) {
  // x.add_(y); return x * y
  auto program = [](const Stack& in) {
    Tensor x = call1("aten::add_.Tensor", {in[0], in[1], 1});
    return Stack{IValue(call1("aten::mul.Tensor", {x, in[1]}))};
  };
  Tensor x = iota({3}), y = iota({3}, 10);
  Graph f = functionalize(capture(program, {x.clone(), y}, {.registry = &registry()}), registry());
  const std::string text = export_graph(f);
  EXPECT_THAT(text, HasSubstr("functional aten::add_.Tensor("));
  EXPECT_THAT(text, HasSubstr("  write_back %x0 <- %"));
  Graph loaded = load_graph(text);
  EXPECT_EQ(loaded.to_string(), text);
  Tensor ax = x.clone(), bx = x.clone();
  const Stack a = run_graph(f, {ax, y}, registry());
  const Stack b = run_graph(loaded, {bx, y}, registry());
  EXPECT_EQ(a.at(0).to_tensor().to_vector<double>(), b.at(0).to_tensor().to_vector<double>());
  EXPECT_EQ(ax.to_vector<double>(), bx.to_vector<double>());
}

TEST(ExportCaptured, AGuardOfALoadedGraphStillGuards) {
  Graph g = capture([](const Stack& in) { return Stack{IValue(call1("aten::mul.Tensor", {in[0], in[0]}))}; },
                    {iota({4, 3})}, {.registry = &registry()});
  g.guards.push_back({g.value(0).tensor->sizes[0], 3, CompareOp::GT, "s0 > 3"});
  Graph loaded = load_graph(export_graph(g));
  EXPECT_NO_THROW(run_graph(loaded, {iota({4, 3})}, registry()));
  EXPECT_THROW(run_graph(loaded, {iota({2, 3})}, registry()), GuardError) << "checked before any node runs";
}

}  // namespace
}  // namespace opconform::compile
