// Comparing reports (diff, format_diff) and joining shards (merge).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "opconform/reports/diff_merge.h"
#include "support/error_of.h"
#include "support/golden.h"
#include "support/sample_report.h"

namespace opconform::reports {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using opconform::testing::error_message;
using testing::result;
using testing::sample_report;

CaseResult& find(Report& report, const std::string& op, const std::string& check, const std::string& dtype) {
  auto it = std::find_if(report.results.begin(), report.results.end(),
                         [&](const CaseResult& r) { return r.op == op && r.check == check && r.dtype == dtype; });
  if (it == report.results.end()) throw std::logic_error("no result " + op + " " + check);
  return *it;
}

// The sample, one version later: something of every kind changed.
Report later_report() {
  Report after = sample_report();
  auto set = [&](const char* op, const char* check, const char* dtype, Outcome o, std::string message = "",
                 std::string repro = "") {
    CaseResult& r = find(after, op, check, dtype);
    r.outcome = o;
    // As a check records it: a cause on every result that is not ok.
    r.recorded_cause = o == Outcome::passed || o == Outcome::skipped ? std::nullopt : conformance::cause_for_outcome(o, check);
    r.message = std::move(message);
    r.repro = std::move(repro);
  };
  set("aten::add.Tensor", "gradcheck", "float32", Outcome::passed);                      // fix
  set("aten::add.Tensor", "test_schema", "float32", Outcome::failed,                      // regression
      "schema says 'alpha' is keyword-only | the kernel reads it positionally\nsecond line",
      "opconform repro --op aten::add.Tensor --check test_schema");
  set("aten::mul.Tensor", "stride_invariance", "float32", Outcome::mistrusted, "all zero");  // regression
  set("aten::index_put", "determinism", "int64", Outcome::timed_out, "no answer after 30 s");  // changed
  set("aten::zeros_like", "test_faketensor", "float32", Outcome::skipped, "not applicable");   // fix
  std::erase_if(after.results, [](const CaseResult& r) { return r.op == "vendor::broken"; });  // removed op
  after.results.push_back(result("aten::sub.Tensor", "gradcheck", "cpu", "float32", Outcome::failed, "new and broken"));
  after.results.back().recorded_cause = conformance::Cause{conformance::FindingKind::wrong_gradient, "self", "wrong"};
  return after;
}

std::vector<std::string> keys(const std::vector<std::pair<CaseResult, CaseResult>>& pairs) {
  std::vector<std::string> k;
  for (const auto& [before, after] : pairs) k.push_back(after.key());
  return k;
}

TEST(ReportsDiff, FindsRegressionsFixesChangesAndOps) {
  const ReportDiff d = diff(sample_report(), later_report());
  EXPECT_FALSE(d.empty());
  EXPECT_THAT(keys(d.regressions), ElementsAre("aten::add.Tensor test_schema [cpu, float32]",
                                               "aten::mul.Tensor stride_invariance [cpu, float32]"));
  EXPECT_EQ(d.regressions.at(0).first.outcome, Outcome::passed);
  EXPECT_EQ(d.regressions.at(0).second.outcome, Outcome::failed);
  EXPECT_THAT(keys(d.fixes), ElementsAre("aten::add.Tensor gradcheck [cpu, float32]",
                                         "aten::zeros_like test_faketensor [cpu, float32]"));
  EXPECT_THAT(keys(d.changed), ElementsAre("aten::index_put determinism [cpu, int64]"));
  EXPECT_EQ(d.changed.at(0).first.outcome, Outcome::crashed);
  EXPECT_THAT(d.new_ops, ElementsAre("aten::sub.Tensor"));
  EXPECT_THAT(d.removed_ops, ElementsAre("vendor::broken"));
}

TEST(ReportsDiff, SameOutcomesAreNoDifference) {
  Report after = sample_report();
  for (CaseResult& r : after.results) r.message += " (reworded)", r.seconds *= 2;  // only outcomes count
  const ReportDiff d = diff(sample_report(), after);
  EXPECT_TRUE(d.empty());
  EXPECT_EQ(format_diff(d), "# opconform report diff\n\nNo differences.\n");
}

TEST(ReportsDiff, FormatMatchesGolden) {
  testing::expect_golden("report.diff.md", format_diff(diff(sample_report(), later_report())));
}

TEST(ReportsDiff, FormatPutsRegressionsFirst) {
  const std::string md = format_diff(diff(sample_report(), later_report()));
  EXPECT_THAT(md, HasSubstr("2 regressions, 2 fixes, 1 changed, 1 new op, 1 removed op."));
  EXPECT_LT(md.find("## Regressions (2)"), md.find("## Fixes (2)"));
  EXPECT_LT(md.find("## Fixes (2)"), md.find("## Changed (1)"));
  EXPECT_THAT(md, HasSubstr("| `aten::add.Tensor` | `test_schema` | `cpu` | `float32` | passed | **failed** |"));
  EXPECT_THAT(md, HasSubstr("`schema says 'alpha' is keyword-only | the kernel reads it positionally` — repro "
                            "`opconform repro --op aten::add.Tensor --check test_schema`"));
}

// The sample split into two shards, alternating results.
std::vector<Report> shards() {
  Report one = sample_report(), two = sample_report();
  one.results.clear();
  two.results.clear();
  const Report all = sample_report();
  for (size_t k = 0; k < all.results.size(); ++k) (k % 2 ? two : one).results.push_back(all.results[k]);
  one.info.shard = "1/2";
  two.info.shard = "2/2";
  one.seconds = 7;
  two.seconds = 9.5;
  return {one, two};
}

TEST(ReportsMerge, JoinsShardsSorted) {
  const Report merged = merge(shards());
  EXPECT_EQ(merged.info.shard, "merged");
  EXPECT_EQ(merged.info.library, sample_report().info.library);
  EXPECT_EQ(merged.seconds, 9.5);
  std::vector<CaseResult> expected = sample_report().results;
  std::stable_sort(expected.begin(), expected.end(), [](const CaseResult& a, const CaseResult& b) {
    return std::tie(a.op, a.device, a.dtype, a.check) < std::tie(b.op, b.device, b.dtype, b.check);
  });
  EXPECT_EQ(merged.results, expected);
  // Merging is order-independent.
  std::vector<Report> reversed = shards();
  std::swap(reversed[0], reversed[1]);
  EXPECT_EQ(merge(reversed).results, merged.results);
}

TEST(ReportsMerge, RefusesOverlappingShards) {
  std::vector<Report> parts = shards();
  parts[1].results.push_back(parts[0].results.at(1));
  EXPECT_THAT(error_message([&] { merge(parts); }),
              AllOf(HasSubstr("merge: result 'aten::add.Tensor gradcheck [cpu, float64]' is in both report 1 (shard "
                              "1/2) and report 2 (shard 2/2)"),
                    HasSubstr("overlapping")));
}

TEST(ReportsMerge, RefusesDifferentLibrariesAndNothing) {
  std::vector<Report> parts = shards();
  parts[1].info.library = "other-lib 1.0";
  EXPECT_THAT(error_message([&] { merge(parts); }),
              HasSubstr("merge: report 2 (shard 2/2) is of library 'other-lib 1.0', report 1 (shard 1/2) of "
                        "'vendor-ops 2.3 <beta> & \"friends\"'"));
  EXPECT_THAT(error_message([] { merge({}); }), HasSubstr("merge: no reports"));
}

}  // namespace
}  // namespace opconform::reports
