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

TEST(ReportsHtml, StaticTextIsEscaped) {
  const std::string html = to_html(sample_report());
  EXPECT_THAT(html, HasSubstr("<title>opconform report: vendor-ops 2.3 &lt;beta&gt; &amp; &quot;friends&quot;</title>"));
}

}  // namespace
}  // namespace opconform::reports
