// Graph capture and replay of a 20-op chain of reference operators (issue 7).
//   BM_chain_eager     baseline: the chain called op by op on real tensors
//   BM_chain_capture   capture (fake tensors, symbolic sizes) + functionalize, once per iteration
//   BM_chain_replay    run_graph of the captured graph on real tensors
// The ratios replay / eager (the interpreter's overhead per op) and capture / eager (what a
// compile costs in eager calls) are the figures; sizes 64x64 keep the kernels small, so the
// overhead shows.
#include <benchmark/benchmark.h>

#include "opconform/compile/capture.h"
#include "opconform/compile/functionalize.h"
#include "opconform/compile/interpreter.h"
#include "opconform/reference/reference.h"

namespace {

using namespace opconform;

Registry& registry() {
  static Registry r;
  static auto reg = reference::register_reference_ops(r);
  return r;
}

Tensor call1(const char* op, Stack args) {
  registry().get(op).call_boxed(args);
  return args[0].to_tensor();
}

// 20 ops: 5 rounds of mul, add, sin, relu over two inputs.
Stack chain(const Stack& in) {
  Tensor x = in[0].to_tensor();
  const Tensor& y = in[1].to_tensor();
  for (int round = 0; round < 5; ++round) {
    x = call1("aten::mul.Tensor", {x, y});
    x = call1("aten::add.Tensor", {x, y, 1});
    x = call1("aten::sin", {x});
    x = call1("aten::relu", {x});
  }
  return {IValue(x)};
}

Stack inputs() { return {IValue(ones({64, 64}, TensorOptions(DType::Float32))), IValue(full({64, 64}, 0.5, TensorOptions(DType::Float32)))}; }

void BM_chain_eager(benchmark::State& state) {
  const Stack in = inputs();
  for (auto _ : state) benchmark::DoNotOptimize(chain(in));
}

void BM_chain_capture(benchmark::State& state) {
  const Stack in = inputs();
  for (auto _ : state) {
    compile::Graph g = compile::functionalize(compile::capture(chain, in, {.registry = &registry()}), registry());
    benchmark::DoNotOptimize(g.nodes.size());
  }
}

void BM_chain_replay(benchmark::State& state) {
  const Stack in = inputs();
  const compile::Graph g = compile::functionalize(compile::capture(chain, in, {.registry = &registry()}), registry());
  for (auto _ : state) benchmark::DoNotOptimize(compile::run_graph(g, in, registry()));
}

BENCHMARK(BM_chain_eager);
BENCHMARK(BM_chain_capture);
BENCHMARK(BM_chain_replay);

}  // namespace

BENCHMARK_MAIN();
