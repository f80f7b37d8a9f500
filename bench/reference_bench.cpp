// The whole reference conformance run (issue 5): every reference operator, on every dtype it
// accepts, through every check on the CI sample count (50 generated samples), as
// reference/tests/reference_conformance_test.cpp runs it.
//   BM_reference_eager                  baseline: the same generated samples, each op called once per sample
//   BM_reference_conformance            the full run, in this process (`opconform run --jobs 0`)
//   BM_reference_conformance_isolated   the same run in one reused worker process (`--jobs 1`)
// Goal: the full run under 60 s on the 2-core CI machine. The ratio conformance / eager is the
// cost of checking relative to just running the ops on the same inputs; isolated / in-process is
// the cost of crash isolation (one worker process, reused while healthy).
#include <benchmark/benchmark.h>

#include <functional>
#include <optional>

#include "opconform/conformance/check.h"
#include "opconform/conformance/generate.h"
#include "opconform/conformance/opcheck.h"
#include "opconform/reference.h"
#include "opconform/conformance/case_spec.h"
#include "opconform/harness/conformance_run.h"

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
  std::vector<Case> out;
  for (const auto& info : reference::reference_op_infos(registry())) {
    for (DType d : info.dtypes) {
      GenerateSpec spec = conformance::case_spec(info.name, d, kSamples);
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
      for (Sample& s : generate_samples(op, c.spec)) {
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

// The main job's run of the reference (no report files), in-process or in `jobs` workers;
// large_percent set: that share of large-tier samples instead of the case spec's.
void run_reference(benchmark::State& state, int jobs, std::optional<int> large_percent = std::nullopt) {
  size_t results = 0, failing = 0;
  for (auto _ : state) {
    harness::RunRequest request;
    request.plan.samples = kSamples;
    request.plan.large_percent = large_percent;
    request.jobs = jobs;
    request.write_reports = false;
    auto report = harness::run_conformance(request).report;
    results = report.results.size();
    failing = report.count(reports::Outcome::failed) + report.count(reports::Outcome::crashed);
  }
  state.counters["results"] = static_cast<double>(results);
  state.counters["failing"] = static_cast<double>(failing);
}

void BM_reference_conformance(benchmark::State& state) { run_reference(state, 0); }
// The baseline of the large tier's cost, in the same run: the same cases without it.
void BM_reference_conformance_no_large_tier(benchmark::State& state) { run_reference(state, 0, 0); }
void BM_reference_conformance_isolated(benchmark::State& state) { run_reference(state, 1); }

BENCHMARK(BM_reference_eager)->Unit(benchmark::kSecond)->Iterations(1);
BENCHMARK(BM_reference_conformance)->Unit(benchmark::kSecond)->Iterations(1);
BENCHMARK(BM_reference_conformance_no_large_tier)->Unit(benchmark::kSecond)->Iterations(1);
BENCHMARK(BM_reference_conformance_isolated)->Unit(benchmark::kSecond)->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
