// The example plugins through `opconform check`, as a user runs them: the correct vendor library
// passes everything; every seeded bug of the buggy library is reported with its outcome, and the
// run completes (a crash and a hang included). examples/buggy_plugin/README.md lists the bugs.
// The silent-bugs library's bugs (right values) are found by memory_safety and thread_safety; its
// correct twin passes everything (examples/silent_bugs_plugin/README.md).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "opconform/conformance/check.h"
#include "opconform/harness/cli.h"
#include "opconform/reports/findings.h"
#include "opconform/reports/writers.h"

namespace opconform {
namespace {

namespace fs = std::filesystem;
using reports::Outcome;

reports::Report check(const std::string& library, std::vector<std::string> extra, int expected_status) {
  const fs::path dir = fs::temp_directory_path() / ("opconform_plugins_test_" + std::to_string(getpid()));
  fs::remove_all(dir);
  std::vector<std::string> args = {"check", "--library", library, "--jobs", "2", "--report-dir", dir.string()};
  args.insert(args.end(), extra.begin(), extra.end());
  EXPECT_EQ(harness::opconform_main(args), expected_status);
  std::ifstream in(dir / "report.json");
  auto report = reports::report_from_json(std::string(std::istreambuf_iterator<char>(in), {}));
  fs::remove_all(dir);
  return report;
}

TEST(ExamplePlugins, TheVendorLibraryPassesEveryCheck) {
#if defined(__SANITIZE_ADDRESS__)
  const char* samples = "10";  // the memory-error pass: 30 samples cost it 37 s
#else
  const char* samples = "30";
#endif
  const auto r = check(OPCONFORM_VENDOR_PLUGIN, {"--samples", samples}, 0);
  std::set<std::string> ops;
  for (const auto& c : r.results) {
    ops.insert(c.op);
    EXPECT_TRUE(c.outcome == Outcome::passed || c.outcome == Outcome::skipped)
        << c.op << " " << c.check << " [" << c.dtype << "]: " << conformance::to_string(c.outcome) << ": " << c.message;
  }
  EXPECT_GE(ops.size(), 15u);
  EXPECT_GT(r.count(Outcome::passed), 400u);
}

TEST(ExamplePlugins, EverySeededBugIsReportedWithItsOutcome) {
  const auto r = check(OPCONFORM_BUGGY_PLUGIN, {"--samples", "20", "--timeout", "2"}, 1);
  // op -> check -> outcomes over the dtypes
  std::map<std::string, std::map<std::string, std::multiset<Outcome>>> seen;
  for (const auto& c : r.results) seen[c.op][c.check].insert(c.outcome);
  auto reported = [&](const std::string& op, const std::string& check, Outcome o) {
    return seen[op][check].count(o) > 0;
  };
  // (a) a wrong value for float64 only
  EXPECT_TRUE(reported("aten::mul.Tensor", "reference_agreement", Outcome::failed));
  EXPECT_TRUE(reported("aten::mul.Tensor", "dtype_consistency", Outcome::failed));
  // (b) a crash on empty input
  EXPECT_TRUE(reported("aten::neg", "edge_shapes", Outcome::crashed));
  // (c) an infinite loop on 3-d inputs
  size_t timed_out = 0;
  for (const auto& [check, outcomes] : seen["aten::exp"]) timed_out += outcomes.count(Outcome::timed_out);
  EXPECT_GT(timed_out, 0u);
  // (d) an undeclared mutation
  EXPECT_TRUE(reported("aten::abs", "test_schema", Outcome::failed));
  // (e) a wrong fake kernel
  EXPECT_TRUE(reported("aten::sum.dim_IntList", "test_faketensor", Outcome::failed));
  // (f) a stride bug
  EXPECT_TRUE(reported("aten::sin", "stride_invariance", Outcome::failed));
  // The correct ops pass.
  for (const char* op : {"aten::add.Tensor", "aten::sub.Tensor", "aten::maximum", "aten::relu", "aten::mm"}) {
    for (const auto& [check, outcomes] : seen[op]) {
      for (Outcome o : outcomes) EXPECT_TRUE(o == Outcome::passed || o == Outcome::skipped) << op << " " << check;
    }
  }
  // Correct float32 mul: its value bug is float64 only.
  for (const auto& c : r.results) {
    if (c.op == "aten::mul.Tensor" && c.check == "reference_agreement" && c.dtype == "float32") {
      EXPECT_EQ(c.outcome, Outcome::passed) << c.message;
    }
  }
  // Note [One finding per cause]: each seeded bug sits in its own op, so no finding mixes two
  // (one op each), and a bug gives at most one finding per check that catches it, whatever the
  // dtypes and samples.
  const auto found = reports::findings(r);
  std::map<std::pair<std::string, std::string>, size_t> per_op_and_check;
  for (const auto& f : found) {
    ASSERT_EQ(f.ops.size(), 1u) << f.key;
    ++per_op_and_check[{f.ops[0], f.check}];
  }
  for (const auto& [op_check, n] : per_op_and_check) EXPECT_EQ(n, 1u) << op_check.first << " " << op_check.second;
  std::set<std::string> ops_with_findings;
  for (const auto& f : found) ops_with_findings.insert(f.ops[0]);
  EXPECT_EQ(ops_with_findings, (std::set<std::string>{"aten::mul.Tensor", "aten::neg", "aten::exp", "aten::abs",
                                                      "aten::sum.dim_IntList", "aten::sin"}));
  // The same bug over dtypes is one finding: (d)'s undeclared write in every dtype.
  const auto abs_schema = std::find_if(found.begin(), found.end(), [](const reports::Finding& f) {
    return f.key == "aten::abs/test_schema/undeclared_mutation/self";
  });
  ASSERT_NE(abs_schema, found.end());
  EXPECT_EQ(abs_schema->dtypes.size(), 3u);
}

// Bugs that only samples covering the whole input space reach (examples/coverage_plugin/README.md),
// found with the default flags: bool tensors with True in them, a factory dispatched through its
// Device argument, and differentiable inputs that require grad.
TEST(ExamplePlugins, CoverageBugsAreFoundWithDefaultFlags) {
  const auto r = check(OPCONFORM_COVERAGE_PLUGIN, {}, 1);
  std::map<std::string, std::map<std::string, std::vector<const reports::CaseResult*>>> seen;
  for (const auto& c : r.results) seen[c.op][c.check].push_back(&c);
  auto reported = [&](const std::string& op, const std::string& check, Outcome o) {
    const auto& list = seen[op][check];
    return std::any_of(list.begin(), list.end(), [o](const reports::CaseResult* c) { return c->outcome == o; });
  };
  // (g) an always-true logical_not
  EXPECT_TRUE(reported("aten::logical_not", "reference_agreement", Outcome::failed));
  // (h) a full that ignores its fill value: reached at all only through BackendSelect
  EXPECT_TRUE(reported("aten::full", "reference_agreement", Outcome::failed));
  // Its fake kernel is right; samples with a complex fill (which it refuses) make it unsupported.
  EXPECT_FALSE(reported("aten::full", "test_faketensor", Outcome::failed));
  // (i) neg without a backward: unsupported on the gradient checks, with the reason the summary counts
  for (const char* check : {"gradcheck", "test_autograd_registration"}) {
    ASSERT_FALSE(seen["aten::neg"][check].empty()) << check;
    for (const reports::CaseResult* c : seen["aten::neg"][check]) {
      EXPECT_EQ(c->outcome, Outcome::unsupported) << check << ": " << c->message;
      ASSERT_TRUE(c->recorded_cause.has_value()) << check;
      EXPECT_TRUE(conformance::is_missing_backward(*c->recorded_cause)) << check;
    }
  }
  EXPECT_TRUE(reported("aten::neg", "reference_agreement", Outcome::passed));
}

// The neg gap alone passes by default (its values are right) and fails with --fail-on unsupported.
TEST(ExamplePlugins, AnInferenceOnlyOpFailsTheRunWithFailOnUnsupported) {
  (void)check(OPCONFORM_COVERAGE_PLUGIN, {"--ops", "aten::neg", "--samples", "10"}, 0);
  (void)check(OPCONFORM_COVERAGE_PLUGIN,
              {"--ops", "aten::neg", "--samples", "10", "--fail-on", "failed,crashed,timed_out,untested,unsupported"}, 1);
}

// Bugs whose values are right (examples/silent_bugs_plugin/README.md): only memory_safety (guard
// bytes and guard pages) and thread_safety (concurrent first calls) see them. Every check runs, as
// a user runs it (not only --checks memory_safety,thread_safety): the run takes about 0.2 s on 2
// cores, and the three findings came out in 80 of 80 runs of `opconform check` (40 of them with
// both cores kept busy) and 30 of 30 repeats of this test. Outside the guards neg's overrun
// corrupts the heap, so its other checks crash (or, were a corrupted free list to loop, time out:
// hence --timeout); nothing is asserted of them but that the run completes and writes its report.
TEST(ExamplePlugins, SilentBugsAreFlaggedByMemorySafetyAndThreadSafety) {
  const auto r = check(OPCONFORM_SILENT_BUGS_PLUGIN, {"--timeout", "10"}, 1);
  std::map<std::string, std::map<std::string, std::vector<const reports::CaseResult*>>> seen;
  for (const auto& c : r.results) seen[c.op][c.check].push_back(&c);
  // The run completed: every check of every case has its result (crashed ones included).
  // 3 ops, float32 and float64; every check but device_consistency (planned on other devices' cases only).
  EXPECT_EQ(r.results.size(), 3 * 2 * (conformance::check_names().size() - 1));
  // The message of the first failed result of `op` under `check` (empty when none failed).
  auto failure = [&](const std::string& op, const std::string& check) -> std::string {
    for (const reports::CaseResult* c : seen[op][check])
      if (c->outcome == Outcome::failed) return c->message;
    return "";
  };
  // (a) 64 bytes written past the end of neg's output: both placements see it.
  EXPECT_THAT(failure("aten::neg", "memory_safety"), ::testing::HasSubstr("wrote past the end of output 0"));
  // (b) 8 bytes read past the end of abs's input: the guard pages see it.
  EXPECT_THAT(failure("aten::abs", "memory_safety"), ::testing::HasSubstr("read past the end of argument 'self'"));
  // (c) exp's lazily filled table, read by a concurrent first caller before it is filled. Each
  // worker's first exp case races; a second exp case in the same worker finds the table filled.
  const std::string race = failure("aten::exp", "thread_safety");
  EXPECT_THAT(race, ::testing::ContainsRegex("in [0-9]+ concurrent calls, thread"));
  EXPECT_THAT(race, ::testing::HasSubstr("differs from a sequential call's (bitwise): output 0"));
  // Silent: the values of abs and exp agree with the reference, and their memory is not corrupted.
  // Under AddressSanitizer (the asan preset builds the plugin with it too) abs's unguarded calls
  // stop at the overread itself, so only exp is silent there.
#if defined(__SANITIZE_ADDRESS__)
  for (const char* op : {"aten::exp"}) {
#else
  for (const char* op : {"aten::abs", "aten::exp"}) {
#endif
    ASSERT_EQ(seen[op]["reference_agreement"].size(), 2u) << op;  // float32, float64
    for (const reports::CaseResult* c : seen[op]["reference_agreement"])
      EXPECT_EQ(c->outcome, Outcome::passed) << op << " [" << c->dtype << "]: " << c->message;
  }
  EXPECT_EQ(failure("aten::exp", "memory_safety"), "");
}

// The correct twin (the same source without SILENT_BUGS) passes every check.
TEST(ExamplePlugins, TheSilentBugsFixedTwinPassesEveryCheck) {
  const auto r = check(OPCONFORM_SILENT_BUGS_PLUGIN_FIXED, {}, 0);
  std::set<std::string> ops;
  for (const auto& c : r.results) {
    ops.insert(c.op);
    EXPECT_TRUE(c.outcome == Outcome::passed || c.outcome == Outcome::skipped)
        << c.op << " " << c.check << " [" << c.dtype << "]: " << conformance::to_string(c.outcome) << ": " << c.message;
  }
  EXPECT_EQ(ops, (std::set<std::string>{"aten::abs", "aten::exp", "aten::neg"}));
  EXPECT_EQ(r.count(Outcome::failed), 0u);
  for (const char* op : {"aten::neg", "aten::abs", "aten::exp"}) {
    for (const char* check : {"memory_safety", "thread_safety", "reference_agreement"}) {
      size_t passed = 0;
      for (const auto& c : r.results) passed += c.op == op && c.check == check && c.outcome == Outcome::passed;
      EXPECT_EQ(passed, 2u) << op << " " << check;  // float32 and float64
    }
  }
}


// Plugin ABI version 2 (examples/abi2_plugin): the correct library passes every check, its
// symbolic fake kernel replayed at other sizes with no "not replayed" note, its backward operator
// differentiated twice (gradgradcheck), its random op compared across seeded runs (determinism).
TEST(ExamplePlugins, TheAbi2LibraryPassesEveryCheckAtOtherSizesToo) {
  const auto r = check(OPCONFORM_ABI2_PLUGIN, {"--samples", "20"}, 0);
  std::map<std::string, std::map<std::string, std::vector<const reports::CaseResult*>>> seen;
  for (const auto& c : r.results) {
    seen[c.op][c.check].push_back(&c);
    EXPECT_TRUE(c.outcome == Outcome::passed || c.outcome == Outcome::skipped)
        << c.op << " " << c.check << " [" << c.dtype << "]: " << conformance::to_string(c.outcome) << ": " << c.message;
  }
  // The backward operators are checked through their forward op, not as ops of their own.
  EXPECT_EQ(seen.size(), 4u);
  EXPECT_EQ(seen.count("abi2::every_other_backward"), 0u);
  auto passed_without = [&](const std::string& op, const std::string& check, const std::string& note) {
    ASSERT_EQ(seen[op][check].size(), 2u) << op << " " << check;  // float32, float64
    for (const reports::CaseResult* c : seen[op][check]) {
      EXPECT_EQ(c->outcome, Outcome::passed) << op << " " << check << ": " << c->message;
      EXPECT_THAT(c->message, ::testing::Not(::testing::HasSubstr(note))) << op << " " << check;
    }
  };
  passed_without("abi2::every_other", "test_aot_dispatch_dynamic", "ot replayed");
  passed_without("abi2::every_other", "test_aot_dispatch_dynamic", "Gradients not compared");
  passed_without("abi2::every_other", "gradgradcheck", "double backward");
  passed_without("abi2::every_other", "gradcheck", "no autograd");
  passed_without("abi2::swap01", "test_faketensor", "alias");
  passed_without("abi2::jitter", "determinism", "random");
  passed_without("abi2::scaled_pair", "test_faketensor", "should be Tensor");
}

// Its twin's one seeded bug, a fake kernel right on every sample (even sizes) and wrong at odd
// ones, is found only by replaying the captured graph at other sizes.
TEST(ExamplePlugins, AFakeKernelWrongOnlyAtOtherSizesFailsTestAotDispatchDynamic) {
  const auto r = check(OPCONFORM_ABI2_WRONG_FAKE_PLUGIN, {"--samples", "20"}, 1);
  for (const auto& c : r.results) {
    const bool seeded_bug = c.op == "abi2::every_other" && c.check == "test_aot_dispatch_dynamic";
    EXPECT_EQ(c.outcome == Outcome::failed, seeded_bug) << c.op << " " << c.check << ": " << c.message;
    if (!seeded_bug) continue;
    EXPECT_THAT(c.message, ::testing::HasSubstr("capture recorded [s0//2]"));
    ASSERT_TRUE(c.cause().has_value());
    EXPECT_EQ(c.cause()->kind, conformance::FindingKind::shape_mismatch);
  }
  const auto findings = reports::findings(r);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].key, "abi2::every_other/test_aot_dispatch_dynamic/shape_mismatch/fake_kernel_(other_sizes)");
}

}  // namespace
}  // namespace opconform
