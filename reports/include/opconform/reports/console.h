// Console output of a run: on a terminal, one progress line redrawn in place (cases done of
// total, failures so far, rate, ETA, and the check running longest with its time); otherwise a
// plain line per finished case that did not pass, a line every tenth of the cases, and a "still
// running" line when a check has run 10 s, 20 s, 40 s, ... Colour on a terminal or when FORCE_COLOR is set
// (force-color.org), never when NO_COLOR is set (https://no-color.org); --color overrides both. At the end, a summary with counts per outcome, the untested cases with
// their reasons, the ops the library offers without a backward ("inference only"), and PASS or
// FAIL by the report's FailPolicy.
#pragma once
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "opconform/reports/listener.h"

namespace opconform::reports {

struct ConsoleOptions {
  bool terminal = false;  // redraw a progress bar in place
  bool color = false;     // ANSI colours
  bool quiet = false;     // no header or progress: the results that fail the run, the summary, the verdict
  // What counts as failing ("N failing", FAIL at the end): the run's --fail-on.
  FailPolicy fail_on;
};
// The options for `stream`: terminal when isatty; colour when NO_COLOR is unset or empty and either
// `stream` is a terminal or FORCE_COLOR is set (not empty, not "0").
ConsoleOptions console_options_for(std::FILE* stream);

// A library's string (a name, a message) made safe for a terminal (Note [Library strings are
// data] in detail/text.h): every acting character visible; `one_line` also line breaks, with at
// most max_chars characters shown. The CLI prints library strings only through it.
std::string console_text(std::string_view s, bool one_line = true, size_t max_chars = 160);

class ConsoleListener : public Listener {
 public:
  // What rate and ETA are measured with: steady_clock::now, or a fake one in tests so that the
  // output is the same on every run.
  using Clock = std::function<std::chrono::steady_clock::time_point()>;

  ConsoleListener(std::FILE* out, ConsoleOptions options);
  ConsoleListener(std::FILE* out, ConsoleOptions options, Clock clock);
  void on_run_start(const RunInfo& info, size_t total_cases) override;
  void on_case_done(const std::vector<CaseResult>& results, size_t done, size_t total) override;
  void on_running(const std::vector<RunningCheck>& running) override;
  void on_run_end(const Report& report) override;

 private:
  // The progress line; `tail` ends it (the case just done, or the check running longest).
  std::string progress(size_t done, size_t total, const std::string& tail) const;
  void draw_progress(const std::string& line);
  void clear_progress();
  void print_untested(const Report& report);
  void print_inference_only(const Report& report);
  void print_findings(const Report& report);

  std::FILE* out_;
  ConsoleOptions options_;
  Clock clock_;
  std::chrono::steady_clock::time_point start_;
  size_t failures_ = 0;
  size_t last_line_percent_ = 0;
  size_t drawn_width_ = 0;  // columns of the progress line now on the terminal (0: none)
  size_t done_ = 0, total_ = 0;  // as of the last on_case_done
  // Off a terminal: the running checks' "still running" thresholds already printed (seconds).
  std::vector<std::pair<std::string, double>> reported_;
};

}  // namespace opconform::reports
