// Console output (ConsoleListener) on a file and on a terminal, with a fake clock so that the
// rate and ETA are the same on every run; console_options_for on a pseudo-terminal.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <pty.h>
#include <unistd.h>

#include <cstdlib>

#include "opconform/reports/console.h"
#include "support/golden.h"
#include "support/sample_report.h"

namespace opconform::reports {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::sample_report;
using namespace std::chrono_literals;

// The sample's results as the harness reports them: one call per case (op x device x dtype).
std::vector<std::vector<CaseResult>> cases_of(const Report& report) {
  std::vector<std::vector<CaseResult>> cases;
  for (const CaseResult& r : report.results) {
    if (cases.empty() || cases.back().front().op != r.op || cases.back().front().device != r.device ||
        cases.back().front().dtype != r.dtype) {
      cases.emplace_back();
    }
    cases.back().push_back(r);
  }
  return cases;
}

// Runs the sample through a ConsoleListener writing to a temporary file, 1.25 s per case on the
// fake clock, and returns what was written.
std::string console_output(ConsoleOptions options, const Report& report = sample_report()) {
  std::FILE* file = std::tmpfile();
  EXPECT_NE(file, nullptr);
  auto now = std::chrono::steady_clock::time_point{} + 100s;
  ConsoleListener listener(file, options, [&now] { return now; });
  const auto cases = cases_of(report);
  listener.on_run_start(report.info, cases.size());
  for (size_t k = 0; k < cases.size(); ++k) {
    now += 1250ms;
    listener.on_case_done(cases[k], k + 1, cases.size());
  }
  listener.on_run_end(report);
  std::fflush(file);
  std::rewind(file);
  std::string text;
  char buffer[4096];
  for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, file)) > 0;) text.append(buffer, n);
  std::fclose(file);
  return text;
}

TEST(ReportsConsole, PlainOutputMatchesGolden) {
  const std::string text = console_output({.terminal = false, .color = false});
  testing::expect_golden("console_plain.txt", text);
  EXPECT_THAT(text, Not(HasSubstr("\r")));
  EXPECT_THAT(text, Not(HasSubstr("\x1b[")));
}

TEST(ReportsConsole, TerminalOutputMatchesGolden) {
  const std::string text = console_output({.terminal = true, .color = true});
  testing::expect_golden("console_terminal.txt", text);
  EXPECT_THAT(text, HasSubstr("\n\r[ 1/10] 10%  \x1b[1;31m1 failing\x1b[0m  0.8 cases/s  ETA 0:11  aten::add.Tensor float32"
                               "\r[ 2/10] 20%"));
  EXPECT_THAT(text, HasSubstr("\x1b[1;31mFAILED     \x1b[0m aten::add.Tensor gradcheck [cpu, float32]"));
}

TEST(ReportsConsole, PlainOutputNamesEachResultNotOkAndEveryTenthOfTheRun) {
  const std::string text = console_output({});
  EXPECT_THAT(text, HasSubstr("Checking vendor-ops 2.3 <beta> & \"friends\" against reference: 10 cases, 50 samples each\n"));
  EXPECT_THAT(text, HasSubstr("CRASHED     aten::index_put determinism [cpu, int64]: the worker died of signal 11"));
  EXPECT_THAT(text, HasSubstr("            repro: opconform repro --library"));
  EXPECT_THAT(text, HasSubstr("[ 5/10] 50%  1 failing  0.8 cases/s  ETA 0:06"));
  EXPECT_THAT(text, Not(HasSubstr("SKIPPED")));  // skipped is ok
  EXPECT_THAT(text, HasSubstr("12 results in 12.5 s: 4 passed, 3 failed, 1 skipped, 1 unsupported, 1 crashed, "
                              "1 timed_out, 1 mistrusted\n"));
}

// --quiet: no header, no progress, no skips: the results that fail the run, then the summary.
TEST(ReportsConsole, QuietShowsOnlyTheFailuresAndTheVerdict) {
  const std::string text = console_output({.terminal = true, .color = false, .quiet = true});
  EXPECT_EQ(text, "FAILED      aten::add.Tensor gradcheck [cpu, float32]: gradient of 'self' differs at index [2]: "
                  "analytical 1.5, numerical 1.25\n"
                  "            repro: OPCONFORM_SEED=42 opconform repro --library /opt/vendor/lib/libvendor_ops.so --op "
                  "aten::add.Tensor --check gradcheck --device cpu --dtype float32\n"
                  "CRASHED     aten::index_put determinism [cpu, int64]: the worker died of signal 11 (SIGSEGV) in the "
                  "real run\n"
                  "            repro: opconform repro --library /opt/vendor/lib/libvendor_ops.so --op aten::index_put "
                  "--check determinism --device cpu --dtype int64\n"
                  "TIMED_OUT   aten::sort.stable dtype_consistency [cpu, float32]: no answer after 30 s: the kernel hangs\n"
                  "            repro: opconform repro --library /opt/vendor/lib/libvendor_ops.so --op aten::sort.stable "
                  "--check dtype_consistency --device cpu --dtype float32\n"
                  "FAILED      vendor::fused<&\"|'>.out edge_shapes [cpu, float32]: output | shape <2, 3> differs & "
                  "\"quoted\" 'single'\n"
                  "            repro: opconform repro --library /opt/vendor/lib/libvendor_ops.so --op "
                  "'vendor::fused<&\"|'\\''>.out' --check edge_shapes\n"
                  "FAILED      vendor::broken load: symbol 'vendor_broken_kernel' not found in "
                  "/opt/vendor/lib/libvendor_ops.so\n"
                  "12 results in 12.5 s: 4 passed, 3 failed, 1 skipped, 1 unsupported, 1 crashed, "
                  "1 timed_out, 1 mistrusted\n"
                  "3 untested cases (every check skipped, unsupported or mistrusted; --fail-on untested)\n"
                  "  UNTESTED aten::add.Tensor [cuda, float16]: gradcheck: skipped — gradcheck needs float64 or "
                  "complex128: float16 is too coarse for finite differences\n"
                  "  UNTESTED aten::mul.Tensor [cuda, bfloat16]: stride_invariance: unsupported — no kernel for "
                  "aten::mul.Tensor on cuda for bfloat16 (the library does not implement it)\n"
                  "  UNTESTED aten::zeros_like [cpu, float32]: test_faketensor: mistrusted — every output element "
                  "was zero in the library and the reference: the comparison proves nothing\n"
                  // Note [One finding per cause]: the findings, most results first.
                  "6 findings (6 results; one per cause, most results first):\n"
                  "  1 x FAILED      the gradient of 'self' is wrong  [aten::add.Tensor/gradcheck/wrong_gradient/self]\n"
                  "      aten::add.Tensor; float32; cpu\n"
                  "  1 x CRASHED     the kernel crashed (SIGSEGV) in determinism  [aten::index_put/determinism/crash/SIGSEGV]\n"
                  "      aten::index_put; int64; cpu\n"
                  "  1 x TIMED_OUT   the kernel hung past the time-out  [aten::sort.stable/dtype_consistency/hang/]\n"
                  "      aten::sort.stable; float32; cpu\n"
                  "  1 x MISTRUSTED  every compared value was zero  [aten::zeros_like/test_faketensor/inconclusive/output_0]\n"
                  "      aten::zeros_like; float32; cpu\n"
                  "  1 x FAILED      output 0 has a wrong shape <&\"|'>  "
                  "[vendor::fused<&\"|'>.out/edge_shapes/shape_mismatch/output_0]\n"
                  "      vendor::fused<&\"|'>.out; float32; cpu\n"
                  "  1 x FAILED      the library or op did not load  [vendor::broken/load/load/]\n"
                  "      vendor::broken\n"
                  "FAIL\n");
}

// What a ConsoleListener with default options prints for a run with no cases but `report`'s
// results: the summary.
std::string summary_of(const Report& report) {
  std::FILE* file = std::tmpfile();
  EXPECT_NE(file, nullptr);
  ConsoleListener listener(file, {});
  listener.on_run_start(report.info, 0);
  listener.on_run_end(report);
  std::rewind(file);
  std::string text;
  char buffer[1024];
  for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, file)) > 0;) text.append(buffer, n);
  std::fclose(file);
  return text;
}

// A check that runs long shows in a log at 10 s, 20 s, 40 s, ...; on a terminal, the progress
// line names the check running longest and its time.
TEST(ReportsConsole, ALongRunningCheckIsShown) {
  for (const bool terminal : {false, true}) {
    std::FILE* file = std::tmpfile();
    ASSERT_NE(file, nullptr);
    ConsoleOptions options;
    options.terminal = terminal;
    ConsoleListener listener(file, options);
    listener.on_run_start({}, 4);
    for (double seconds : {3.0, 10.2, 15.0, 21.0}) {
      listener.on_running({{"aten::slow", "gradcheck", "cpu", "float64", seconds}, {"aten::x", "a", "cpu", "", 1.0}});
    }
    std::rewind(file);
    std::string text;
    char buffer[4096];
    for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, file)) > 0;) text.append(buffer, n);
    std::fclose(file);
    if (terminal) {
      EXPECT_THAT(text, HasSubstr("running aten::slow gradcheck [cpu, float64] 0:21 (+1)"));
      EXPECT_THAT(text, Not(HasSubstr("still running")));
    } else {
      EXPECT_THAT(text, HasSubstr("still running: aten::slow gradcheck [cpu, float64] for 0:10\n"
                                  "still running: aten::slow gradcheck [cpu, float64] for 0:21\n"));
      EXPECT_THAT(text, Not(HasSubstr("for 0:15")));
      EXPECT_THAT(text, Not(HasSubstr("aten::x")));
    }
  }
}

// Note [Untested is not a pass]: a run whose results are all skipped says FAIL, and why.
TEST(ReportsConsole, AnUntestedRunSaysFailAndInferenceOnlyOpsAreCounted) {
  Report report;
  report.results = {testing::result("op", "c", "cpu", "float32", Outcome::skipped, "nothing applies")};
  CaseResult no_backward = testing::result("aten::neg", "gradcheck", "cpu", "float32", Outcome::unsupported, "no bwd");
  no_backward.recorded_cause =
      conformance::Cause{conformance::FindingKind::not_implemented, std::string(conformance::kNoBackwardSubject), "no bwd"};
  report.results.push_back(no_backward);
  report.results.push_back(testing::result("aten::neg", "test_schema", "cpu", "float32", Outcome::passed));
  const std::string text = summary_of(report);
  EXPECT_THAT(text, HasSubstr("1 untested case (every check skipped, unsupported or mistrusted; --fail-on untested)\n"
                              "  UNTESTED op [cpu, float32]: c: skipped — nothing applies\n"));
  EXPECT_THAT(text, HasSubstr("inference only: 1 op without backward (aten::neg); --fail-on unsupported fails on them\n"));
  EXPECT_THAT(text, HasSubstr("\nFAIL\n"));
}

TEST(ReportsConsole, APassingRunSaysPass) {
  Report report;
  report.results = {testing::result("op", "c", "cpu", "float32", Outcome::passed)};
  const std::string text = summary_of(report);
  EXPECT_THAT(text, HasSubstr("1 results in 0.0 s: 1 passed, 0 failed"));
  EXPECT_THAT(text, HasSubstr("\nPASS\n"));
}

// Sets or unsets an environment variable for the scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    value ? ::setenv(name, value, 1) : ::unsetenv(name);
  }
  ~ScopedEnv() { old_ ? ::setenv(name_, old_->c_str(), 1) : ::unsetenv(name_); }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(ReportsConsoleOptionsFor, TerminalAndColourOnlyOnATerminalWithoutNoColor) {
  std::FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  ScopedEnv no_force("FORCE_COLOR", nullptr);
  {
    ScopedEnv env("NO_COLOR", nullptr);
    const ConsoleOptions options = console_options_for(file);
    EXPECT_FALSE(options.terminal);
    EXPECT_FALSE(options.color);
  }
  {
    // FORCE_COLOR colours a log (CI viewers render ANSI); "0" does not; NO_COLOR wins.
    ScopedEnv no_color("NO_COLOR", nullptr);
    ScopedEnv force("FORCE_COLOR", "1");
    EXPECT_FALSE(console_options_for(file).terminal);
    EXPECT_TRUE(console_options_for(file).color);
    ScopedEnv zero("FORCE_COLOR", "0");
    EXPECT_FALSE(console_options_for(file).color);
  }
  {
    ScopedEnv no_color("NO_COLOR", "1");
    ScopedEnv force("FORCE_COLOR", "1");
    EXPECT_FALSE(console_options_for(file).color);
  }
  std::fclose(file);

  int leader = -1, follower = -1;
  if (::openpty(&leader, &follower, nullptr, nullptr, nullptr) != 0) {
    // A container or chroot without /dev/pts has no pseudo-terminal to test the terminal case on.
    GTEST_SKIP() << "no pseudo-terminal available (openpty: " << std::strerror(errno) << "); mount /dev/pts to run this";
  }
  std::FILE* tty = ::fdopen(follower, "w");
  ASSERT_NE(tty, nullptr);
  {
    ScopedEnv env("NO_COLOR", nullptr);
    EXPECT_TRUE(console_options_for(tty).terminal);
    EXPECT_TRUE(console_options_for(tty).color);
  }
  {
    ScopedEnv env("NO_COLOR", "");  // set but empty: no-color.org says colour stays on
    EXPECT_TRUE(console_options_for(tty).color);
  }
  {
    ScopedEnv env("NO_COLOR", "1");
    EXPECT_TRUE(console_options_for(tty).terminal);
    EXPECT_FALSE(console_options_for(tty).color);
  }
  std::fclose(tty);
  ::close(leader);
}

}  // namespace
}  // namespace opconform::reports

#include "opconform/reports/expectations.h"

namespace opconform::reports {
namespace {

// --expect: an expected result is printed as EXPECTED (and not at all with --quiet), and the
// findings list the ones no entry covers first.
TEST(ReportsConsole, ExpectedResultsAreMarkedAndNewFindingsComeFirst) {
  Report report = sample_report();
  apply_expectations(report,
                     parse_expectations("op=aten::add.Tensor reason=known\nop=aten::index_put reason=known\n", "e"),
                     "2026-12-07");
  const std::string text = console_output({.terminal = false, .color = false}, report);
  EXPECT_THAT(text, HasSubstr("EXPECTED    aten::add.Tensor gradcheck [cpu, float32]"));
  EXPECT_THAT(text, Not(HasSubstr("FAILED      aten::add.Tensor gradcheck")));
  EXPECT_THAT(text, HasSubstr("6 findings (6 results; one per cause, 2 expected; new ones first, then most results first):\n"
                              "  1 x TIMED_OUT   the kernel hung past the time-out"));
  EXPECT_THAT(text, HasSubstr("[aten::index_put/determinism/crash/SIGSEGV] (expected)\n"));
  const std::string quiet = console_output({.terminal = true, .color = false, .quiet = true}, report);
  EXPECT_THAT(quiet, Not(HasSubstr("aten::add.Tensor gradcheck [cpu, float32]")));
  EXPECT_THAT(quiet, HasSubstr("TIMED_OUT   aten::sort.stable dtype_consistency"));
}

}  // namespace
}  // namespace opconform::reports
