// Dispatcher overhead: one-tensor identity op called directly, through opconform's dispatcher
// (unboxed and boxed), and — when libtorch is installed — through libtorch's dispatcher, so
// every ratio comes from one run on one machine.
//
//   overhead(unboxed) = BM_dispatch_unboxed - BM_direct_call
//   overhead(boxed)   = BM_dispatch_boxed   - BM_direct_call
//   libtorch's        = BM_libtorch_{unboxed,boxed} - BM_libtorch_direct_call
// Goal (issue 2): opconform's overhead at most 0.6x libtorch's. ratio_table.py prints them.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <string>
#include <thread>

#include "opconform/core/library.h"
#include "opconform/core/registry.h"
#include "opconform/core/tensor.h"

#ifdef OPCONFORM_BENCH_WITH_TORCH
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>
#endif

namespace {

using namespace opconform;

// noinline: the dispatcher cannot inline a kernel either; the baseline pays the same call.
__attribute__((noinline)) Tensor identity(const Tensor& x) { return x; }

struct OpconformSetup {
  Registry registry;
  Library lib{"bench", LibraryKind::DEF, std::nullopt, registry};
  OperatorHandle op;
  OpconformSetup() : op(define()) {}
  OperatorHandle define() {
    lib.define("identity(Tensor self) -> Tensor");
    lib.impl("identity", identity, DispatchKey::CPU);
    return registry.get("bench::identity");
  }
};

OpconformSetup& setup() {
  static OpconformSetup s;
  return s;
}

void BM_direct_call(benchmark::State& state) {
  Tensor x = ones({4});
  for (auto _ : state) {
    benchmark::DoNotOptimize(identity(x));
  }
}
BENCHMARK(BM_direct_call);

void BM_dispatch_unboxed(benchmark::State& state) {
  Tensor x = ones({4});
  auto op = setup().op.typed<Tensor(const Tensor&)>();
  for (auto _ : state) {
    benchmark::DoNotOptimize(op.call(x));
  }
}
BENCHMARK(BM_dispatch_unboxed);

void BM_dispatch_boxed(benchmark::State& state) {
  Tensor x = ones({4});
  const OperatorHandle& op = setup().op;
  Stack stack;
  stack.reserve(4);
  for (auto _ : state) {
    stack.clear();
    stack.emplace_back(x);
    op.call_boxed(stack);
    benchmark::DoNotOptimize(stack.back());
  }
}
BENCHMARK(BM_dispatch_boxed);

#ifdef OPCONFORM_BENCH_WITH_TORCH

__attribute__((noinline)) at::Tensor torch_identity(const at::Tensor& x) { return x; }

struct TorchSetup {
  torch::Library lib{torch::Library::DEF, "opconform_bench", c10::nullopt, __FILE__, __LINE__};
  torch::Library impl{torch::Library::IMPL, "opconform_bench", c10::DispatchKey::CPU, __FILE__, __LINE__};
  c10::OperatorHandle op;
  TorchSetup() : op(define()) {}
  c10::OperatorHandle define() {
    lib.def("identity(Tensor self) -> Tensor");
    impl.impl("identity", TORCH_FN(torch_identity));
    return c10::Dispatcher::singleton().findSchemaOrThrow("opconform_bench::identity", "");
  }
};

TorchSetup& torch_setup() {
  static TorchSetup s;
  return s;
}

void BM_libtorch_direct_call(benchmark::State& state) {
  at::Tensor x = at::ones({4});
  for (auto _ : state) {
    benchmark::DoNotOptimize(torch_identity(x));
  }
}
BENCHMARK(BM_libtorch_direct_call);

void BM_libtorch_unboxed(benchmark::State& state) {
  at::Tensor x = at::ones({4});
  auto op = torch_setup().op.typed<at::Tensor(const at::Tensor&)>();
  for (auto _ : state) {
    benchmark::DoNotOptimize(op.call(x));
  }
}
BENCHMARK(BM_libtorch_unboxed);

void BM_libtorch_boxed(benchmark::State& state) {
  at::Tensor x = at::ones({4});
  const c10::OperatorHandle& op = torch_setup().op;
  torch::jit::Stack stack;
  stack.reserve(4);
  for (auto _ : state) {
    stack.clear();
    stack.emplace_back(x);
    op.callBoxed(&stack);
    benchmark::DoNotOptimize(stack.back());
  }
}
BENCHMARK(BM_libtorch_boxed);

#endif

}  // namespace

// OPCONFORM_BENCH_THREADED=1 starts (and joins) a thread first, so the process is multi-threaded
// as a harness worker is (glibc and libstdc++ count shared_ptr atomically from then on; opconform's
// tensor counts stay plain on the owning thread either way: Note [Biased reference counts]).
int main(int argc, char** argv) {
  if (const char* threaded = std::getenv("OPCONFORM_BENCH_THREADED"); threaded != nullptr && std::string(threaded) == "1")
    std::thread([] {}).join();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
