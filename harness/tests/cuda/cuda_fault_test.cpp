// Note [A CUDA fault ends the worker]: a kernel that traps loses its process's CUDA context. The
// check it ran in is crashed, saying so; the case's other checks and the other cases run in new
// workers and are not failed by the lost context ("cudaMalloc failed: unspecified launch failure").
// Needs a GPU (scripts/test-gpu.sh); skips with the reason elsewhere.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "opconform/core/cuda.h"
#include "opconform/harness/cli.h"
#include "opconform/reports/writers.h"

namespace opconform::harness {
namespace {

using reports::Outcome;

TEST(CudaFault, TheFaultingCheckCrashesAndTheOthersRunInNewWorkers) {
  // Asked in a child: this process forks the workers, which must find CUDA uninitialised.
  if (!cuda::is_available_in_a_child()) GTEST_SKIP() << "no usable CUDA device (asked in a child process)";
  const auto dir = std::filesystem::temp_directory_path() / ("opconform_cuda_fault_" + std::to_string(getpid()));
  // -j 1: every case would share one process but for the fault's retirement.
  EXPECT_EQ(opconform_main({"check", "--library", OPCONFORM_CUDA_FAULT_PLUGIN, "--device", "cuda", "--jobs", "1",
                            "--samples", "3", "--checks", "reference_agreement,determinism,stride_invariance",
                            "--report-dir", dir.string()}),
            1);
  std::ifstream in(dir / "report.json");
  const auto report = reports::report_from_json(std::string(std::istreambuf_iterator<char>(in), {}));
  std::filesystem::remove_all(dir);
  int crashed = 0, passed = 0;
  for (const auto& r : report.results) {
    if (r.dtype == "float32") {  // the kernel traps: each check is crashed by its own fault
      EXPECT_EQ(r.outcome, Outcome::crashed) << r.check << ": " << r.message;
      EXPECT_NE(r.message.find("a CUDA kernel faulted in this check"), std::string::npos) << r.message;
      EXPECT_EQ(r.message.find("initialization error"), std::string::npos) << "a worker inherited CUDA: " << r.message;
      ++crashed;
    } else {  // float64 runs after float32's faults, each in a new worker: untouched by them
      EXPECT_EQ(r.outcome, Outcome::passed) << r.dtype << " " << r.check << ": " << r.message;
      ++passed;
    }
  }
  EXPECT_EQ(crashed, 3);
  EXPECT_EQ(passed, 3);
}

// Note [A CUDA fault ends the search]: a kernel that is wrong on larger samples and traps on the
// 1- and 2-element ones a shrink reaches. The failure is searched for a smaller sample; the fault
// on one ends the search: the result names the fault and the sample it happened on, not the
// allocations that fail on a lost context ("the case could not run: ... cudaMallocAsync failed").
TEST(CudaFault, AFaultWhileShrinkingNamesTheSampleNotTheLostContext) {
  if (!cuda::is_available_in_a_child()) GTEST_SKIP() << "no usable CUDA device (asked in a child process)";
  const auto dir = std::filesystem::temp_directory_path() / ("opconform_cuda_small_fault_" + std::to_string(getpid()));
  EXPECT_EQ(opconform_main({"check", "--library", OPCONFORM_CUDA_SMALL_FAULT_PLUGIN, "--device", "cuda", "--jobs", "1",
                            "--samples", "20", "--dtype", "float32,float64", "--checks",
                            "reference_agreement,determinism", "--report-dir", dir.string()}),
            1);
  std::ifstream in(dir / "report.json");
  const auto report = reports::report_from_json(std::string(std::istreambuf_iterator<char>(in), {}));
  std::filesystem::remove_all(dir);
  int faulted = 0;
  for (const auto& r : report.results) {
    SCOPED_TRACE(r.dtype + " " + r.check + ": " + r.message);
    EXPECT_EQ(r.message.find("could not run"), std::string::npos);
    EXPECT_EQ(r.message.find("sample builder"), std::string::npos) << "a lost context's allocation, not the fault";
    if (r.check != "reference_agreement") continue;
    // The wrong results make it fail; whichever sample met the trap first ends it, crashed.
    EXPECT_EQ(r.outcome, Outcome::crashed);
    EXPECT_NE(r.message.find("a CUDA kernel faulted on this sample"), std::string::npos);
    ASSERT_TRUE(r.minimal_input.has_value());
    EXPECT_NE(r.minimal_input->find("float"), std::string::npos) << *r.minimal_input;
    ++faulted;
  }
  EXPECT_EQ(faulted, 2);
}

}  // namespace
}  // namespace opconform::harness
