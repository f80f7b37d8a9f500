// opcheck's cost: every check of issue 4 on one sample of a 1,000-element elementwise op.
//   BM_opcheck_per_sample   time per sample (all checks)
//   opcheck_bench --first-call   prints the time of the first opcheck call in a fresh process
// Goal (issue 4): under 1 ms per sample, first call under 50 ms (PyTorch 2.11: 30-70 ms per op
// per sample after a 9 s first call).
#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <iostream>

#include "opconform/conformance/opcheck.h"
#include "opconform/core.h"

namespace {

using namespace opconform;
using namespace opconform::conformance;

// sin for float32 and float64 (dtype_consistency runs the sample in float64 too).
Tensor sin_of(const Tensor& x) {
  Tensor in = x.contiguous();
  Tensor out = empty_like(x);
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T>) {
      const T* p = in.const_data_ptr<T>();
      T* o = out.mutable_data_ptr<T>();
      for (int64_t i = 0; i < x.numel(); ++i) o[i] = std::sin(p[i]);
    } else {
      throw Error(ErrorCode::kInvalidArgument, "bench::sin: x must be float32 or float64");
    }
  });
  return out;
}

struct Setup {
  Registry registry;
  RegistrationHandle fallbacks = install_builtin_fallbacks(registry);
  std::optional<CustomOpDef> op;
  Sample sample;
  OpcheckOptions options;

  Setup() {
    op = custom_op("bench::sin", sin_of, {.registry = &registry}, {"x"});
    op->register_fake([](const Tensor& x) { return empty_like(x); });
    op->register_autograd(
        [](autograd::AutogradContext& ctx, const std::vector<Tensor>& g) {
          Tensor x = ctx.saved_tensors().at(0).contiguous().to(g[0].dtype());
          Tensor gc = g[0].contiguous();
          Tensor out = empty_like(x);
          visit_dtype(x.dtype(), [&](auto tag) {
            using T = typename decltype(tag)::type;
            if constexpr (std::is_floating_point_v<T>) {
              for (int64_t i = 0; i < x.numel(); ++i)
                out.mutable_data_ptr<T>()[i] = gc.const_data_ptr<T>()[i] * std::cos(x.const_data_ptr<T>()[i]);
            }
          });
          return std::vector<Tensor>{out};
        },
        [](autograd::AutogradContext& ctx, const Stack& in, const Stack&) { ctx.save_for_backward({in[0].to_tensor()}); });
    Tensor x = empty({1000});
    for (int64_t i = 0; i < 1000; ++i) x.set({i}, Scalar(std::sin(0.37 * i)));
    sample = Sample({IValue(x)});
    options.test_utils = check_names();
    // The cost is measured, not the verdict: test_aot_dispatch_dynamic fails on this op's
    // data-reading backward, which must not end the benchmark.
    options.raise_exception = false;
  }
};

void BM_opcheck_per_sample(benchmark::State& state) {
  static Setup setup;
  for (auto _ : state) {
    auto results = opcheck(setup.op->handle(), {setup.sample}, setup.options, setup.registry);
    benchmark::DoNotOptimize(results);
  }
}
BENCHMARK(BM_opcheck_per_sample)->Unit(benchmark::kMicrosecond);

// The same with x requiring grad: test_autograd_registration, gradcheck and gradgradcheck run
// too (fast mode at this size: the full 1,000 x 1,000 Jacobian of slow mode took 170 ms).
void BM_opcheck_per_sample_requires_grad(benchmark::State& state) {
  static Setup setup;
  static Sample sample = [] {
    Tensor x = setup.sample.args[0].to_tensor().to(DType::Float64).detach();
    x.set_requires_grad(true);
    return Sample({IValue(x)});
  }();
  for (auto _ : state) {
    auto results = opcheck(setup.op->handle(), {sample}, setup.options, setup.registry);
    benchmark::DoNotOptimize(results);
  }
}
BENCHMARK(BM_opcheck_per_sample_requires_grad)->Unit(benchmark::kMillisecond);

// opcheck(op, GenerateSpec) with every check over 50 generated samples, per sample: with
// GenerateSpec's defaults (the large tier at 12%, inputs that require grad) and, as the baseline
// in the same run, with the large tier off (range(0) is large_percent).
void BM_opcheck_generated_per_sample(benchmark::State& state) {
  static Setup setup;
  GenerateSpec spec;
  spec.count = 50;
  spec.seed = 7;
  spec.large_percent = static_cast<int>(state.range(0));
  const OpcheckOptions& options = setup.options;
  for (auto _ : state) {
    auto results = opcheck(setup.op->handle(), spec, options, setup.registry);
    benchmark::DoNotOptimize(results);
  }
  state.SetItemsProcessed(state.iterations() * spec.count);
}
BENCHMARK(BM_opcheck_generated_per_sample)->Arg(0)->Arg(GenerateSpec{}.large_percent)->Unit(benchmark::kMillisecond);

// One check alone on the 1,000-element sample (issue 15's checks; determinism, two plain calls on
// clones, is the baseline in the same run): range(0) indexes kSingleChecks.
constexpr const char* kSingleChecks[] = {"determinism", "memory_safety", "thread_safety"};
void BM_check_per_sample(benchmark::State& state) {
  static Setup setup;
  const char* name = kSingleChecks[state.range(0)];
  OpcheckOptions options = setup.options;
  options.test_utils = {name};
  state.SetLabel(name);
  for (auto _ : state) {
    auto results = opcheck(setup.op->handle(), {setup.sample}, options, setup.registry);
    if (!all_ok(results)) state.SkipWithError((std::string(name) + " did not pass: " + summarize(results)).c_str());
    benchmark::DoNotOptimize(results);
  }
}
BENCHMARK(BM_check_per_sample)->DenseRange(0, 2)->Unit(benchmark::kMicrosecond);

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--first-call") == 0) {
      auto start = std::chrono::steady_clock::now();
      Setup setup;
      auto results = opcheck(setup.op->handle(), {setup.sample}, setup.options, setup.registry);
      double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      std::cout << "first opcheck call (setup included): " << ms << " ms\n" << summarize(results);
      return all_ok(results) ? 0 : 1;
    }
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
