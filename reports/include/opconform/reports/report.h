// Report: what a conformance run found, one CaseResult per op x check x device x dtype, plus what
// the run was (RunInfo). Every writer (JSON, JUnit, Markdown, HTML, console) reads this one model;
// the JSON form is its stored form (schema: reports/schema/report.schema.json, versioned).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "opconform/conformance/cause.h"
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
  // Why it is not a pass (conformance/cause.h); nullopt for a pass, and in reports written before
  // causes were recorded (cause() then gives the outcome's own).
  std::optional<conformance::Cause> recorded_cause;
  // The reason of the --expect entry that covers this result ("" when none covers it): an expected
  // result does not fail the run (expectations.h).
  std::string expected;

  // The identity of a result across runs (diff, merge): op, check, device, dtype.
  std::string key() const;
  // recorded_cause, or the outcome's own (conformance::cause_for_outcome); nullopt for a pass.
  std::optional<conformance::Cause> cause() const;
  // conformance::cause_key of cause(): "" for a pass (Note [One finding per cause]).
  std::string cause_key() const;
  bool operator==(const CaseResult&) const = default;
};

// What makes a run fail (--fail-on): a result with one of `outcomes`, or, with `untested`, a case
// on which no check tested anything (untested_cases). The report carries it, so that every writer
// (JUnit's <failure> against <skipped>, the console's verdict) agrees with the exit status.
struct FailPolicy {
  std::vector<Outcome> outcomes = {Outcome::failed, Outcome::crashed, Outcome::timed_out};
  bool untested = true;
  // An --expect entry that matched no result fails the run (one past its date always does).
  bool stale = false;

  bool fails_on(Outcome o) const;
  bool operator==(const FailPolicy&) const = default;
};
// "failed,crashed,timed_out,untested[,stale]" (the --fail-on spelling).
std::string to_string(const FailPolicy& policy);
// Parses a comma-separated list of outcome names, "untested" and "stale"; throws opconform::Error naming a
// bad name and the known ones, or for an empty list.
FailPolicy parse_fail_policy(std::string_view list);

struct RunInfo {
  std::string tool_version;         // opconform's version
  std::string library;              // what was checked: "reference", or the plugin's name and version
  std::string library_path;         // the shared library's path ("" for the bundled reference)
  std::vector<std::string> library_options;  // the plugin's options, "NAME=VALUE" (--plugin-option)
  std::string against;              // "reference", or "" when the library was checked on its own
  std::string command;              // the command line that made the report
  std::string started_at;           // UTC, ISO 8601 ("2026-12-01T03:04:05Z")
  uint64_t seed = 0;                // 0: each case's fixed seed
  int samples = 0;                  // generated samples per case and check
  std::string shard;                // "2/4", or "" when the run was not sharded (merge: "merged")
  // What gave the shard: "--shard", "slurm SLURM_ARRAY_TASK_ID=3" ("" when unsharded, and merged).
  std::string shard_source;
  FailPolicy fail_on;               // what fails this run (--fail-on)
  // The worker sandbox's active layers, in words ("" when nothing ran in workers: --jobs 0, or
  // the bundled reference in this process).
  std::string sandbox;
  // The run was stopped (SIGINT, SIGTERM) before every case ran: the report holds the cases that
  // finished, and it fails whatever they say (an unfinished run is no pass). Every writer says
  // "partial".
  bool interrupted = false;
  // The --expect file that was applied ("" when none).
  std::string expectations_file;
  bool operator==(const RunInfo&) const = default;
};

// One entry of an --expect file, as applied to a report (expectations.h has the format).
struct ExpectationEntry {
  enum class Status { active, stale, expired };
  int line = 0;              // its line in the file
  std::string selector;      // what it matches, as written ("cause=... op=aten::add*")
  std::string outcome;       // the expected outcome ("failed"), or "any"
  std::string reason;        // why it is expected (required)
  std::string until;         // "2027-03-01", or "" for no end
  size_t matched = 0;        // the results it covers in this report
  Status status = Status::active;  // stale: matched nothing; expired: past `until` (fails the run)
  bool operator==(const ExpectationEntry&) const = default;
};
std::string_view to_string(ExpectationEntry::Status status);

struct Report {
  // The layout of report.json (reports/README.md lists the versions): raised when a field is
  // added, so that a reader knows what it may find. report_from_json reads every version from
  // kOldestSchemaVersion on, a field an older file lacks taking its default.
  static constexpr int kSchemaVersion = 3;
  static constexpr int kOldestSchemaVersion = 1;
  RunInfo info;
  double seconds = 0;               // wall time of the whole run
  std::vector<CaseResult> results;  // in run order
  std::vector<ExpectationEntry> expectations;  // the --expect file's entries, applied (expectations.h)

  // Counts per outcome.
  size_t count(Outcome o) const;
  // Field by field (a report read back from JSON equals the one written).
  bool operator==(const Report&) const = default;
};

// A case (op x device x dtype) on which every check was skipped, unsupported or mistrusted: nothing was
// tested there, which is never a pass (ARCHITECTURE.md: the untested verdict). Load problems
// (check "load") are not cases.
struct UntestedCase {
  std::string op, device, dtype;
  std::vector<std::string> reasons;  // "check: outcome — first line of its message", per check
  std::string key() const;           // "op [device, dtype]"
};
std::vector<UntestedCase> untested_cases(const Report& report);

// Whether the report fails under its own policy (report.info.fail_on), or under `policy`: a
// result whose outcome the policy fails on and that no expectation covers, an untested case (with
// `untested`), a stale expectation (with `stale`), an expired one, or an interrupted run.
bool fails(const Report& report);
bool fails(const Report& report, const FailPolicy& policy);
// Parses an outcome name ("timed_out"); throws opconform::Error naming the bad name and the known ones.
Outcome parse_outcome(std::string_view name);

}  // namespace opconform::reports
