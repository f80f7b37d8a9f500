// Call overhead of a trivial custom op (custom_op + the default autograd, fake and alias-check
// machinery every custom op gets) against the same function called directly.
//   overhead = BM_custom_op_call - BM_direct_call
// Goal (issue 3): under 100 ns; PyTorch's Python custom_op costs about 21 us a call on a CPU
// tensor (torch 2.11).
#include <benchmark/benchmark.h>

#include "opconform/core/custom_op.h"

namespace {

using namespace opconform;

__attribute__((noinline)) Tensor scale_kernel(const Tensor& x, double factor) {
  (void)factor;
  return x.clone();  // a new tensor, as a functional custom op must return
}

void BM_direct_call(benchmark::State& state) {
  Tensor x = ones({4});
  for (auto _ : state) {
    benchmark::DoNotOptimize(scale_kernel(x, 2.0));
  }
}
BENCHMARK(BM_direct_call);

void BM_custom_op_call(benchmark::State& state) {
  Registry registry;
  auto op = custom_op("bench::scale", scale_kernel, {.registry = &registry}, {"x", "factor"});
  Tensor x = ones({4});
  for (auto _ : state) {
    benchmark::DoNotOptimize(op(x, 2.0));
  }
}
BENCHMARK(BM_custom_op_call);

}  // namespace

BENCHMARK_MAIN();
