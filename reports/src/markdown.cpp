// The Markdown summary (writers.h: to_markdown), for a CI job summary or a pull request comment.
// Names go into code spans and messages into fenced blocks, so that nothing in them is read as
// Markdown or HTML; table cells additionally escape '|' (GitHub splits cells on it even inside
// code spans).
#include <algorithm>
#include <map>
#include <sstream>

#include "opconform/reports/detail/markdown.h"
#include "opconform/reports/detail/summary.h"
#include "opconform/reports/detail/text.h"
#include "opconform/reports/findings.h"
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
  row("shard from", i.shard_source);
  row("time", detail::fixed(report.seconds, 1) + " s", false);
  out << "\n";
}

void write_summary(std::ostringstream& out, const Report& report) {
  out << "## Summary\n\n| outcome | results |\n| --- | ---: |\n";
  for (Outcome o : detail::all_outcomes()) out << "| " << o << " | " << report.count(o) << " |\n";
  out << "| **total** | **" << report.results.size() << "** |\n\n";
  const size_t untested = untested_cases(report).size();
  const auto found = findings(report);
  size_t expected = 0;
  for (const auto& r : report.results) expected += r.expected.empty() ? 0 : 1;
  out << "Findings (one per cause): **" << found.size() << "**";
  if (expected > 0) out << "; results covered by expectations: " << expected;
  out << ". Untested cases (every check skipped, unsupported or mistrusted): **" << untested << "**. Fails the run on: "
      << md_code(to_string(report.info.fail_on)) << ". Verdict: **" << (fails(report) ? "FAIL" : "PASS") << "**"
      << (report.info.interrupted ? " (partial)" : "") << ".\n\n";
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

// The op x check matrix (GitHub renders the table): each cell the worst outcome over devices and
// dtypes, bold when not ok, with how many of the cell's results are not ok when that is not all.
void write_matrix(std::ostringstream& out, const Report& report) {
  const detail::Matrix m = detail::op_check_matrix(report);
  if (m.ops.empty()) return;
  out << "## Ops \u00d7 checks\n\n| op |";
  for (const auto& c : m.checks) out << " " << md_cell(md_code(c)) << " |";
  out << "\n| --- |";
  for (size_t k = 0; k < m.checks.size(); ++k) out << " :---: |";
  out << "\n";
  for (size_t o = 0; o < m.ops.size(); ++o) {
    out << "| " << md_cell(md_code(m.ops[o])) << " |";
    for (const auto& cell : m.cells[o]) {
      if (cell.empty()) {
        out << "  |";
        continue;
      }
      const Outcome worst = report.results[detail::worst_of(report, cell)].outcome;
      const std::string label(detail::short_label(worst));
      if (detail::is_ok(worst)) {
        out << " " << label << " |";
        continue;
      }
      const auto bad = std::count_if(cell.begin(), cell.end(), [&](size_t i) { return !detail::is_ok(report.results[i].outcome); });
      out << " **" << md_cell(label) << "**";
      if (static_cast<size_t>(bad) != cell.size()) out << " " << bad << "/" << cell.size();
      out << " |";
    }
    out << "\n";
  }
  out << "\n";
}

// "[cpu, float32]", or "" for a result about no device or dtype (a load problem).
std::string case_of(const CaseResult& r) {
  if (r.device.empty() && r.dtype.empty()) return "";
  return "[" + r.device + (r.dtype.empty() ? "" : ", " + r.dtype) + "]";
}

// "op [device, dtype]" of a result within a finding.
std::string case_label(const CaseResult& r) {
  const std::string c = case_of(r);
  return c.empty() ? r.op : r.op + " " + c;
}

// Note [One finding per cause] (conformance/cause.h): one section a finding, its title, kind and
// what it covers said compactly; the lead result's message, minimal input and repro line once; the
// other results listed in a folded block.
void write_finding(std::ostringstream& out, const Report& report, const Finding& f) {
  const CaseResult& lead = report.results[f.lead];
  out << "\n### " << md_code(f.cause.title.empty() ? f.key : f.cause.title) << ": **" << f.outcome << "**, "
      << f.results.size() << (f.results.size() == 1 ? " result" : " results");
  if (f.expected == f.results.size()) out << " (expected)";
  else if (f.expected > 0) out << " (" << f.expected << " expected)";
  out << "\n\n| cause | kind | check | ops | dtypes | devices |\n| --- | --- | --- | --- | --- | --- |\n| "
      << md_cell(md_code(f.key)) << " | " << md_cell(md_code(std::string(conformance::to_string(f.cause.kind))))
      << " | " << md_cell(md_code(f.check)) << " | " << md_cell(md_code(compact_list(f.ops))) << " | "
      << md_cell(md_code(compact_list(f.dtypes, 12))) << " | " << md_cell(md_code(compact_list(f.devices))) << " |\n";
  if (!lead.expected.empty()) out << "\nExpected: " << md_code(lead.expected) << "\n";
  out << "\nFirst result, " << md_code(case_label(lead)) << ":\n";
  if (!lead.message.empty()) out << "\n" << md_block(lead.message);
  if (lead.minimal_input) out << "\nMinimal input:\n\n" << md_block(*lead.minimal_input);
  if (!lead.repro.empty()) out << "\nRepro: " << md_code(lead.repro) << "\n";
  if (f.results.size() == 1) return;
  out << "\n<details><summary>All " << f.results.size() << " results</summary>\n\n";
  for (size_t i : f.results) {
    const CaseResult& r = report.results[i];
    out << "- " << md_code(case_label(r)) << " " << r.outcome;
    if (!r.repro.empty()) out << ": " << md_code(r.repro);
    out << "\n";
  }
  out << "\n</details>\n";
}

void write_findings(std::ostringstream& out, const Report& report) {
  const auto found = findings(report);
  if (found.empty()) return;
  size_t count = 0;
  for (const auto& f : found) count += f.results.size();
  out << "## Findings (" << found.size() << " causes, " << count << " results)\n";
  for (const auto& f : found) write_finding(out, report, f);
}

// Unsupported results, grouped by cause, apart from the failures: one table row a cause.
void write_gaps(std::ostringstream& out, const Report& report) {
  const auto list = gaps(report);
  if (list.empty()) return;
  out << "\n## Not implemented (" << list.size() << " causes, " << report.count(Outcome::unsupported)
      << " unsupported results)\n\n| cause | results | ops | dtypes | devices |\n| --- | ---: | --- | --- | --- |\n";
  for (const auto& f : list)
    out << "| " << md_cell(md_code(f.cause.title)) << " " << md_cell(md_code(f.key)) << " | " << f.results.size()
        << " | " << md_cell(md_code(compact_list(f.ops))) << " | " << md_cell(md_code(compact_list(f.dtypes, 12)))
        << " | " << md_cell(md_code(compact_list(f.devices))) << " |\n";
}

void write_expectations(std::ostringstream& out, const Report& report) {
  if (report.expectations.empty()) return;
  out << "\n## Expectations (" << md_code(report.info.expectations_file) << ")\n\n"
      << "| line | covers | outcome | results | status | until | reason |\n| ---: | --- | --- | ---: | --- | --- | --- |\n";
  for (const auto& e : report.expectations) {
    const bool active = e.status == ExpectationEntry::Status::active;
    out << "| " << e.line << " | " << md_cell(md_code(e.selector)) << " | " << md_cell(md_code(e.outcome)) << " | "
        << e.matched << " | " << (active ? "" : "**") << to_string(e.status) << (active ? "" : "**") << " | "
        << md_cell(md_code(e.until)) << " | " << md_cell(md_code(e.reason)) << " |\n";
  }
}

void write_findings_table(std::ostringstream& out, const Report& report, const std::vector<Finding>& list) {
  out << "| # | cause | kind | outcome | results | ops | dtypes | devices | title |\n"
         "| ---: | --- | --- | --- | ---: | --- | --- | --- | --- |\n";
  for (size_t k = 0; k < list.size(); ++k) {
    const Finding& f = list[k];
    out << "| " << k + 1 << " | " << md_cell(md_code(f.key)) << " | " << conformance::to_string(f.cause.kind) << " | "
        << f.outcome << " | " << f.results.size() << " | " << md_cell(md_code(compact_list(f.ops, 6))) << " | "
        << md_cell(md_code(compact_list(f.dtypes, 12))) << " | " << md_cell(md_code(compact_list(f.devices)))
        << " | " << md_cell(md_code(f.cause.title)) << " |\n";
  }
}

}  // namespace

std::string findings_tables_markdown(const Report& report) {
  std::ostringstream out;
  const auto found = findings(report);
  const auto missing = gaps(report);
  size_t failing = 0, unsupported = 0;
  for (const auto& f : found) failing += f.results.size();
  for (const auto& f : missing) unsupported += f.results.size();
  out << "Findings: **" << found.size() << "** causes over " << failing
      << " failed, crashed, timed-out and mistrusted results (most results first).\n\n";
  write_findings_table(out, report, found);
  out << "\nNot implemented: **" << missing.size() << "** causes over " << unsupported << " unsupported results.\n\n";
  write_findings_table(out, report, missing);
  return out.str();
}

std::string to_markdown(const Report& report) {
  std::ostringstream out;
  out << "# opconform report: " << md_code(report.info.library.empty() ? "(unnamed library)" : report.info.library)
      << (report.info.interrupted ? " (partial)" : "") << "\n\n";
  if (report.info.interrupted)
    out << "> **Partial report**: the run was stopped before every case ran; it holds the cases that finished.\n\n";
  write_info(out, report);
  write_summary(out, report);
  write_matrix(out, report);
  write_untested(out, report);
  write_findings(out, report);
  write_gaps(out, report);
  write_expectations(out, report);
  std::string text = out.str();
  while (text.size() >= 2 && text[text.size() - 1] == '\n' && text[text.size() - 2] == '\n') text.pop_back();
  return text;
}

}  // namespace opconform::reports
