// What the worker sandbox costs (issue 16; Note [The worker sandbox]): the same conformance run in
// workers with every layer, and with a process group only (--no-sandbox), interleaved.
//   BM_vendor_check/sandbox:{1,0}   `opconform check` of the vendor example plugin, 10 samples
//   BM_reference_run/sandbox:{1,0}  `opconform run` over aten::a* (the main job's first ops)
// Goal: sandboxed / plain <= 1.10 for each (ratio_table.py's fastest repetitions).
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "opconform/harness/cli.h"

namespace {

// Runs opconform quietly (its console output goes to /dev/null) and without report files.
void run_quietly(benchmark::State& state, std::vector<std::string> args) {
  if (state.range(0) == 0) args.push_back("--no-sandbox");
  for (const char* f : {"--json", "", "--junit", "", "--markdown", "", "--html", ""}) args.push_back(f);
  std::fflush(stderr);
  const int saved = ::dup(STDERR_FILENO);
  std::FILE* null = std::fopen("/dev/null", "w");
  ::dup2(::fileno(null), STDERR_FILENO);
  for (auto _ : state) benchmark::DoNotOptimize(opconform::harness::opconform_main(args));
  std::fflush(stderr);
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  std::fclose(null);
}

void BM_vendor_check(benchmark::State& state) {
  run_quietly(state, {"check", "--library", OPCONFORM_VENDOR_PLUGIN, "--samples", "10", "--jobs", "2"});
}
BENCHMARK(BM_vendor_check)->ArgName("sandbox")->Arg(1)->Arg(0)->Unit(benchmark::kMillisecond)->Iterations(3);

void BM_reference_run(benchmark::State& state) {
  run_quietly(state, {"run", "--ops", "aten::a*", "--samples", "10", "--jobs", "2"});
}
BENCHMARK(BM_reference_run)->ArgName("sandbox")->Arg(1)->Arg(0)->Unit(benchmark::kMillisecond)->Iterations(2);

}  // namespace

BENCHMARK_MAIN();
