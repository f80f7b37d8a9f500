// The result model (report.h) and the text helpers the writers share (detail/text.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "opconform/reports/detail/text.h"
#include "opconform/reports/report.h"
#include "support/error_of.h"
#include "support/sample_report.h"

namespace opconform::reports {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::result;
using testing::sample_report;

TEST(ReportsModel, KeyNamesOpCheckDeviceAndDtype) {
  EXPECT_EQ(result("aten::add.Tensor", "gradcheck", "cpu", "float32", Outcome::passed).key(),
            "aten::add.Tensor gradcheck [cpu, float32]");
  EXPECT_EQ(result("vendor::x", "load", "cpu", "", Outcome::failed).key(), "vendor::x load [cpu]");
  EXPECT_EQ(result("vendor::x", "load", "", "", Outcome::failed).key(), "vendor::x load");
}

TEST(ReportsModel, CountsEveryOutcome) {
  const Report r = sample_report();
  EXPECT_EQ(r.count(Outcome::passed), 4u);
  EXPECT_EQ(r.count(Outcome::failed), 3u);
  EXPECT_EQ(r.count(Outcome::skipped), 1u);
  EXPECT_EQ(r.count(Outcome::unsupported), 1u);
  EXPECT_EQ(r.count(Outcome::crashed), 1u);
  EXPECT_EQ(r.count(Outcome::timed_out), 1u);
  EXPECT_EQ(r.count(Outcome::mistrusted), 1u);
}

TEST(ReportsModel, FailsOnTheChosenOutcomes) {
  const FailPolicy defaults;
  EXPECT_THAT(defaults.outcomes, ElementsAre(Outcome::failed, Outcome::crashed, Outcome::timed_out));
  EXPECT_TRUE(defaults.untested);
  Report r;
  r.results = {result("a", "c", "cpu", "float32", Outcome::passed), result("a", "d", "cpu", "float32", Outcome::mistrusted)};
  EXPECT_FALSE(fails(r, defaults));
  EXPECT_TRUE(fails(r, FailPolicy{{Outcome::mistrusted}, false}));
  EXPECT_FALSE(fails(Report{}, defaults));
  EXPECT_TRUE(fails(sample_report(), defaults));
  // The report's own policy decides fails(report).
  r.info.fail_on = FailPolicy{{Outcome::mistrusted}, false};
  EXPECT_TRUE(fails(r));
}

// Note [Untested is not a pass]: a case whose every check was skipped, unsupported or mistrusted.
TEST(ReportsModel, UntestedCasesAreThoseWhereNoCheckTestedAnything) {
  Report r;
  r.results = {result("a", "c", "cpu", "float32", Outcome::skipped, "no grad"),
               result("a", "d", "cpu", "float32", Outcome::unsupported, "no kernel\nsecond line"),
               result("a", "c", "cpu", "float64", Outcome::skipped),
               result("a", "d", "cpu", "float64", Outcome::passed),
               result("b", "c", "cpu", "float32", Outcome::mistrusted, "all zero"),  // proved nothing
               result("b", "c", "cpu", "float64", Outcome::mistrusted),
               result("b", "d", "cpu", "float64", Outcome::failed),    // a finding is a test
               result("lib", "load", "", "", Outcome::skipped)};        // load problems are not cases
  const auto untested = untested_cases(r);
  ASSERT_EQ(untested.size(), 2u);
  EXPECT_EQ(untested[0].key(), "a [cpu, float32]");
  EXPECT_THAT(untested[0].reasons, ElementsAre("c: skipped — no grad", "d: unsupported — no kernel"));
  EXPECT_EQ(untested[1].key(), "b [cpu, float32]");
  EXPECT_THAT(untested[1].reasons, ElementsAre("c: mistrusted — all zero"));
  EXPECT_TRUE(fails(r, FailPolicy{}));                                 // untested fails by default
  EXPECT_FALSE(fails(r, FailPolicy{{Outcome::crashed}, false}));       // --fail-on without untested
  EXPECT_TRUE(fails(r, FailPolicy{FailPolicy{}.outcomes, false}));     // the failed result still fails
}

TEST(ReportsModel, ParsesTheFailPolicy) {
  const FailPolicy p = parse_fail_policy("failed,unsupported,untested");
  EXPECT_THAT(p.outcomes, ElementsAre(Outcome::failed, Outcome::unsupported));
  EXPECT_TRUE(p.untested);
  EXPECT_EQ(to_string(p), "failed,unsupported,untested");
  EXPECT_FALSE(parse_fail_policy("crashed").untested);
  EXPECT_EQ(parse_fail_policy(to_string(FailPolicy{})), FailPolicy{});
  EXPECT_THAT(opconform::testing::error_of([] { parse_fail_policy("failed,exploded"); }).what(),
              HasSubstr("--fail-on: unknown outcome 'exploded' (known: passed, failed"));
  EXPECT_THAT(opconform::testing::error_of([] { parse_fail_policy("exploded"); }).what(), HasSubstr("), or untested"));
  EXPECT_THAT(opconform::testing::error_of([] { parse_fail_policy(","); }).what(), HasSubstr("an empty list"));
}

TEST(ReportsModel, ParsesOutcomeNamesAndNamesTheKnownOnesOnError) {
  for (Outcome o : detail::all_outcomes()) EXPECT_EQ(parse_outcome(conformance::to_string(o)), o);
  const Error e = opconform::testing::error_of([] { parse_outcome("exploded"); });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(e.what(), HasSubstr("unknown outcome 'exploded'"));
  EXPECT_THAT(e.what(), HasSubstr("passed, failed, skipped, unsupported, crashed, timed_out, mistrusted"));
  EXPECT_THAT(opconform::testing::error_message([] { parse_outcome("Passed"); }), HasSubstr("'Passed'"));
}

TEST(ReportsText, ValidUtf8KeepsGoodTextAndReplacesEachBadByte) {
  using namespace std::string_literals;
  const std::string good = "plain, \xC3\xA9, \xE2\x88\x9E, \xF0\x9F\x98\x80, \x1B and \0 too"s;
  EXPECT_EQ(detail::valid_utf8(good), good);
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(detail::valid_utf8("a\xFFz"), "a" + fffd + "z");
  EXPECT_EQ(detail::valid_utf8("\xC3"), fffd);                          // cut short
  EXPECT_EQ(detail::valid_utf8("\xC0\xAF"), fffd + fffd);               // overlong '/'
  EXPECT_EQ(detail::valid_utf8("\xED\xA0\x80"), fffd + fffd + fffd);    // a UTF-16 surrogate
  EXPECT_EQ(detail::valid_utf8("\xF4\x90\x80\x80"), fffd + fffd + fffd + fffd);  // beyond U+10FFFF
}

TEST(ReportsText, VisibleTextShowsControlCharactersButNewlinesAndTabs) {
  using namespace std::string_literals;
  EXPECT_EQ(detail::visible_text("a\x1b[31mb\n\tc\r\0\x7f"s), "a\\x1b[31mb\n\tc\\x0d\\x00\\x7f");
  EXPECT_EQ(detail::visible_text("\xFF"), "\xEF\xBF\xBD");
}

TEST(ReportsText, FixedIsLocaleFreeAndNeverNaN) {
  EXPECT_EQ(detail::fixed(12.3456, 3), "12.346");
  EXPECT_EQ(detail::fixed(0, 1), "0.0");
  EXPECT_EQ(detail::fixed(std::numeric_limits<double>::quiet_NaN(), 3), "0.000");
  EXPECT_EQ(detail::fixed(1e300, 0).size(), 301u);
}

TEST(ReportsText, FirstLineAndWhere) {
  EXPECT_EQ(detail::first_line("one\ntwo"), "one");
  EXPECT_EQ(detail::first_line("only"), "only");
  EXPECT_EQ(detail::where(result("op", "gradcheck", "cuda", "float16", Outcome::passed)), "gradcheck [cuda, float16]");
}

}  // namespace
}  // namespace opconform::reports
