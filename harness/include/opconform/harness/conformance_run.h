// One conformance run from start to report: load the library (or take the bundled reference),
// plan the cases, run them (isolated in workers, or in this process), tell the listeners, write
// the report files atomically. `opconform run`, `check` and `repro` are this with other defaults.
#pragma once
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "opconform/adapters/loader.h"
#include "opconform/harness/plan.h"
#include "opconform/harness/worker_sandbox.h"
#include "opconform/reports/expectations.h"
#include "opconform/reports/report.h"
#include "opconform/reports/report_files.h"

namespace opconform::harness {

struct RunRequest {
  std::string library;             // a plugin's path; "" for the bundled reference
  adapters::PluginOptions plugin_options;  // --plugin-option NAME=VALUE, in order
  bool against_reference = false;  // compare with the reference (reference_agreement)
  PlanOptions plan;
  int jobs = 1;                    // worker processes; 0: run in this process (no isolation)
  int device_jobs = 1;             // WorkerOptions::device_jobs (--device-jobs; 0: no limit)
  double timeout_s = 60;           // per check, in workers
  bool keep_going_after_hang = false;  // WorkerOptions::keep_going_after_hang
  SandboxOptions sandbox;               // WorkerOptions::sandbox
  std::string report_dir = "opconform-report";  // default place of the four report files
  // Explicit paths by format flag (reports::report_formats(): "json", "junit", ...; "" = do not write).
  std::map<std::string, std::string, std::less<>> report_paths;
  bool write_reports = true;
  // The report files opened before the run (the CLI opens them while it checks its arguments);
  // null: run_conformance opens them from the paths above.
  std::shared_ptr<const reports::ReportFiles> report_files;
  bool verbose = false;            // print every non-passing result in full (repro)
  // The console (--color, --quiet): colour forced on or off (nullopt: console_options_for's
  // choice), and only the verdict and what failed.
  std::optional<bool> color;
  bool quiet = false;
  // --list-cases: print the planned cases (op, device, dtype, checks) and their counts to stdout
  // instead of running them; no report is written.
  bool list_cases = false;
  reports::FailPolicy fail_on;     // --fail-on (recorded in the report)
  // --expect FILE, read before the run (reports/expectations.h): applied to the results at the end.
  std::string expectations_file;
  std::vector<reports::Expectation> expectations;
  std::string command;             // the command line, for the report
};

// The report paths of a request.
reports::ReportPaths report_paths(const RunRequest& request);

struct RunOutcome {
  reports::Report report;    // also written to the files
  bool load_failed = false;  // the library could not be loaded at all
  size_t planned_cases = 0;  // cases this run (shard) planned: 0 means the filters matched nothing
  int stop_signal = 0;       // SIGINT or SIGTERM when the run was interrupted (report.info.interrupted)
  // --ops patterns that name no operator of the library (or the reference): a usage error, and
  // nothing ran.
  std::vector<std::string> unmatched_ops;
};

// Runs the request.
RunOutcome run_conformance(const RunRequest& request);

}  // namespace opconform::harness
