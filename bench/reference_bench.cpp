// The whole reference conformance run (issue 5): every reference operator, on every dtype it
// accepts, through every check on the CI sample count (50 generated samples), as
// reference/tests/reference_conformance_test.cpp runs it.
//   BM_reference_eager        baseline: the same generated samples, each op called once per sample
//   BM_reference_conformance  the full run
// Goal: the full run under 60 s on the 2-core CI machine. The ratio conformance / eager is the
// cost of checking relative to just running the ops on the same inputs.
#include <benchmark/benchmark.h>

#include <functional>

#include "opconform/conformance/check.h"
#include "opconform/conformance/generate.h"
#include "opconform/conformance/opcheck.h"
#include "opconform/reference.h"
#include "opconform/reference/self_check.h"

namespace {

using namespace opconform;
using namespace opconform::conformance;

constexpr int kSamples = 50;

Registry& registry() {
  static reference::ReferenceRegistration registration = reference::register_reference_ops(Registry::global());
  return Registry::global();
}

struct Case {
  std::string op;
  DType dtype;
  GenerateSpec spec;
};

std::vector<Case> cases() {
  registry();
  std::vector<Case> out;
  for (const auto& info : reference::reference_op_infos()) {
    for (DType d : info.dtypes) {
      GenerateSpec spec = reference::self_check_spec(info.name, d, kSamples);
      out.push_back({info.name, d, spec});
    }
  }
  return out;
}

void BM_reference_eager(benchmark::State& state) {
  auto all = cases();
  for (auto _ : state) {
    int64_t calls = 0;
    for (const auto& c : all) {
      OperatorHandle op = registry().get(c.op);
      for (Sample& s : generate_samples(op.schema(), c.op, c.spec)) {
        try {
          op.call_boxed(s.args);
        } catch (const Error&) {
          // error-input samples are part of the run too
        }
        ++calls;
      }
    }
    benchmark::DoNotOptimize(calls);
  }
  state.counters["cases"] = static_cast<double>(all.size());
}

void BM_reference_conformance(benchmark::State& state) {
  size_t cases = 0, failing = 0;
  for (auto _ : state) {
    auto run = reference::self_check(registry(), {.samples = kSamples});
    cases = run.size();
    failing = 0;
    for (const auto& c : run) failing += !c.ok();
  }
  state.counters["cases"] = static_cast<double>(cases);
  state.counters["failing_cases"] = static_cast<double>(failing);
}

BENCHMARK(BM_reference_eager)->Unit(benchmark::kSecond)->Iterations(1);
BENCHMARK(BM_reference_conformance)->Unit(benchmark::kSecond)->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
