// The HTML report in a real browser: headless Chromium loads the page, takes a screenshot and
// dumps the DOM the script built. Skipped (saying so) where /usr/bin/chromium is not installed.
//
// How console errors are seen: with --enable-logging=stderr, Chromium logs every console
// message of the page, uncaught exceptions and rejected promises included, as a line
//   [pid:tid:time:INFO:CONSOLE:1] "Uncaught Error: x", source: file:///.../report.html (1)
// (older versions write "CONSOLE(1)"). The page logs nothing on purpose, so any such line is a
// failure; ConsoleErrorDetectorCatchesABrokenPage checks that a broken page is caught this way.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <set>
#include <sstream>

#include "opconform/reports/writers.h"
#include "support/golden.h"
#include "support/sample_report.h"

namespace opconform::reports {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing::read_file;
using testing::sample_report;
using testing::write_file;

constexpr const char* kChromium = "/usr/bin/chromium";

struct BrowserRun {
  int status = -1;
  std::string out;  // stdout: the DOM for --dump-dom
  std::string err;  // stderr: Chromium's log
};

class ReportsHtmlInChromium : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kChromium)) {
      GTEST_SKIP() << kChromium << " is missing: install the Debian package chromium "
                   << "(scripts/install-deps.sh does) to test the HTML report in a browser";
    }
    std::string pattern = (fs::temp_directory_path() / "opconform-html-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  // Writes `html` to the temporary directory and opens it with `mode` ("--dump-dom",
  // "--screenshot=..."). Each run has its own profile directory so that tests can run in
  // parallel (Chromium allows one browser per profile).
  BrowserRun open(const std::string& html, const std::string& mode) {
    const fs::path page = dir_ / ("page" + std::to_string(++runs_) + ".html");
    write_file(page, html);
    const fs::path out = dir_ / "stdout.txt", err = dir_ / "stderr.txt";
    const std::string command = std::string("timeout 120 ") + kChromium +
                                " --headless=new --no-sandbox --disable-gpu --enable-logging=stderr --v=0"
                                " --user-data-dir='" + (dir_ / ("profile" + std::to_string(runs_))).string() +
                                "' --window-size=1280,900 " + mode + " 'file://" + page.string() + "' >'" +
                                out.string() + "' 2>'" + err.string() + "'";
    BrowserRun run;
    run.status = std::system(command.c_str());
    run.out = read_file(out);
    run.err = read_file(err);
    return run;
  }

  fs::path dir_;
  int runs_ = 0;
};

// The page's console messages in Chromium's log (see the note at the top).
std::vector<std::string> console_lines(const std::string& log) {
  std::vector<std::string> lines;
  std::istringstream in(log);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find(":CONSOLE:") != std::string::npos || line.find(":CONSOLE(") != std::string::npos) {
      lines.push_back(line);
    }
  }
  return lines;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string text;
  for (const auto& l : lines) text += l + "\n";
  return text;
}

size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The number of matrix cells the page should draw: (op, check) pairs with a result.
size_t op_check_pairs(const Report& report, const std::string& op_part = "") {
  std::set<std::pair<std::string, std::string>> pairs;
  for (const CaseResult& r : report.results) {
    if (r.op.find(op_part) != std::string::npos) pairs.emplace(r.op, r.check);
  }
  return pairs.size();
}

// `html` with `script` run after the page's own script.
std::string with_script_after(std::string html, const std::string& script) {
  html.insert(html.rfind("</body>"), "<script>" + script + "</script>\n");
  return html;
}

uint32_t big_endian(const std::string& bytes, size_t at) {
  uint32_t v = 0;
  for (size_t k = 0; k < 4; ++k) v = (v << 8) | static_cast<unsigned char>(bytes.at(at + k));
  return v;
}

TEST_F(ReportsHtmlInChromium, ScreenshotHasNoConsoleErrors) {
  const fs::path png = dir_ / "report.png";
  const BrowserRun run = open(to_html(sample_report()), "--screenshot='" + png.string() + "'");
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(console_lines(run.err), std::vector<std::string>{}) << joined(console_lines(run.err));

  ASSERT_TRUE(fs::exists(png)) << run.err;
  const std::string bytes = read_file(png);
  ASSERT_GT(bytes.size(), 24u);
  EXPECT_EQ(bytes.substr(0, 8), "\x89PNG\r\n\x1a\n");
  EXPECT_EQ(bytes.substr(12, 4), "IHDR");
  EXPECT_EQ(big_endian(bytes, 16), 1280u);  // width
  EXPECT_EQ(big_endian(bytes, 20), 900u);   // height
  // A blank or nearly empty page compresses to a few kilobytes; the drawn report does not.
  EXPECT_GT(bytes.size(), 30000u);

  // For a person to look at: build/<preset>/reports/report-screenshot.png.
  const fs::path keep = fs::path(OPCONFORM_BINARY_DIR) / "reports" / "report-screenshot.png";
  std::error_code ec;
  fs::copy_file(png, keep, fs::copy_options::overwrite_existing, ec);
  EXPECT_FALSE(ec) << "cannot copy the screenshot to " << keep << ": " << ec.message();
}

TEST_F(ReportsHtmlInChromium, ScriptDrawsTheMatrixAndTheFailures) {
  const Report report = sample_report();
  const BrowserRun run = open(to_html(report), "--dump-dom");
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(console_lines(run.err), std::vector<std::string>{}) << joined(console_lines(run.err));
  // The file itself has no cells: each one in the DOM was drawn by the script.
  ASSERT_EQ(occurrences(to_html(report), "class=\"cell"), 0u);
  EXPECT_EQ(occurrences(run.out, "class=\"cell o-"), op_check_pairs(report));
  EXPECT_EQ(occurrences(run.out, "class=\"cell o-failed has-failure\""), 3u);  // add gradcheck, fused, load
  EXPECT_EQ(occurrences(run.out, "<article class=\"failure o-"), 7u);           // the results not ok
  EXPECT_THAT(run.out, HasSubstr("showing 12 of 12 results"));
  EXPECT_THAT(run.out, HasSubstr("Not passing (7)"));
  // Text from the report stays text: the message's script tag is shown, not run.
  EXPECT_THAT(run.out, HasSubstr("&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;"));
  EXPECT_THAT(run.out, HasSubstr("<code>OPCONFORM_SEED=42 opconform repro"));
}

TEST_F(ReportsHtmlInChromium, FiltersNarrowTheMatrix) {
  const Report report = sample_report();
  // The op text filter, as if typed.
  BrowserRun run = open(with_script_after(to_html(report), R"(
    const op = document.getElementById('op-filter');
    op.value = 'MUL';
    op.dispatchEvent(new Event('input'));)"),
                        "--dump-dom");
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(console_lines(run.err), std::vector<std::string>{}) << joined(console_lines(run.err));
  EXPECT_EQ(occurrences(run.out, "class=\"cell o-"), op_check_pairs(report, "mul"));
  EXPECT_THAT(run.out, HasSubstr("showing 3 of 12 results"));

  // Device cuda, passed results hidden: the skipped and the unsupported result remain.
  run = open(with_script_after(to_html(report), R"(
    const device = document.getElementById('device-filter');
    device.value = '=cuda';
    device.dispatchEvent(new Event('change'));
    const passed = document.getElementById('show-passed');
    passed.checked = false;
    passed.dispatchEvent(new Event('change'));)"),
             "--dump-dom");
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(console_lines(run.err), std::vector<std::string>{}) << joined(console_lines(run.err));
  EXPECT_THAT(run.out, HasSubstr("showing 2 of 12 results"));
  EXPECT_EQ(occurrences(run.out, "class=\"cell o-skipped\""), 1u);
  EXPECT_EQ(occurrences(run.out, "class=\"cell o-unsupported has-failure\""), 1u);
}

TEST_F(ReportsHtmlInChromium, ConsoleErrorDetectorCatchesABrokenPage) {
  // The same page with its script broken at the start: the detector must see it.
  std::string html = to_html(sample_report());
  const size_t code = html.rfind("<script>");
  ASSERT_NE(code, std::string::npos);
  html.insert(code + 8, "throw new Error('deliberately broken');\n");
  const BrowserRun run = open(html, "--dump-dom");
  ASSERT_EQ(run.status, 0) << run.err;
  const auto lines = console_lines(run.err);
  ASSERT_EQ(lines.size(), 1u) << run.err;
  EXPECT_THAT(lines[0], HasSubstr("Uncaught Error: deliberately broken"));
  EXPECT_EQ(occurrences(run.out, "class=\"cell o-"), 0u);
}

}  // namespace
}  // namespace opconform::reports
