// The HTML report's text (to_html): golden, self-contained, data embedded safely. What the page
// does in a browser is html_chromium_test.cpp.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "opconform/reports/writers.h"
#include "support/golden.h"
#include "support/sample_report.h"

namespace opconform::reports {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::sample_report;

size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The text of <script type="application/json" id="report-data">.
std::string embedded_data(const std::string& html) {
  const std::string open = "<script type=\"application/json\" id=\"report-data\">";
  const size_t begin = html.find(open);
  const size_t end = html.find("</script>", begin);
  if (begin == std::string::npos || end == std::string::npos) return "";
  return html.substr(begin + open.size(), end - begin - open.size());
}

TEST(ReportsHtml, MatchesGolden) { testing::expect_golden("report.html", to_html(sample_report())); }

TEST(ReportsHtml, IsSelfContained) {
  const std::string html = to_html(sample_report());
  for (const char* external : {"<link", "src=", "@import", "url(", "http://", "https://", "<iframe", "<img"}) {
    EXPECT_THAT(html, Not(HasSubstr(external))) << external;
  }
  EXPECT_EQ(occurrences(html, "<style>"), 1u);
  // The data and the code; the data's own "<script" text is inert (see the next test).
  EXPECT_EQ(occurrences(html, "<script") - occurrences(embedded_data(html), "<script"), 2u);
}

TEST(ReportsHtml, EmbeddedDataCannotEndItsScriptElement) {
  const std::string html = to_html(sample_report());
  // The sample's message holds "</script><script>...</script> <!--<script>": none of it
  // survives as markup, so the page has exactly its own two closing tags and no comment opener.
  EXPECT_EQ(occurrences(html, "</script>"), 2u);
  EXPECT_THAT(embedded_data(html), Not(HasSubstr("</")));
  EXPECT_THAT(html, Not(HasSubstr("<!--")));
  // The escapes are JSON's own: the data reads back as the report.
  EXPECT_EQ(report_from_json(embedded_data(html)), sample_report());
}

// Note [A report without JavaScript] (html.cpp): the file itself holds the totals, the matrix
// (a cell per op and check with a result, FAIL cells linking to their failure card) and every
// failure, so a viewer that runs no script shows them; the filters are hidden until the script
// shows them.
TEST(ReportsHtml, TheMatrixAndTheFailuresAreStaticMarkup) {
  const std::string html = to_html(sample_report());
  EXPECT_EQ(occurrences(html, "<td class=\"cell o-"), 9u);  // the sample's (op, check) pairs
  EXPECT_THAT(html, HasSubstr("<td class=\"cell o-failed has-failure\" title=\"aten::add.Tensor gradcheck\n"
                              "1 passed, 1 failed, 1 skipped\" data-results=\"1 2 3\"><a href=\"#finding-0\">FAIL</a></td>"));
  // Six findings (one per cause) and the one unsupported result's cause, apart.
  EXPECT_EQ(occurrences(html, "<article class=\"failure o-"), 7u);
  EXPECT_THAT(html, HasSubstr("<article class=\"failure o-failed\" id=\"finding-0\" data-results=\"1\">"));
  EXPECT_THAT(html, HasSubstr("<article class=\"failure o-unsupported\" id=\"gap-0\" data-results=\"6\">"));
  EXPECT_THAT(html, HasSubstr("<div class=\"total o-failed\"><b>3</b>failed</div>"));
  EXPECT_THAT(html, HasSubstr("<section id=\"controls\" class=\"controls\" hidden>"));
  EXPECT_THAT(html, Not(HasSubstr("<noscript>")));
}

// Note [One finding per cause]: one card for one cause on two cases, listing both.
TEST(ReportsHtml, OneCauseOnTwoCasesIsOneCard) {
  const std::string html = to_html(testing::sample_report_with_repeated_failure());
  EXPECT_EQ(occurrences(html, "<article class=\"failure o-"), 7u);  // 8 results not ok, 7 causes
  EXPECT_THAT(html, HasSubstr("id=\"finding-0\" data-results=\"1 12\">"));
  EXPECT_THAT(html, HasSubstr("wrong <span class=\"count\">2 results</span>"));
  EXPECT_THAT(html, HasSubstr("<li id=\"result-12\" data-results=\"12\"><span class=\"where\"><code>aten::add.Tensor</code> "
                              "[cuda, float64]</span>"));
  EXPECT_EQ(occurrences(html, "gradient of &#39;self&#39; differs"), 1u);
  EXPECT_THAT(html, HasSubstr("Findings: 6 causes (<span id=\"failures-count\">7</span> results)"));
}

TEST(ReportsHtml, StaticTextIsEscaped) {
  const std::string html = to_html(sample_report());
  EXPECT_THAT(html, HasSubstr("<title>opconform report: vendor-ops 2.3 &lt;beta&gt; &amp; &quot;friends&quot;</title>"));
}

}  // namespace
}  // namespace opconform::reports
