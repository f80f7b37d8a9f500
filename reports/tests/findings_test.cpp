// Findings (findings.h): results grouped by cause key (Note [One finding per cause]).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "opconform/reports/findings.h"
#include "opconform/reports/writers.h"
#include "support/sample_report.h"

namespace opconform::reports {
namespace {

using conformance::Cause;
using conformance::FindingKind;
using ::testing::ElementsAre;
using testing::result;

CaseResult with_cause(CaseResult r, Cause cause) {
  r.recorded_cause = std::move(cause);
  return r;
}

// One bug (a wrong shape of output 0) in three dtypes, two devices and many samples is one
// finding; its messages differ by sample and do not split it.
TEST(ReportsFindings, OneBugOverDtypesDevicesAndSamplesIsOneFinding) {
  Report report;
  const Cause shape{FindingKind::shape_mismatch, "output 0", "the fake kernel gives a wrong shape for output 0"};
  for (const char* dtype : {"float32", "float64", "int64"})
    for (const char* device : {"cpu", "cuda"})
      report.results.push_back(with_cause(result("my::op", "test_faketensor", device, dtype, Outcome::failed,
                                                 std::string("shape <2, ") + dtype + "> vs <3>"),
                                          shape));
  const auto found = findings(report);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].key, "my::op/test_faketensor/shape_mismatch/output_0");
  EXPECT_EQ(found[0].results.size(), 6u);
  EXPECT_THAT(found[0].dtypes, ElementsAre("float32", "float64", "int64"));
  EXPECT_THAT(found[0].devices, ElementsAre("cpu", "cuda"));
  EXPECT_THAT(found[0].ops, ElementsAre("my::op"));
  EXPECT_EQ(found[0].cause.title, shape.title);
}

// Two bugs in one op are two findings: another subject, or another kind, or another check.
TEST(ReportsFindings, TwoBugsInOneOpAreTwoFindings) {
  Report report;
  report.results = {
      with_cause(result("my::op", "reference_agreement", "cpu", "float32", Outcome::failed),
                 {FindingKind::value_mismatch, "output 0", "output 0 differs"}),
      with_cause(result("my::op", "reference_agreement", "cpu", "float64", Outcome::failed),
                 {FindingKind::value_mismatch, "output 1", "output 1 differs"}),
      with_cause(result("my::op", "reference_agreement", "cpu", "int64", Outcome::failed),
                 {FindingKind::dtype_mismatch, "output 0", "output 0 has a wrong dtype"}),
      with_cause(result("my::op", "test_schema", "cpu", "float32", Outcome::failed),
                 {FindingKind::undeclared_mutation, "self", "'self' is written but not declared mutable"}),
  };
  EXPECT_EQ(findings(report).size(), 4u);
}

// The same bug in two ops is two findings; a library-wide cause (no fake kernels at all) is one
// for every op it touches.
TEST(ReportsFindings, ALibraryWideCauseIsOneFindingOverOps) {
  Report report;
  const Cause op_cause{FindingKind::value_mismatch, "output 0", "output 0 differs"};
  const Cause no_fakes{FindingKind::missing_registration, "fake kernel", "no fake kernel", true};
  report.results = {
      with_cause(result("a::x", "reference_agreement", "cpu", "float32", Outcome::failed), op_cause),
      with_cause(result("a::y", "reference_agreement", "cpu", "float32", Outcome::failed), op_cause),
      with_cause(result("a::x", "test_faketensor", "cpu", "float32", Outcome::failed), no_fakes),
      with_cause(result("a::y", "test_faketensor", "cpu", "float32", Outcome::failed), no_fakes),
      with_cause(result("a::z", "test_faketensor", "cpu", "float32", Outcome::failed), no_fakes),
  };
  const auto found = findings(report);
  ASSERT_EQ(found.size(), 3u);
  EXPECT_EQ(found[0].key, "*/test_faketensor/missing_registration/fake_kernel");  // most results first
  EXPECT_THAT(found[0].ops, ElementsAre("a::x", "a::y", "a::z"));
  EXPECT_EQ(found[1].key, "a::x/reference_agreement/value_mismatch/output_0");
  EXPECT_EQ(found[2].key, "a::y/reference_agreement/value_mismatch/output_0");
}

// Unsupported results are gaps, apart; skips and passes are neither; a finding's outcome is the
// worst of its results, and its lead the first result with a minimal input.
TEST(ReportsFindings, GapsApartWorstOutcomeAndLead) {
  Report report;
  const Cause crash{FindingKind::crash, "SIGSEGV", "crashed"};
  report.results = {
      result("a::x", "gradcheck", "cpu", "float32", Outcome::passed),
      result("a::x", "gradcheck", "cpu", "float16", Outcome::skipped, "too coarse"),
      result("a::x", "determinism", "cpu", "float32", Outcome::unsupported, "no kernel"),
      with_cause(result("a::x", "determinism", "cpu", "int64", Outcome::mistrusted), crash),
      with_cause(result("a::x", "determinism", "cpu", "int32", Outcome::crashed, "", "", "x: tensor([1])"), crash),
  };
  const auto found = findings(report);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].outcome, Outcome::crashed);
  EXPECT_EQ(found[0].lead, 4u);
  EXPECT_EQ(found[0].results.size(), 2u);
  const auto missing = gaps(report);
  ASSERT_EQ(missing.size(), 1u);
  EXPECT_EQ(missing[0].key, "a::x/determinism/not_implemented/");
  EXPECT_EQ(missing[0].cause.kind, FindingKind::not_implemented);
}

// Every finding kind reads back from JSON by its name (the schema lists the same names).
TEST(ReportsFindings, EveryKindRoundTripsThroughJson) {
  Report report;
  for (FindingKind kind : conformance::all_finding_kinds())
    report.results.push_back(with_cause(result("a::x", "c" + std::string(conformance::to_string(kind)), "cpu",
                                               "float32", Outcome::failed),
                                        {kind, "s", "t"}));
  const Report back = report_from_json(to_json(report));
  EXPECT_EQ(back, report);
  EXPECT_EQ(findings(back).size(), conformance::all_finding_kinds().size());
  for (FindingKind kind : conformance::all_finding_kinds())
    EXPECT_EQ(conformance::parse_finding_kind(conformance::to_string(kind)), kind);
  EXPECT_EQ(conformance::parse_finding_kind("no_such_kind"), std::nullopt);
}

// report.json lists the findings with what they cover, and the count in the summary.
TEST(ReportsFindings, JsonListsFindingsAndTheirCount) {
  const std::string json = to_json(testing::sample_report_with_repeated_failure());
  EXPECT_THAT(json, ::testing::HasSubstr("\"findings\": 6,"));
  EXPECT_THAT(json, ::testing::HasSubstr("\"key\": \"aten::add.Tensor/gradcheck/wrong_gradient/self\",\n"
                                         "      \"title\": \"the gradient of 'self' is wrong\""));
  EXPECT_THAT(json, ::testing::HasSubstr("\"devices\": [\n        \"cpu\",\n        \"cuda\"\n      ],\n      \"results\": 2,"));
}

}  // namespace
}  // namespace opconform::reports

namespace opconform::reports {
namespace {

// A run stopped by SIGINT or SIGTERM says "partial" in every format, not only in its exit status.
TEST(ReportsPartial, EveryFormatSaysPartial) {
  Report report = testing::sample_report();
  report.info.interrupted = true;
  EXPECT_THAT(to_markdown(report), ::testing::HasSubstr("# opconform report: `vendor-ops 2.3 <beta> & \"friends\"` (partial)"));
  EXPECT_THAT(to_markdown(report), ::testing::HasSubstr("> **Partial report**"));
  EXPECT_THAT(to_markdown(report), ::testing::HasSubstr("Verdict: **FAIL** (partial)"));
  EXPECT_THAT(to_html(report), ::testing::HasSubstr("<p class=\"verdict fail\" id=\"partial\">Partial report"));
  EXPECT_THAT(to_html(report), ::testing::HasSubstr("Verdict: FAIL (partial)"));
  EXPECT_THAT(to_json(report), ::testing::HasSubstr("\"partial\": true"));
  EXPECT_THAT(to_junit(report), ::testing::HasSubstr("<testcase name=\"interrupted\" classname=\"opconform\""));
  // And a whole run says none of it.
  report.info.interrupted = false;
  EXPECT_THAT(to_markdown(report), ::testing::Not(::testing::HasSubstr("partial")));
  EXPECT_THAT(to_html(report), ::testing::Not(::testing::HasSubstr("id=\"partial\"")));
  EXPECT_THAT(to_json(report), ::testing::HasSubstr("\"partial\": false"));
}

}  // namespace
}  // namespace opconform::reports

#include "opconform/reports/diff_merge.h"

namespace opconform::reports {
namespace {

// report diff compares by cause only where both reports recorded causes: against a report written
// before (schema 1 or 2), every finding would read new.
TEST(ReportsFindings, DiffComparesByCauseOnlyWhenBothReportsRecordCauses) {
  Report now = testing::sample_report(), old = now;
  for (CaseResult& r : old.results) r.recorded_cause.reset();
  const ReportDiff against_old = diff(old, now);
  EXPECT_FALSE(against_old.by_cause);
  EXPECT_TRUE(against_old.new_findings.empty());
  EXPECT_THAT(format_diff(against_old), ::testing::HasSubstr("Findings not compared by cause"));
  Report fixed = now;
  fixed.results[1].outcome = Outcome::passed, fixed.results[1].recorded_cause.reset();
  const ReportDiff d = diff(now, fixed);
  EXPECT_TRUE(d.by_cause);
  EXPECT_EQ(d.gone_findings, std::vector<std::string>{"aten::add.Tensor/gradcheck/wrong_gradient/self: the gradient of "
                                                      "'self' is wrong (1 result)"});
  EXPECT_TRUE(diff(fixed, now).new_findings.size() == 1u);
}

}  // namespace
}  // namespace opconform::reports
