// Note [Tracing the CUDA runtime calls] and Note [The kernels' own time]: with
// OPCONFORM_CUDA_TRACE=1 a CUDA check prints, at exit, the runtime calls the harness made and the
// time the library's kernels took. Needs a GPU (scripts/test-gpu.sh); skips with the reason elsewhere.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <regex>
#include <string>

#include "opconform/core/cuda.h"

namespace {

std::string run(const std::string& command) {
  std::string output;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return output;
  std::array<char, 4096> buffer{};
  while (fgets(buffer.data(), buffer.size(), pipe) != nullptr) output += buffer.data();
  pclose(pipe);
  return output;
}

// The number of calls a trace line reports ("  <name>   12 calls   0.001 s ..."), -1 when absent.
long long calls_of(const std::string& output, const std::string& name) {
  std::smatch m;
  const std::regex line("  " + name + " +([0-9]+) calls +([0-9.]+) s");
  return std::regex_search(output, m, line) ? std::stoll(m[1]) : -1;
}

// One float32 reference_agreement check of the CUDA fixture, in this process's child, with
// `environment` before the program (an assignment, or `env -u NAME`); its output.
std::string check_fixture(const std::string& environment) {
  return run(environment + " '" + OPCONFORM_PROGRAM + "' check --library '" + OPCONFORM_CUDA_PLUGIN +
             "' --device cuda --dtype float32 --jobs 0 --samples 3 --checks reference_agreement "
             "--report-dir '' --json '' --junit '' --markdown '' --html '' 2>&1");
}

TEST(CudaTrace, CountsTheRuntimeCallsAndTimesTheKernels) {
  if (!opconform::cuda::is_available_in_a_child()) GTEST_SKIP() << "no usable CUDA device (asked in a child process)";
  const std::string out = check_fixture("OPCONFORM_CUDA_TRACE=1");
  ASSERT_NE(out.find("opconform CUDA trace"), std::string::npos) << out;
  // Each of the 3 samples calls the kernel once at least, each timed to the device's idle.
  EXPECT_GE(calls_of(out, "library kernels, call to idle"), 3) << out;
  EXPECT_GE(calls_of(out, "cudaMemcpy host to device"), 3) << out;
  EXPECT_GE(calls_of(out, "cudaMemcpy device to host"), 3) << out;
}

TEST(CudaTrace, WithoutTheVariableNothingIsPrinted) {
  if (!opconform::cuda::is_available_in_a_child()) GTEST_SKIP() << "no usable CUDA device (asked in a child process)";
  const std::string out = check_fixture("env -u OPCONFORM_CUDA_TRACE");
  EXPECT_EQ(out.find("opconform CUDA trace"), std::string::npos) << out;
  EXPECT_NE(out.find("1 passed"), std::string::npos) << out;
}

}  // namespace
