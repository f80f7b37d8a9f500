// Console output of a run (console.h).
#include "opconform/reports/console.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "opconform/reports/detail/text.h"
#include "opconform/reports/findings.h"

namespace opconform::reports {
namespace {

const char* color_of(Outcome o) {
  switch (o) {
    case Outcome::passed: return "\x1b[32m";
    case Outcome::failed: return "\x1b[1;31m";
    case Outcome::skipped: return "\x1b[2m";
    case Outcome::unsupported: return "\x1b[36m";
    case Outcome::crashed: return "\x1b[1;35m";
    case Outcome::timed_out: return "\x1b[35m";
    case Outcome::mistrusted: return "\x1b[33m";
  }
  return "";
}
constexpr const char* kRed = "\x1b[1;31m";
constexpr const char* kReset = "\x1b[0m";

std::string paint(const std::string& text, const char* color, bool enabled) {
  return enabled ? color + text + kReset : text;
}

// "FAILED     ": the outcome in capitals, padded to the longest name so that names line up.
std::string label(Outcome o) {
  std::string s(conformance::to_string(o));
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  s.resize(std::max<size_t>(s.size(), 11), ' ');
  return s;
}

// "0:38", "1:02:03".
std::string clock_time(double seconds) {
  const auto total = static_cast<long long>(seconds + 0.5);
  const long long h = total / 3600, m = total / 60 % 60, s = total % 60;
  char buffer[48];
  if (h > 0) {
    std::snprintf(buffer, sizeof buffer, "%lld:%02lld:%02lld", h, m, s);
  } else {
    std::snprintf(buffer, sizeof buffer, "%lld:%02lld", m, s);
  }
  return buffer;
}

// Columns the text takes on a terminal: ANSI sequences take none, a UTF-8 sequence one.
size_t visible_width(std::string_view s) {
  size_t width = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\x1b') {
      while (i < s.size() && s[i] != 'm') ++i;
    } else if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) {
      ++width;
    }
  }
  return width;
}

// The terminal's width, or 0 when it cannot be known (a file, a pipe).
size_t terminal_columns(std::FILE* out) {
  winsize size{};
  if (::ioctl(::fileno(out), TIOCGWINSZ, &size) != 0) return 0;
  return size.ws_col;
}

}  // namespace

ConsoleOptions console_options_for(std::FILE* stream) {
  ConsoleOptions options;
  options.terminal = ::isatty(::fileno(stream)) == 1;
  const auto set = [](const char* name) {
    const char* v = std::getenv(name);
    return v != nullptr && v[0] != '\0';
  };
  // FORCE_COLOR (force-color.org) colours a log too, for CI viewers that render ANSI; "0" is
  // off, as most tools read it. NO_COLOR wins over it: asking for none is the safer request.
  const char* force = std::getenv("FORCE_COLOR");
  const bool forced = set("FORCE_COLOR") && std::string_view(force) != "0";
  options.color = !set("NO_COLOR") && (options.terminal || forced);
  return options;
}

ConsoleListener::ConsoleListener(std::FILE* out, ConsoleOptions options)
    : ConsoleListener(out, options, [] { return std::chrono::steady_clock::now(); }) {}

ConsoleListener::ConsoleListener(std::FILE* out, ConsoleOptions options, Clock clock)
    : out_(out), options_(options), clock_(std::move(clock)), start_(clock_()) {}

void ConsoleListener::on_run_start(const RunInfo& info, size_t total_cases) {
  start_ = clock_();
  failures_ = 0;
  last_line_percent_ = 0;
  if (options_.quiet) return;
  std::string line = "Checking " + detail::one_line_text(info.library);
  if (!info.against.empty()) line += " against " + detail::one_line_text(info.against);
  line += ": " + std::to_string(total_cases) + (total_cases == 1 ? " case" : " cases");
  if (info.samples > 0) line += ", " + std::to_string(info.samples) + " samples each";
  if (!info.shard.empty()) {
    line += " (shard " + detail::one_line_text(info.shard);
    if (!info.shard_source.empty()) line += ", from " + detail::one_line_text(info.shard_source);
    line += ")";
  }
  std::fprintf(out_, "%s\n", line.c_str());
  if (!info.sandbox.empty()) std::fprintf(out_, "Workers: %s\n", info.sandbox.c_str());
  std::fflush(out_);
}

std::string ConsoleListener::progress(size_t done, size_t total, const std::string& tail) const {
  const double elapsed = std::chrono::duration<double>(clock_() - start_).count();
  const double rate = elapsed > 0 ? static_cast<double>(done) / elapsed : 0;
  const std::string total_text = std::to_string(total);
  std::string done_text = std::to_string(done);
  done_text.insert(0, total_text.size() > done_text.size() ? total_text.size() - done_text.size() : 0, ' ');
  std::string line = "[" + done_text + "/" + total_text + "] " + std::to_string(total == 0 ? 100 : done * 100 / total) + "%  ";
  line += paint(std::to_string(failures_) + " failing", kRed, options_.color && failures_ > 0);
  line += "  " + detail::fixed(rate, 1) + " cases/s  ETA ";
  line += rate > 0 ? clock_time(static_cast<double>(total - std::min(done, total)) / rate) : std::string("-:--");
  if (!tail.empty()) line += "  " + tail;
  return line;
}

namespace {
// "aten::add float32", the case a progress line ends with.
std::string case_text(const std::vector<CaseResult>& results) {
  if (results.empty()) return "";
  std::string text = detail::one_line_text(results.front().op);
  if (!results.front().dtype.empty()) text += " " + detail::one_line_text(results.front().dtype);
  return text;
}

std::string running_text(const RunningCheck& r) {
  return detail::one_line_text(r.op) + " " + r.check + " [" + r.device + (r.dtype.empty() ? "" : ", " + r.dtype) +
         "]";
}
}  // namespace

void ConsoleListener::on_running(const std::vector<RunningCheck>& running) {
  if (options_.quiet) return;
  if (options_.terminal) {
    if (running.empty()) return;
    const RunningCheck& longest = running.front();
    std::string tail = "running " + running_text(longest) + " " + clock_time(longest.seconds);
    if (running.size() > 1) tail += " (+" + std::to_string(running.size() - 1) + ")";
    draw_progress(progress(done_, total_, tail));
    std::fflush(out_);
    return;
  }
  // Off a terminal, a log shows a check that takes long at 10 s, 20 s, 40 s, ...
  std::vector<std::pair<std::string, double>> still;
  for (const auto& r : running) {
    const std::string key = running_text(r);
    double threshold = 10;
    for (const auto& [k, printed] : reported_)
      if (k == key) threshold = printed * 2;
    if (r.seconds >= threshold) {
      std::fprintf(out_, "still running: %s for %s\n", key.c_str(), clock_time(r.seconds).c_str());
      still.emplace_back(key, threshold);
    } else {
      still.emplace_back(key, threshold / 2);
    }
  }
  reported_ = std::move(still);
  std::fflush(out_);
}

void ConsoleListener::clear_progress() {
  if (drawn_width_ == 0) return;
  std::fprintf(out_, "\r%s\r", std::string(drawn_width_, ' ').c_str());
  drawn_width_ = 0;
}

void ConsoleListener::draw_progress(const std::string& text) {
  std::string line = text;
  // A line longer than the terminal wraps, and \r then only returns to the wrapped part: cut it.
  // Only the op name at the end can be long, and it has no colour codes to cut through.
  if (const size_t columns = terminal_columns(out_); columns > 1) {
    while (visible_width(line) > columns - 1) {
      // Whole code points: continuation bytes, then the lead byte.
      while (!line.empty() && (static_cast<unsigned char>(line.back()) & 0xC0) == 0x80) line.pop_back();
      if (!line.empty()) line.pop_back();
    }
  }
  const size_t width = visible_width(line);
  // Spaces over what is left of a longer previous line.
  const std::string padding(drawn_width_ > width ? drawn_width_ - width : 0, ' ');
  std::fprintf(out_, "\r%s%s", line.c_str(), padding.c_str());
  drawn_width_ = width;
}

namespace {
// "FAILED      aten::add gradcheck [cpu, float32]: message", and its repro line.
// An expected one (--expect) says so instead of its outcome, in the skip colour.
void print_result(std::FILE* out, const CaseResult& r, bool color) {
  const std::string tag = r.expected.empty() ? label(r.outcome) : "EXPECTED   ";
  std::string line = paint(tag, r.expected.empty() ? color_of(r.outcome) : color_of(Outcome::skipped), color) + " " +
                     detail::one_line_text(r.op) + " " + detail::one_line_text(detail::where(r));
  if (!r.message.empty()) line += ": " + detail::one_line_text(detail::first_line(r.message), 4096);
  std::fprintf(out, "%s\n", line.c_str());
  if (!r.repro.empty()) std::fprintf(out, "            repro: %s\n", detail::one_line_text(r.repro, 4096).c_str());
}
}  // namespace

void ConsoleListener::on_case_done(const std::vector<CaseResult>& results, size_t done, size_t total) {
  // What fails the run: an outcome --fail-on names that no --expect entry covers.
  const auto fails_run = [&](const CaseResult& r) { return options_.fail_on.fails_on(r.outcome) && r.expected.empty(); };
  for (const CaseResult& r : results) {
    if (fails_run(r)) ++failures_;
  }
  if (options_.quiet) {
    // --quiet: only what fails the run, as it comes; no progress, no skips, no expected findings.
    for (const CaseResult& r : results)
      if (fails_run(r)) print_result(out_, r, options_.color);
    std::fflush(out_);
    return;
  }
  bool printed = false;
  for (const CaseResult& r : results) {
    if (detail::is_ok(r.outcome)) continue;
    if (!printed && options_.terminal) clear_progress();
    printed = true;
    print_result(out_, r, options_.color);
  }
  done_ = done, total_ = total;
  if (options_.terminal) {
    draw_progress(progress(done, total, case_text(results)));
  } else if (total > 0) {
    // A plain line each time another tenth of the cases is done.
    const size_t percent = std::min(done, total) * 10 / total * 10;
    if (percent > last_line_percent_) {
      last_line_percent_ = percent;
      std::fprintf(out_, "%s\n", progress(done, total, case_text(results)).c_str());
    }
  }
  std::fflush(out_);
}

// Every untested case, with the reason of its first check (Note [Untested is not a pass]).
void ConsoleListener::print_untested(const Report& report) {
  const auto untested = untested_cases(report);
  if (untested.empty()) return;
  const bool failing = options_.fail_on.untested;
  std::fprintf(out_, "%s\n",
               paint(std::to_string(untested.size()) + " untested case" + (untested.size() == 1 ? "" : "s") +
                         " (every check skipped, unsupported or mistrusted" + (failing ? "; --fail-on untested)" : ")"),
                     failing ? kRed : color_of(Outcome::unsupported), options_.color)
                   .c_str());
  constexpr size_t kShown = 20;
  for (size_t k = 0; k < untested.size() && k < kShown; ++k) {
    const auto& c = untested[k];
    std::fprintf(out_, "  UNTESTED %s: %s\n", detail::one_line_text(c.key()).c_str(),
                 c.reasons.empty() ? "" : detail::one_line_text(c.reasons.front(), 4096).c_str());
  }
  if (untested.size() > kShown) std::fprintf(out_, "  ... and %zu more (report.md lists them all)\n", untested.size() - kShown);
}

// Ops whose gradient checks were unsupported for want of a backward (conformance::is_missing_backward).
void ConsoleListener::print_inference_only(const Report& report) {
  std::vector<std::string> ops;
  for (const CaseResult& r : report.results)
    if (const auto c = r.cause(); c && conformance::is_missing_backward(*c) && std::find(ops.begin(), ops.end(), r.op) == ops.end())
      ops.push_back(r.op);
  if (ops.empty()) return;
  std::string list;
  for (size_t k = 0; k < ops.size() && k < 8; ++k) list += (k ? ", " : "") + detail::one_line_text(ops[k]);
  if (ops.size() > 8) list += ", ...";
  std::fprintf(out_, "inference only: %zu op%s without backward (%s)%s\n", ops.size(), ops.size() == 1 ? "" : "s",
               list.c_str(), options_.fail_on.fails_on(Outcome::unsupported) ? "" : "; --fail-on unsupported fails on them");
}

// Note [One finding per cause]: the findings, most results first, each with what it covers; then
// the expectations that are stale or expired.
void ConsoleListener::print_findings(const Report& report) {
  auto found = findings(report);
  if (found.empty()) return;
  size_t results = 0, expected = 0;
  bool failing = false;  // red only when a finding fails the run (mistrusted ones do not, by default)
  for (const Finding& f : found) {
    results += f.results.size(), expected += f.expected == f.results.size() ? 1 : 0;
    failing = failing || (options_.fail_on.fails_on(f.outcome) && f.expected < f.results.size());
  }
  // Those an --expect entry does not wholly cover first: they are what fails the run.
  std::stable_partition(found.begin(), found.end(), [](const Finding& f) { return f.expected < f.results.size(); });
  std::fprintf(out_, "%s\n",
               paint(std::to_string(found.size()) + (found.size() == 1 ? " finding" : " findings") + " (" +
                         std::to_string(results) + " results; one per cause, " +
                         (expected == 0 ? std::string() : std::to_string(expected) + " expected; new ones first, then ") +
                         "most results first):",
                     failing ? kRed : color_of(Outcome::skipped), options_.color)
                   .c_str());
  constexpr size_t kShown = 25;
  for (size_t k = 0; k < found.size() && k < kShown; ++k) {
    const Finding& f = found[k];
    std::string line = "  " + std::to_string(f.results.size()) + " x " + label(f.outcome) + " " +
                       detail::one_line_text(f.cause.title) + "  [" + detail::one_line_text(f.key) + "]";
    if (f.expected == f.results.size()) line += " (expected)";
    else if (f.expected > 0) line += " (" + std::to_string(f.expected) + " expected)";
    std::fprintf(out_, "%s\n", line.c_str());
    std::string covers = compact_list(f.ops, 3);
    for (const std::string& part : {compact_list(f.dtypes, 6), compact_list(f.devices)})
      if (!part.empty()) covers += "; " + part;
    std::fprintf(out_, "      %s\n", detail::one_line_text(covers).c_str());
  }
  if (found.size() > kShown) std::fprintf(out_, "  ... and %zu more (report.md lists them all)\n", found.size() - kShown);
  for (const ExpectationEntry& e : report.expectations) {
    if (e.status == ExpectationEntry::Status::active) continue;
    const bool expired = e.status == ExpectationEntry::Status::expired;
    std::fprintf(out_, "%s %s:%d (%s): %s\n",
                 paint(expired ? "EXPIRED" : "STALE", expired || options_.fail_on.stale ? kRed : color_of(Outcome::skipped),
                       options_.color)
                     .c_str(),
                 detail::one_line_text(report.info.expectations_file).c_str(), e.line,
                 detail::one_line_text(e.selector).c_str(),
                 expired ? ("past its date " + e.until).c_str() : "matched no result");
  }
}

void ConsoleListener::on_run_end(const Report& report) {
  // The last progress line stays, with the run's final rate.
  if (drawn_width_ > 0) std::fputs("\n", out_);
  drawn_width_ = 0;
  std::string counts;
  for (Outcome o : detail::all_outcomes()) {
    const size_t n = report.count(o);
    if (!counts.empty()) counts += ", ";
    counts += paint(std::to_string(n) + " " + std::string(conformance::to_string(o)), color_of(o), options_.color && n > 0);
  }
  std::fprintf(out_, "%zu results in %s s: %s\n", report.results.size(), detail::fixed(report.seconds, 1).c_str(),
               counts.c_str());
  print_untested(report);
  if (!options_.quiet) print_inference_only(report);
  print_findings(report);
  if (report.info.interrupted) std::fprintf(out_, "INTERRUPTED: the run was stopped before every case ran; this report is partial\n");
  const bool failed = report.info.interrupted || fails(report, options_.fail_on);
  std::fprintf(out_, "%s\n",
               failed ? paint("FAIL", kRed, options_.color).c_str() : paint("PASS", color_of(Outcome::passed), options_.color).c_str());
  std::fflush(out_);
}

std::string console_text(std::string_view s, bool one_line, size_t max_chars) {
  return one_line ? detail::one_line_text(s, max_chars) : detail::visible_text(s);
}

}  // namespace opconform::reports
