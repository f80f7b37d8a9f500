// Note [Library strings are data]: names and messages from a library hold whatever it likes.
// Every writer must keep them inert: no raw C1 or bidi controls, no U+FFFE/U+FFFF in XML, no
// line break that starts a new console line or table row, and no name so long it takes the page.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "opconform/reports/console.h"
#include "opconform/reports/report.h"
#include "opconform/reports/writers.h"

namespace opconform::reports {
namespace {

const std::string kFffe = "\xEF\xBF\xBE", kFfff = "\xEF\xBF\xBF";
const std::string kCsi = "\xC2\x9B";         // U+009B, a terminal's CSI
const std::string kOverride = "\xE2\x80\xAE";  // U+202E RIGHT-TO-LEFT OVERRIDE: "deliaf" shows "failed"
const std::string kLineSeparator = "\xE2\x80\xA8";

Report hostile_report() {
  Report r;
  r.info.library = "evil\nFAILED aten::add reference_agreement [cpu]: forged";
  r.info.command = "opconform check --library evil.so";
  CaseResult c;
  c.op = "aten::neg" + kOverride + "deliaf";
  c.check = "reference_agreement";
  c.device = "cpu";
  c.dtype = "float32";
  c.outcome = Outcome::failed;
  c.message = "bad " + kFffe + kFfff + " bytes " + kCsi + "31m red" + kLineSeparator + "second";
  r.results.push_back(c);
  CaseResult longname = c;
  longname.op = "lib::" + std::string(100000, 'x');
  longname.message = "long";
  r.results.push_back(longname);
  return r;
}

bool holds_any(const std::string& s, std::initializer_list<std::string> needles) {
  for (const auto& n : needles)
    if (s.find(n) != std::string::npos) return true;
  return false;
}

TEST(HostileStrings, JunitHoldsNoCharacterXmlForbids) {
  const std::string xml = to_junit(hostile_report());
  EXPECT_FALSE(holds_any(xml, {kFffe, kFfff, kCsi, kOverride, kLineSeparator}));
  EXPECT_NE(xml.find("\\ufffe\\uffff"), std::string::npos);
  EXPECT_NE(xml.find("\\u202e"), std::string::npos);
}

TEST(HostileStrings, MarkdownKeepsEveryNameOnItsRowAndShort) {
  const std::string md = to_markdown(hostile_report());
  EXPECT_FALSE(holds_any(md, {kFffe, kFfff, kCsi, kOverride, kLineSeparator}));
  EXPECT_EQ(md.find(std::string(1000, 'x')), std::string::npos);  // cut for display
  EXPECT_NE(md.find("more characters)"), std::string::npos);
  EXPECT_EQ(md.find("\nFAILED aten::add"), std::string::npos);   // the library name's line feed
}

TEST(HostileStrings, HtmlShowsNoActingCharacterOutsideTheData) {
  const std::string page = to_html(hostile_report());
  // The report's JSON is data (a script element of type application/json that the filter
  // script reads, never showing its strings); everything else, the static page, must be inert.
  const size_t data = page.find("id=\"report-data\"");
  ASSERT_NE(data, std::string::npos);
  const size_t data_end = page.find("</script>", data);
  const std::string outside = page.substr(0, data) + page.substr(data_end);
  EXPECT_FALSE(holds_any(outside, {kFffe, kFfff, kCsi, kOverride, kLineSeparator}));
  EXPECT_NE(outside.find("aten::neg\\u202edeliaf"), std::string::npos);  // shown, not acting
  EXPECT_NE(outside.find("more characters)"), std::string::npos);        // the long name cut in the matrix
}

TEST(HostileStrings, TheConsoleGetsOneLinePerResultAndNoControls) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    ConsoleOptions options;
    ConsoleListener console(f, options);
    Report r = hostile_report();
    console.on_run_start(r.info, 2);
    console.on_case_done(r.results, 0, 2);
    console.on_run_end(r);
  }
  std::rewind(f);
  std::string out;
  for (int c; (c = std::fgetc(f)) != EOF;) out += static_cast<char>(c);
  std::fclose(f);
  EXPECT_FALSE(holds_any(out, {kFffe, kFfff, kCsi, kOverride, kLineSeparator})) << out;
  EXPECT_EQ(out.find("\nFAILED aten::add reference_agreement [cpu]: forged"), std::string::npos) << out;
  EXPECT_NE(out.find("evil\\nFAILED"), std::string::npos) << out;
  EXPECT_EQ(out.find(std::string(1000, 'x')), std::string::npos);
  EXPECT_EQ(console_text("a\nb"), "a\\nb");
  EXPECT_EQ(console_text("a\nb", false), "a\nb");
  EXPECT_EQ(console_text(kOverride), "\\u202e");
}

TEST(HostileStrings, JsonKeepsTheFullText) {
  const Report back = report_from_json(to_json(hostile_report()));
  ASSERT_EQ(back.results.size(), 2u);
  EXPECT_EQ(back.results[1].op.size(), 5u + 100000u);
  EXPECT_EQ(back.info.library, hostile_report().info.library);
}

}  // namespace
}  // namespace opconform::reports
