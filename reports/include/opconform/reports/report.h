// Report: what a conformance run found, one CaseResult per op x check x device x dtype, plus what
// the run was (RunInfo). Every writer (JSON, JUnit, Markdown, HTML, console) reads this one model;
// the JSON form is its stored form (schema: reports/schema/report.schema.json, versioned).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "opconform/conformance/outcome.h"

namespace opconform::reports {

using conformance::Outcome;

struct CaseResult {
  std::string op;      // "aten::add.Tensor"
  std::string check;   // "gradcheck"; "load" for a problem found while loading the library
  std::string device;  // "cpu", "cuda"
  std::string dtype;   // "float32"; "" when the result is not about one dtype (load problems)
  Outcome outcome = Outcome::passed;
  std::string message;                        // one paragraph (failures, skips, crashes)
  std::string repro;                          // one line that replays it ("" when none)
  std::optional<std::string> minimal_input;   // the shrunk input of a generated failure
  double seconds = 0;                         // time of this check on this case

  // The identity of a result across runs (diff, merge): op, check, device, dtype.
  std::string key() const;
  bool operator==(const CaseResult&) const = default;
};

struct RunInfo {
  std::string tool_version;         // opconform's version
  std::string library;              // what was checked: "reference", or the plugin's name and version
  std::string library_path;         // the shared library's path ("" for the bundled reference)
  std::string against;              // "reference", or "" when the library was checked on its own
  std::string command;              // the command line that made the report
  std::string started_at;           // UTC, ISO 8601 ("2026-12-01T03:04:05Z")
  uint64_t seed = 0;                // 0: each case's fixed seed
  int samples = 0;                  // generated samples per case and check
  std::string shard;                // "2/4", or "" when the run was not sharded (merge: "merged")
  bool operator==(const RunInfo&) const = default;
};

struct Report {
  static constexpr int kSchemaVersion = 1;
  RunInfo info;
  double seconds = 0;               // wall time of the whole run
  std::vector<CaseResult> results;  // in run order

  // Counts per outcome.
  size_t count(Outcome o) const;
  // Field by field (a report read back from JSON equals the one written).
  bool operator==(const Report&) const = default;
};

// The outcomes that make a run fail by default (--fail-on): failed, crashed, timed_out.
std::vector<Outcome> default_fail_on();
// Whether any result has one of `fail_on`.
bool fails(const Report& report, const std::vector<Outcome>& fail_on);
// Parses an outcome name ("timed_out"); throws opconform::Error naming the bad name and the known ones.
Outcome parse_outcome(std::string_view name);

}  // namespace opconform::reports
