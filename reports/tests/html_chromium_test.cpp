// The HTML report in a real browser: headless Chromium loads the page, takes a screenshot and
// dumps the DOM, with the script and without it (JavaScript off, or blocked by a strict
// Content-Security-Policy as CI artifact viewers serve files: Note [A report without JavaScript]
// in html.cpp). Skipped (saying so) where /usr/bin/chromium is not installed.
//
// How console errors are seen: with --enable-logging=stderr, Chromium logs every console
// message of the page, uncaught exceptions and rejected promises included, as a line
//   [pid:tid:time:INFO:CONSOLE:1] "Uncaught Error: x", source: file:///.../report.html (1)
// (older versions write "CONSOLE(1)"). The page logs nothing on purpose, so any such line is a
// failure; ConsoleErrorDetectorCatchesABrokenPage checks that a broken page is caught this way.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <zlib.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <sstream>
#include <vector>

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
  BrowserRun open(const std::string& html, const std::string& mode, const std::string& window = "1280,900") {
    const fs::path page = dir_ / ("page" + std::to_string(++runs_) + ".html");
    write_file(page, html);
    const fs::path out = dir_ / "stdout.txt", err = dir_ / "stderr.txt";
    const std::string command = std::string("timeout 120 ") + kChromium +
                                " --headless=new --no-sandbox --disable-gpu --enable-logging=stderr --v=0"
                                " --user-data-dir='" + (dir_ / ("profile" + std::to_string(runs_))).string() +
                                "' --window-size=" + window + " " + mode + " 'file://" + page.string() + "' >'" +
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

// The pixels of an 8-bit RGB or RGBA PNG (what Chromium's screenshots are), decoded with zlib:
// each row's filter byte undone (PNG spec, section 9). Empty when the file is anything else.
struct Image {
  uint32_t width = 0, height = 0, channels = 0;
  std::vector<uint8_t> pixels;  // row-major, `channels` bytes a pixel
};

Image decode_png(const std::string& bytes) {
  Image image;
  std::string data;
  for (size_t at = 8; at + 12 <= bytes.size();) {
    const uint32_t length = big_endian(bytes, at);
    const std::string type = bytes.substr(at + 4, 4);
    if (type == "IHDR") {
      image.width = big_endian(bytes, at + 8), image.height = big_endian(bytes, at + 12);
      const int depth = static_cast<unsigned char>(bytes[at + 16]), color = static_cast<unsigned char>(bytes[at + 17]);
      if (depth != 8 || (color != 2 && color != 6)) return {};
      image.channels = color == 2 ? 3 : 4;
    } else if (type == "IDAT") {
      data += bytes.substr(at + 8, length);
    }
    at += 12 + length;
  }
  const size_t stride = size_t{image.width} * image.channels;
  std::vector<uint8_t> raw((stride + 1) * image.height);
  uLongf size = raw.size();
  if (image.channels == 0 ||
      ::uncompress(raw.data(), &size, reinterpret_cast<const Bytef*>(data.data()), data.size()) != Z_OK || size != raw.size())
    return {};
  image.pixels.assign(stride * image.height, 0);
  for (size_t y = 0; y < image.height; ++y) {
    const uint8_t filter = raw[y * (stride + 1)];
    const uint8_t* in = &raw[y * (stride + 1) + 1];
    uint8_t* out = &image.pixels[y * stride];
    const uint8_t* up = y > 0 ? out - stride : nullptr;
    for (size_t x = 0; x < stride; ++x) {
      const int a = x >= image.channels ? out[x - image.channels] : 0, b = up ? up[x] : 0,
                c = up && x >= image.channels ? up[x - image.channels] : 0;
      int predicted = 0;
      switch (filter) {
        case 1: predicted = a; break;
        case 2: predicted = b; break;
        case 3: predicted = (a + b) / 2; break;
        case 4: {
          const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
          predicted = pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
          break;
        }
        default: break;
      }
      out[x] = static_cast<uint8_t>(in[x] + predicted);
    }
  }
  return image;
}

// Pixels of the "failed" colour (#cf222e, the matrix's FAIL cells and the failure cards' edge).
size_t failed_colour_pixels(const Image& image) {
  size_t n = 0;
  for (size_t at = 0; at + 2 < image.pixels.size(); at += image.channels)
    n += std::abs(image.pixels[at] - 0xcf) <= 6 && std::abs(image.pixels[at + 1] - 0x22) <= 6 &&
         std::abs(image.pixels[at + 2] - 0x2e) <= 6;
  return n;
}

// `html` with `css` added to its head.
std::string with_style(std::string html, const std::string& css) {
  html.insert(html.find("</head>"), "<style>" + css + "</style>\n");
  return html;
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

TEST_F(ReportsHtmlInChromium, TheScriptKeepsTheMatrixAndTheFailuresAndShowsTheFilters) {
  const Report report = sample_report();
  const BrowserRun run = open(to_html(report), "--dump-dom");
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(console_lines(run.err), std::vector<std::string>{}) << joined(console_lines(run.err));
  EXPECT_EQ(occurrences(run.out, "class=\"cell o-"), op_check_pairs(report));
  EXPECT_EQ(occurrences(run.out, "class=\"cell o-failed has-failure\""), 3u);  // add gradcheck, fused, load
  EXPECT_EQ(occurrences(run.out, "<article class=\"failure o-"), 7u);           // six causes, and the unsupported one
  EXPECT_THAT(run.out, HasSubstr("showing 12 of 12 results"));
  EXPECT_THAT(run.out, HasSubstr("Findings: 6 causes (<span id=\"failures-count\">6</span> results)"));
  EXPECT_THAT(run.out, HasSubstr("<section id=\"controls\" class=\"controls\">"));  // shown: `hidden` removed
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
  // The page is still whole; only the filters are missing.
  EXPECT_EQ(occurrences(run.out, "class=\"cell o-"), op_check_pairs(sample_report()));
  EXPECT_THAT(run.out, HasSubstr("<section id=\"controls\" class=\"controls\" hidden=\"\">"));
}

// `html` under a Content-Security-Policy that refuses every script, as a CI artifact viewer may
// serve it. (Chromium's --blink-settings=scriptEnabled=false cannot be used: headless
// --dump-dom and --screenshot then give nothing.)
std::string with_scripts_blocked(std::string html) {
  html.insert(html.find("<meta charset"), "<meta http-equiv=\"Content-Security-Policy\" content=\"script-src 'none'\">\n");
  return html;
}

// Note [A report without JavaScript] (html.cpp): with scripts blocked, the summary, the matrix
// and the failures are there and drawn. The DOM says they are in the page; the screenshot that
// they show: the FAIL cells and the failure cards paint the failed colour, which the same page
// with the matrix and the failures hidden by a style has far less of.
TEST_F(ReportsHtmlInChromium, WithScriptsBlockedTheMatrixAndTheFailuresAreShown) {
  const Report report = sample_report();
  const BrowserRun dom = open(with_scripts_blocked(to_html(report)), "--dump-dom");
  ASSERT_EQ(dom.status, 0) << dom.err;
  // Chromium says it refused the page's script: the policy applied.
  const auto lines = console_lines(dom.err);
  ASSERT_FALSE(lines.empty()) << "the policy did not apply: " << dom.err;
  EXPECT_THAT(joined(lines), HasSubstr("Content Security Policy"));
  // The script did not run (the filters stay hidden), and the page holds everything anyway.
  EXPECT_THAT(dom.out, HasSubstr("<section id=\"controls\" class=\"controls\" hidden=\"\">"));
  EXPECT_EQ(occurrences(dom.out, "class=\"cell o-"), op_check_pairs(report));
  EXPECT_EQ(occurrences(dom.out, "class=\"cell o-failed has-failure\""), 3u);
  // Each cell not ok links to its card: six findings, and the unsupported result's cause.
  EXPECT_EQ(occurrences(dom.out, "\"><a href=\"#finding-") + occurrences(dom.out, "\"><a href=\"#gap-"), 7u);
  EXPECT_EQ(occurrences(dom.out, "<article class=\"failure o-"), 7u);
  EXPECT_THAT(dom.out, HasSubstr("<b>3</b>failed"));  // the totals
  EXPECT_THAT(dom.out, HasSubstr("Verdict: FAIL"));
  EXPECT_THAT(dom.out, HasSubstr("&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;"));

  const fs::path shown = dir_ / "shown.png", hidden = dir_ / "hidden.png", no_controls = dir_ / "no_controls.png";
  ASSERT_EQ(open(with_scripts_blocked(to_html(report)), "--screenshot='" + shown.string() + "'", "1280,3000").status, 0);
  ASSERT_EQ(open(with_style(with_scripts_blocked(to_html(report)), "#matrix, #failures { display: none; }"),
                 "--screenshot='" + hidden.string() + "'", "1280,3000").status, 0);
  const Image with = decode_png(read_file(shown)), without = decode_png(read_file(hidden));
  ASSERT_EQ(with.width, 1280u);
  ASSERT_EQ(without.width, 1280u);
  // Three FAIL cells of about 46 x 24 pixels each, and the cards' edges and badges.
  EXPECT_GT(failed_colour_pixels(with), failed_colour_pixels(without) + 2500)
      << failed_colour_pixels(with) << " vs " << failed_colour_pixels(without);
  // The filters, which need the script, take no room (a style must not undo their `hidden`):
  // removing them outright changes no pixel.
  std::string bare = with_scripts_blocked(to_html(report));
  const size_t from = bare.find("<section id=\"controls\""), to = bare.find("</section>", from) + 10;
  bare.erase(from, to - from);
  ASSERT_EQ(open(bare, "--screenshot='" + no_controls.string() + "'", "1280,3000").status, 0);
  EXPECT_TRUE(decode_png(read_file(no_controls)).pixels == with.pixels) << "the hidden filters are drawn";
}

}  // namespace
}  // namespace opconform::reports
