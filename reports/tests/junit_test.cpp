// JUnit XML (to_junit): the golden, and that the output is well-formed XML 1.0 whatever the
// report holds.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <set>

#include "opconform/reports/detail/text.h"
#include "opconform/reports/writers.h"
#include "support/golden.h"
#include "support/sample_report.h"

namespace opconform::reports {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::sample_report;

// A small XML 1.0 well-formedness check, enough for what to_junit writes (no DTD, comments,
// CDATA or processing instructions other than the declaration): tags balance with one root,
// attribute values are quoted, '<' and '&' appear only as markup or valid references, no
// character XML forbids, valid UTF-8. Returns "" or what is wrong.
std::string xml_problem(const std::string& xml) {
  if (detail::valid_utf8(xml) != xml) return "invalid UTF-8";
  for (char c : xml) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 && c != '\t' && c != '\n' && c != '\r') return "control character " + std::to_string(u);
  }
  const std::string declaration = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  if (xml.rfind(declaration, 0) != 0) return "no XML declaration";
  static const std::regex reference("&(amp|lt|gt|quot|apos|#[0-9]+|#x[0-9a-fA-F]+);");
  auto check_text = [](const std::string& text) -> std::string {
    if (text.find('<') != std::string::npos) return "'<' in text: " + text;
    for (size_t at = text.find('&'); at != std::string::npos; at = text.find('&', at + 1)) {
      std::smatch m;
      const std::string rest = text.substr(at, 12);
      if (!std::regex_search(rest, m, reference) || m.position(0) != 0) return "bad reference in: " + text;
    }
    return "";
  };
  std::vector<std::string> open;
  int roots = 0;
  size_t i = declaration.size();
  while (i < xml.size()) {
    if (xml[i] != '<') {
      const size_t end = std::min(xml.find('<', i), xml.size());
      const std::string text = xml.substr(i, end - i);
      if (open.empty() && text.find_first_not_of(" \n") != std::string::npos) return "text outside the root";
      if (auto p = check_text(text); !p.empty()) return p;
      i = end;
      continue;
    }
    const size_t end = xml.find('>', i);
    if (end == std::string::npos) return "unterminated tag";
    std::string tag = xml.substr(i + 1, end - i - 1);
    i = end + 1;
    if (tag.starts_with("/")) {
      if (open.empty() || open.back() != tag.substr(1)) return "mismatched </" + tag.substr(1) + ">";
      open.pop_back();
      continue;
    }
    const bool empty = tag.ends_with("/");
    if (empty) tag.pop_back();
    static const std::regex element(R"(^([A-Za-z_][\w.-]*)((\s+[A-Za-z_][\w.-]*="[^"<]*")*)\s*$)");
    std::smatch m;
    if (!std::regex_match(tag, m, element)) return "malformed tag <" + tag + ">";
    static const std::regex value("=\"([^\"]*)\"");
    const std::string attributes = m[2];
    for (auto it = std::sregex_iterator(attributes.begin(), attributes.end(), value); it != std::sregex_iterator(); ++it) {
      if (auto p = check_text((*it)[1]); !p.empty()) return p;
    }
    if (open.empty() && ++roots > 1) return "more than one root";
    if (!empty) open.push_back(m[1]);
  }
  return open.empty() ? "" : "unclosed <" + open.back() + ">";
}

TEST(ReportsJunit, MatchesGolden) { testing::expect_golden("report.junit.xml", to_junit(sample_report())); }

// Every suite says what the run was, for CI views and for tracing a result back.
TEST(ReportsJunit, SuitesCarryTheRunsProperties) {
  Report report = sample_report();
  report.info.seed = 42;
  report.info.shard = "1/4";
  const std::string xml = to_junit(report);
  EXPECT_EQ(xml_problem(xml), "");
  EXPECT_THAT(xml, HasSubstr("time=\"0.762\" timestamp=\"2026-12-01T03:04:05Z\">\n    <properties>\n"
                             "      <property name=\"library\" value=\"vendor-ops 2.3 &lt;beta&gt; &amp; &quot;friends&quot;\"/>\n"
                             "      <property name=\"library_path\" value=\"/opt/vendor/lib/libvendor_ops.so\"/>\n"));
  for (const char* property : {"<property name=\"opconform_version\" value=\"0.1.0\"/>",
                               "<property name=\"seed\" value=\"42\"/>", "<property name=\"shard\" value=\"1/4\"/>",
                               "<property name=\"command\" value=\"opconform check --library "
                               "/opt/vendor/lib/libvendor_ops.so --samples 50\"/>",
                               "<property name=\"fail_on\" value=\"failed,crashed,timed_out,untested\"/>"})
    EXPECT_THAT(xml, HasSubstr(property));
  // One block per suite, before its test cases (the JUnit schema's order).
  size_t suites = 0, blocks = 0;
  for (size_t at = xml.find("<testsuite "); at != std::string::npos; at = xml.find("<testsuite ", at + 1)) {
    ++suites;
    blocks += xml.compare(xml.find('\n', at) + 1, 16, "    <properties>") == 0;
  }
  EXPECT_EQ(blocks, suites);
  EXPECT_GT(suites, 5u);
}

// A test case is known across runs by its classname and name: another seed, time, order or shard
// must not rename it (CI systems track flakiness and history by name).
TEST(ReportsJunit, TestCaseNamesAreStableAcrossRuns) {
  const auto names = [](const std::string& xml) {
    std::multiset<std::string> out;
    static const std::regex testcase("<testcase name=\"([^\"]*)\" classname=\"([^\"]*)\"");
    for (auto it = std::sregex_iterator(xml.begin(), xml.end(), testcase); it != std::sregex_iterator(); ++it)
      out.insert((*it)[2].str() + " / " + (*it)[1].str());
    return out;
  };
  Report first = sample_report(), second = sample_report();
  second.info.seed = 7, second.info.started_at = "2027-01-01T00:00:00Z", second.info.shard = "0/2";
  second.seconds = 99;
  std::reverse(second.results.begin(), second.results.end());
  for (auto& r : second.results) {
    r.seconds *= 3;
    if (!r.repro.empty()) r.repro += " --seed 7";
  }
  const auto before = names(to_junit(first));
  EXPECT_EQ(before.size(), 15u);
  EXPECT_EQ(names(to_junit(second)), before);
  EXPECT_EQ(before.count("aten::add.Tensor / gradcheck[cpu,float32]"), 1u);
}

TEST(ReportsJunit, IsWellFormedXml) {
  EXPECT_EQ(xml_problem(to_junit(sample_report())), "");
  EXPECT_EQ(xml_problem(to_junit(Report{})), "");
  // The checker itself catches what it is there for.
  EXPECT_NE(xml_problem("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<a>x & y</a>"), "");
  EXPECT_NE(xml_problem("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<a b=\"<\"/>"), "");
  EXPECT_NE(xml_problem("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<a><b></a></b>"), "");
  EXPECT_NE(xml_problem("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<a>\x1b</a>"), "");
}

TEST(ReportsJunit, CountsPerSuiteAndInTotal) {
  const std::string xml = to_junit(sample_report());
  EXPECT_THAT(xml, HasSubstr("<testsuites name=\"opconform vendor-ops 2.3 &lt;beta&gt; &amp; &quot;friends&quot;\" "
                             "tests=\"15\" failures=\"6\" errors=\"2\" skipped=\"3\" time=\"12.500\">"));
  EXPECT_THAT(xml, HasSubstr("<testsuite name=\"aten::add.Tensor\" tests=\"5\" failures=\"2\" errors=\"0\" skipped=\"1\" "
                             "time=\"0.762\" timestamp=\"2026-12-01T03:04:05Z\">"));
  EXPECT_THAT(xml, HasSubstr("<testcase name=\"gradcheck[cpu,float32]\" classname=\"aten::add.Tensor\" time=\"0.500\">"));
  EXPECT_THAT(xml, HasSubstr("<testcase name=\"load\" classname=\"vendor::broken\""));
}

TEST(ReportsJunit, EscapesEverythingXmlCannotHoldAsIs) {
  const std::string xml = to_junit(sample_report());
  EXPECT_THAT(xml, HasSubstr("classname=\"vendor::fused&lt;&amp;&quot;|&apos;&gt;.out\""));
  // In an attribute a newline is a reference (else the parser turns it into a space); a tab too.
  EXPECT_THAT(xml, HasSubstr("message=\"output | shape &lt;2, 3&gt; differs &amp; &quot;quoted&quot; &apos;single&apos; "
                             "[cause vendor::fused&lt;&amp;&quot;|&apos;&gt;.out/edge_shapes/shape_mismatch/output_0]\""));
  // In text: the message whole, the escape character visible, the script tag inert.
  EXPECT_THAT(xml, HasSubstr("\n\tsecond line: \xC3\xA9"));
  EXPECT_THAT(xml, HasSubstr("\\x1b[31m &lt;/script&gt;"));
  EXPECT_THAT(xml, Not(HasSubstr("\x1b")));
  Report r;
  r.results = {testing::result("op", "c", "cpu", "f", Outcome::failed, "a\nb\tc\rd\x01 \xFF")};
  const std::string small = to_junit(r);
  EXPECT_THAT(small, HasSubstr("message=\"a [cause op/c/other/]\""));
  EXPECT_THAT(small, HasSubstr(">a\nb\tc\\x0dd\\x01 \xEF\xBF\xBD\ncause: op/c/other/</failure>"));
  EXPECT_EQ(xml_problem(small), "");
}

TEST(ReportsJunit, MapsOutcomesToElements) {
  const std::string xml = to_junit(sample_report());
  EXPECT_THAT(xml, HasSubstr("<failure type=\"failed\""));
  // Mistrusted does not fail the run by default, so it is no <failure> either.
  EXPECT_THAT(xml, HasSubstr("<skipped message=\"mistrusted: every output element was zero"));
  EXPECT_THAT(xml, Not(HasSubstr("<failure type=\"mistrusted\"")));
  // Each untested case is a test case of its own, failing as the run does by default.
  EXPECT_THAT(xml, HasSubstr("<testcase name=\"untested[cuda,float16]\" classname=\"aten::add.Tensor\""));
  EXPECT_THAT(xml, HasSubstr("<failure type=\"untested\" message=\"no check tested aten::add.Tensor [cuda, float16]"));
  EXPECT_THAT(xml, HasSubstr("<error type=\"crashed\""));
  EXPECT_THAT(xml, HasSubstr("<error type=\"timed_out\""));
  EXPECT_THAT(xml, HasSubstr("<skipped message=\"skipped: gradcheck needs"));
  EXPECT_THAT(xml, HasSubstr("<skipped message=\"unsupported: no kernel"));
  // Every result that is not a pass names its cause (Note [One finding per cause]).
  EXPECT_THAT(xml, HasSubstr("[cause aten::add.Tensor/gradcheck/wrong_gradient/self]\">"));
  EXPECT_THAT(xml, HasSubstr("\ncause: aten::index_put/determinism/crash/SIGSEGV\n"));
  // The body says how to replay it.
  EXPECT_THAT(xml, HasSubstr("minimal input: self: tensor([[1, 2], [3, 4]])"));
  EXPECT_THAT(xml, HasSubstr("repro: opconform repro --library /opt/vendor/lib/libvendor_ops.so --op aten::index_put"));
}

// Note [JUnit agrees with the exit status]: over several policies, the XML has a failure or an
// error exactly when fails() says the run fails.
TEST(ReportsJunit, FailuresAndErrorsExactlyWhenTheRunFails) {
  const std::vector<FailPolicy> policies = {FailPolicy{},
                                            FailPolicy{{Outcome::mistrusted}, false},
                                            FailPolicy{{Outcome::unsupported}, false},
                                            FailPolicy{{}, true},
                                            FailPolicy{{Outcome::crashed}, false}};
  Report passing;
  passing.results = {testing::result("a", "c", "cpu", "float32", Outcome::passed),
                     testing::result("a", "d", "cpu", "float32", Outcome::mistrusted)};
  Report untested;
  untested.results = {testing::result("a", "c", "cpu", "float32", Outcome::skipped)};
  for (Report report : {sample_report(), passing, untested}) {
    for (const FailPolicy& policy : policies) {
      report.info.fail_on = policy;
      const std::string xml = to_junit(report);
      const bool has_failure = xml.find("<failure") != std::string::npos || xml.find("<error") != std::string::npos;
      EXPECT_EQ(has_failure, fails(report)) << to_string(policy) << "\n" << xml;
    }
  }
  Report strict = sample_report();
  strict.info.fail_on = FailPolicy{{Outcome::mistrusted}, false};
  EXPECT_THAT(to_junit(strict), HasSubstr("<failure type=\"mistrusted\""));
  EXPECT_THAT(to_junit(strict), HasSubstr("<skipped message=\"failed: gradient of"));
}

}  // namespace
}  // namespace opconform::reports
