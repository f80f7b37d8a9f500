// The Markdown summary (writers.h: to_markdown), for a CI job summary or a pull request comment.
// Names go into code spans and messages into fenced blocks, so that nothing in them is read as
// Markdown or HTML; table cells additionally escape '|' (GitHub splits cells on it even inside
// code spans).
#include <algorithm>
#include <map>
#include <sstream>

#include "opconform/reports/detail/markdown.h"
#include "opconform/reports/detail/text.h"
#include "opconform/reports/writers.h"

namespace opconform::reports {
namespace detail {

std::string md_code(std::string_view raw) {
  // One line (a table row ends at a line break), long names cut for display (Note [Library
  // strings are data]); report.json keeps the whole text.
  std::string s = one_line_text(raw, 400);
  if (s.empty()) return "";
  // A code span is delimited by a backtick run longer than any inside it, padded with a space
  // when the text starts or ends with a backtick.
  size_t longest = 0, run = 0;
  for (char c : s) {
    run = c == '`' ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  const std::string fence(longest + 1, '`');
  const bool pad = s.front() == '`' || s.back() == '`';
  return fence + (pad ? " " : "") + s + (pad ? " " : "") + fence;
}

std::string md_cell(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

std::string md_block(std::string_view raw) {
  std::string s = visible_text(raw);
  size_t longest = 0, run = 0;
  for (char c : s) {
    run = c == '`' ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  const std::string fence(std::max<size_t>(3, longest + 1), '`');
  if (!s.empty() && s.back() != '\n') s += '\n';
  return fence + "text\n" + s + fence + "\n";
}

}  // namespace detail

namespace {

using detail::md_block;
using detail::md_cell;
using detail::md_code;

void write_info(std::ostringstream& out, const Report& report) {
  const RunInfo& i = report.info;
  out << "| run | |\n| --- | --- |\n";
  // Strings come from the run (or a file read back) and may hold anything: code spans; numbers plain.
  auto row = [&](const char* name, const std::string& value, bool code = true) {
    if (!value.empty()) out << "| " << name << " | " << (code ? md_cell(md_code(value)) : value) << " |\n";
  };
  row("library", i.library);
  row("library path", i.library_path);
  for (const auto& option : i.library_options) row("library option", option);
  row("against", i.against);
  row("command", i.command);
  row("started", i.started_at);
  row("opconform", i.tool_version);
  row("seed", i.seed == 0 ? std::string("fixed per case") : std::to_string(i.seed), false);
  row("samples", std::to_string(i.samples), false);
  row("shard", i.shard);
  row("time", detail::fixed(report.seconds, 1) + " s", false);
  out << "\n";
}

void write_summary(std::ostringstream& out, const Report& report) {
  out << "## Summary\n\n| outcome | results |\n| --- | ---: |\n";
  for (Outcome o : detail::all_outcomes()) out << "| " << o << " | " << report.count(o) << " |\n";
  out << "| **total** | **" << report.results.size() << "** |\n\n";
  const size_t untested = untested_cases(report).size();
  out << "Untested cases (every check skipped, unsupported or mistrusted): **" << untested << "**. Fails the run on: "
      << md_code(to_string(report.info.fail_on)) << ". Verdict: **" << (fails(report) ? "FAIL" : "PASS") << "**.\n\n";
}

// Note [Untested is not a pass] (report.cpp).
void write_untested(std::ostringstream& out, const Report& report) {
  const auto untested = untested_cases(report);
  if (untested.empty()) return;
  out << "## Untested (" << untested.size() << ")\n\nNo check tested these cases: every one was skipped, "
      << "unsupported or mistrusted.\n\n| case | reasons |\n| --- | --- |\n";
  for (const UntestedCase& c : untested) {
    std::string reasons;
    for (const auto& r : c.reasons) reasons += (reasons.empty() ? "" : "<br>") + md_cell(md_code(r));
    out << "| " << md_cell(md_code(c.key())) << " | " << reasons << " |\n";
  }
  out << "\n";
}

void write_op_table(std::ostringstream& out, const Report& report) {
  const auto& outcomes = detail::all_outcomes();
  std::map<std::string, std::vector<size_t>> counts;  // op -> count per outcome, ops in name order
  for (const CaseResult& r : report.results) {
    auto& row = counts.try_emplace(r.op, outcomes.size(), 0).first->second;
    ++row[static_cast<size_t>(std::find(outcomes.begin(), outcomes.end(), r.outcome) - outcomes.begin())];
  }
  if (counts.empty()) return;
  out << "## Ops\n\n| op |";
  for (Outcome o : outcomes) out << " " << o << " |";
  out << "\n| --- |";
  for (size_t k = 0; k < outcomes.size(); ++k) out << " ---: |";
  out << "\n";
  for (const auto& [op, row] : counts) {
    out << "| " << md_cell(md_code(op)) << " |";
    for (size_t n : row) out << " " << n << " |";
    out << "\n";
  }
  out << "\n";
}

void write_not_passing(std::ostringstream& out, const Report& report) {
  std::vector<const CaseResult*> listed;
  for (const CaseResult& r : report.results) {
    if (!detail::is_ok(r.outcome)) listed.push_back(&r);
  }
  if (listed.empty()) return;
  out << "## Not passing (" << listed.size() << ")\n";
  for (const CaseResult* r : listed) {
    out << "\n### " << md_code(r->op) << " " << md_code(detail::where(*r)) << ": **" << r->outcome << "**\n";
    if (!r->message.empty()) out << "\n" << md_block(r->message);
    if (r->minimal_input) out << "\nMinimal input:\n\n" << md_block(*r->minimal_input);
    if (!r->repro.empty()) out << "\nRepro: " << md_code(r->repro) << "\n";
  }
}

}  // namespace

std::string to_markdown(const Report& report) {
  std::ostringstream out;
  out << "# opconform report: " << md_code(report.info.library.empty() ? "(unnamed library)" : report.info.library)
      << "\n\n";
  write_info(out, report);
  write_summary(out, report);
  write_op_table(out, report);
  write_untested(out, report);
  write_not_passing(out, report);
  std::string text = out.str();
  while (text.size() >= 2 && text[text.size() - 1] == '\n' && text[text.size() - 2] == '\n') text.pop_back();
  return text;
}

}  // namespace opconform::reports
