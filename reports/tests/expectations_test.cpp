// Expectations (expectations.h): --expect files for CI gating on "no new finding".
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "opconform/reports/expectations.h"
#include "opconform/reports/findings.h"
#include "opconform/reports/writers.h"
#include "support/error_of.h"
#include "support/sample_report.h"

namespace opconform::reports {
namespace {

using ::testing::HasSubstr;
using opconform::testing::error_of;
using testing::sample_report;

std::vector<Expectation> parse(std::string_view text) { return parse_expectations(text, "expect.txt"); }

TEST(ReportsExpectations, ParsesFieldsQuotesAndComments) {
  const auto entries = parse(
      "# known findings\n"
      "\n"
      "cause=aten::add.Tensor/gradcheck/* outcome=failed reason=\"ATen's \\\"add\\\" backward\" until=2027-01-31\n"
      "   op='x' check=determinism dtype=int64 device=cpu reason=plain  # trailing comment\n");
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].line, 3);
  EXPECT_EQ(entries[0].cause, "aten::add.Tensor/gradcheck/*");
  EXPECT_EQ(entries[0].outcome, Outcome::failed);
  EXPECT_EQ(entries[0].reason, "ATen's \"add\" backward");
  EXPECT_EQ(entries[0].until, "2027-01-31");
  EXPECT_EQ(entries[1].op, "'x'");
  EXPECT_EQ(entries[1].outcome, std::nullopt);  // any
  EXPECT_EQ(entries[1].selector, "op='x' check=determinism dtype=int64 device=cpu");
}

TEST(ReportsExpectations, MalformedEntriesNameTheFileLineAndProblem) {
  EXPECT_THAT(error_of([] { parse("op=a::x\n"); }).message(), HasSubstr("expect.txt:1: no reason"));
  EXPECT_THAT(error_of([] { parse("\nreason=why\n"); }).message(), HasSubstr("expect.txt:2: the entry matches everything"));
  EXPECT_THAT(error_of([] { parse("op=x colour=red reason=y\n"); }).message(), HasSubstr("unknown field 'colour'"));
  EXPECT_THAT(error_of([] { parse("op=x outcome=bad reason=y\n"); }).message(), HasSubstr("outcome: unknown outcome 'bad'"));
  EXPECT_THAT(error_of([] { parse("op=x outcome=passed reason=y\n"); }).message(), HasSubstr("is never a finding"));
  EXPECT_THAT(error_of([] { parse("op=x reason=y until=2027-13-01\n"); }).message(), HasSubstr("not a date"));
  EXPECT_THAT(error_of([] { parse("op=x reason=y until=2027-02-29\n"); }).message(), HasSubstr("not a date"));
  EXPECT_EQ(parse("op=x reason=y until=2028-02-29\n").at(0).until, "2028-02-29");
  EXPECT_THAT(error_of([] { parse("op=x reason=\"open\n"); }).message(), HasSubstr("no closing quote"));
  EXPECT_THAT(error_of([] { parse("op x reason=y\n"); }).message(), HasSubstr("expected NAME=VALUE at column 1"));
  EXPECT_EQ(error_of([] { parse("op=x\n"); }).code(), ErrorCode::kInvalidArgument);
}

// The four states: an expected finding does not fail the run; a new one does; an entry that
// matches nothing is stale (fails only with --fail-on stale); one past its date fails the run and
// no longer covers its results.
TEST(ReportsExpectations, ExpectedNewStaleAndExpired) {
  Report report = sample_report();
  report.info.fail_on = parse_fail_policy("failed,crashed,timed_out");  // untested aside
  ASSERT_TRUE(fails(report));

  // Every failing result expected: the run passes.
  const auto all = parse(
      "cause=aten::add.Tensor/gradcheck/wrong_gradient/self outcome=failed reason=known\n"
      "op=aten::index_put check=determinism outcome=crashed reason=known\n"
      "op=aten::sort.stable reason=known\n"
      "op=vendor::* check=* reason=\"vendor ops\"\n");
  apply_expectations(report, all, "2026-12-07");
  EXPECT_FALSE(fails(report));
  EXPECT_EQ(report.results[1].expected, "known");
  EXPECT_EQ(report.results[10].expected, "vendor ops");
  EXPECT_EQ(report.results[0].expected, "");  // a pass is never covered
  for (const auto& e : report.expectations) EXPECT_EQ(e.status, ExpectationEntry::Status::active);
  EXPECT_EQ(report.expectations[3].matched, 2u);  // fused and broken

  // A new finding (the gradcheck entry's outcome no longer matches): the run fails.
  auto fewer = all;
  fewer[0].outcome = Outcome::crashed;
  apply_expectations(report = sample_report(), fewer, "2026-12-07");
  report.info.fail_on = parse_fail_policy("failed,crashed,timed_out");
  EXPECT_TRUE(fails(report));
  EXPECT_EQ(report.expectations[0].status, ExpectationEntry::Status::stale);

  // A stale entry on its own: reported, fails only with --fail-on stale.
  auto stale = all;
  stale.push_back(parse("op=aten::gone reason=fixed\n")[0]);
  report = sample_report();
  report.info.fail_on = parse_fail_policy("failed,crashed,timed_out");
  apply_expectations(report, stale, "2026-12-07");
  EXPECT_EQ(report.expectations.back().status, ExpectationEntry::Status::stale);
  EXPECT_FALSE(fails(report));
  report.info.fail_on = parse_fail_policy("failed,crashed,timed_out,stale");
  EXPECT_TRUE(fails(report));
  EXPECT_EQ(to_string(report.info.fail_on), "failed,crashed,timed_out,stale");

  // Expired: past its date it covers nothing and fails the run.
  auto expired = all;
  expired[2].until = "2026-12-06";
  report = sample_report();
  report.info.fail_on = parse_fail_policy("failed,crashed,timed_out");
  apply_expectations(report, expired, "2026-12-07");
  EXPECT_EQ(report.expectations[2].status, ExpectationEntry::Status::expired);
  EXPECT_EQ(report.results[8].expected, "");
  EXPECT_TRUE(fails(report));
  // The date itself still counts.
  apply_expectations(report, expired, "2026-12-06");
  EXPECT_EQ(report.expectations[2].status, ExpectationEntry::Status::active);
}

// The writers say which results are expected and which entries are stale or expired, and JSON
// reads them back.
TEST(ReportsExpectations, WritersShowThemAndJsonReadsThemBack) {
  Report report = sample_report();
  report.info.expectations_file = "ci/expect.txt";
  apply_expectations(report,
                     parse("op=aten::index_put reason=\"index out of range in 1.13\"\nop=aten::gone reason=fixed\n"),
                     "2026-12-07");
  EXPECT_EQ(report_from_json(to_json(report)), report);
  EXPECT_THAT(to_markdown(report), HasSubstr("## Expectations (`ci/expect.txt`)"));
  EXPECT_THAT(to_markdown(report), HasSubstr("| 2 | `op=aten::gone` | `any` | 0 | **stale** |"));
  EXPECT_THAT(to_markdown(report), HasSubstr("Expected: `index out of range in 1.13`"));
  const std::string xml = to_junit(report);
  EXPECT_THAT(xml, HasSubstr("<skipped message=\"expected crashed: the worker died of signal 11"));
  EXPECT_THAT(xml, HasSubstr("<testcase name=\"expectation[line 2]\" classname=\"opconform.expectations\""));
  EXPECT_THAT(to_html(report), HasSubstr("<td>stale</td>"));
}

// `opconform report expect`: one entry per finding and gap, each with an empty reason to fill in
// (so it does not parse until every reason is written).
TEST(ReportsExpectations, AFileFromAReportCoversEveryFinding) {
  const Report report = sample_report();
  std::string text = expectations_for(report);
  EXPECT_THAT(text, HasSubstr("cause=\"aten::add.Tensor/gradcheck/wrong_gradient/self\" outcome=failed reason=\"\""));
  EXPECT_THROW(parse(text), Error);
  for (size_t at = text.find("reason=\"\""); at != std::string::npos; at = text.find("reason=\"\"", at))
    text.replace(at, 9, "reason=\"known\"");
  const auto entries = parse(text);
  EXPECT_EQ(entries.size(), findings(report).size() + gaps(report).size());
  Report applied = report;
  apply_expectations(applied, entries, "2026-12-07");
  for (const CaseResult& r : applied.results)
    if (r.outcome != Outcome::passed && r.outcome != Outcome::skipped) EXPECT_NE(r.expected, "") << r.key();
}

}  // namespace
}  // namespace opconform::reports

namespace opconform::reports {
namespace {

// The example file that makes the ATen 1.13 check pass (examples/expectations/) parses, and every
// entry says why; the untriaged ones carry a date.
TEST(ReportsExpectations, TheAtenExampleFileParsesWithAReasonForEveryEntry) {
  const auto entries = read_expectations(std::filesystem::path(OPCONFORM_SOURCE_DIR) / "examples/expectations/aten-1.13.expect");
  EXPECT_GT(entries.size(), 100u);
  for (const Expectation& e : entries) {
    EXPECT_FALSE(e.reason.empty()) << e.line;
    if (e.reason.rfind("not triaged yet", 0) == 0) EXPECT_FALSE(e.until.empty()) << e.line;
  }
}

}  // namespace
}  // namespace opconform::reports

namespace opconform::reports {
namespace {

// A shard sees only its ops: its stale entries do not fail it; the merged report judges them.
TEST(ReportsExpectations, StaleEntriesAreJudgedOnTheMergedReportNotOnAShard) {
  Report shard = sample_report();
  shard.info.fail_on = parse_fail_policy("failed,crashed,timed_out,stale");
  shard.info.shard = "0/2";
  shard.results = {shard.results[0]};  // a pass: nothing to cover, so every entry is stale here
  apply_expectations(shard, parse_expectations("op=aten::index_put reason=known\n", "e"), "2026-12-07");
  ASSERT_EQ(shard.expectations[0].status, ExpectationEntry::Status::stale);
  EXPECT_FALSE(fails(shard));
  shard.info.shard = "";
  EXPECT_TRUE(fails(shard));
}

}  // namespace
}  // namespace opconform::reports
