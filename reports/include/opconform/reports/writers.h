// The report writers: each turns a Report into one file's text; write_atomically puts it on disk
// so that a killed run leaves the previous file intact.
#pragma once
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "opconform/reports/report.h"

namespace opconform::reports {

// JSON, the stored form (schema: reports/schema/report.schema.json, "schema_version":
// Report::kSchemaVersion).
std::string to_json(const Report& report);
// Reads to_json's output back; throws opconform::Error naming what is wrong (and where) for
// malformed JSON, a missing field, a wrong type, an unknown outcome or a schema_version outside
// [Report::kOldestSchemaVersion, Report::kSchemaVersion].
Report report_from_json(std::string_view text);
// One result as a single JSON line (the object to_json writes per result): the harness's worker
// processes send their results this way, so the two forms cannot drift apart.
std::string result_to_json_line(const CaseResult& result);
CaseResult result_from_json_line(std::string_view line);

// JUnit XML: one <testsuite> per op, one <testcase> per op x check x device x dtype
// (name "check[device,dtype]", classname the op: the same in every run, no seed, time or index
// in it) and one per untested case ("untested[device,dtype]"); each suite's <properties> say what
// the run was (library, opconform_version, seed, samples, command, shard, fail_on). A result is
// <failure> (<error> when crashed or timed_out) exactly when report.info.fail_on makes it fail
// the run and no expectation covers it, else <skipped> with its message (passed: no child): the
// XML and the exit status agree. Each message ends with its cause key ("[cause KEY]"); stale and
// expired expectations are test cases of their own.
std::string to_junit(const Report& report);
// Markdown summary: totals per outcome, the op x check matrix (worst outcome per cell), one
// section per finding (Note [One finding per cause] in conformance/cause.h: what it covers, the
// first result's message, minimal input and repro line, every result folded), the unsupported
// results by cause, the expectations.
std::string to_markdown(const Report& report);
// The findings and gaps of a report as two Markdown tables, one row per cause (key, kind, outcome,
// results, ops, dtypes, devices, title), most results first: `opconform report findings`, and the
// generated parts of docs/aten-differences.md.
std::string findings_tables_markdown(const Report& report);
// One self-contained HTML file (no external scripts, styles or fonts): the summary, a matrix of
// ops x checks coloured by outcome and one card per finding (its message, minimal input and repro
// line, its results folded) as static markup, readable with JavaScript off; a script adds filters
// (outcome, op text, device, dtype).
std::string to_html(const Report& report);

// Note [The report formats are one list]: every file a run writes is an entry here: its flag
// (`--json PATH`), its default file name in --report-dir and its writer. ReportFiles, the CLI's
// flags, `report merge` and `repro` all read this list, so adding a format is its writer, its
// golden test and one line in report_formats() (reports/src/atomic_write.cpp).
struct ReportFormat {
  std::string_view flag;         // "json": the option --json PATH ("" skips the file)
  std::string_view file_name;    // "report.json", in --report-dir
  std::string_view description;  // "JSON report" (the option's help)
  std::string (*write)(const Report&);
};
const std::vector<ReportFormat>& report_formats();

// Writes `content` to `path` through a temporary file in the same directory and a rename (parents
// created); throws opconform::Error naming the path on failure.
void write_atomically(const std::filesystem::path& path, std::string_view content);

}  // namespace opconform::reports
