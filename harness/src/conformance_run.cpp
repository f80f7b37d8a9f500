#include "opconform/harness/conformance_run.h"

#include <signal.h>
#include <sys/prctl.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <iostream>

#include "opconform/adapters/loader.h"
#include "opconform/harness/case_runner.h"
#include "opconform/harness/library_probe.h"
#include "opconform/harness/name_filter.h"
#include "opconform/harness/worker_pool.h"
#include "opconform/reference/reference.h"
#include "opconform/reports/console.h"
#include "opconform/reports/listener.h"
#include "opconform/reports/report_files.h"
#include "opconform/reports/writers.h"

namespace opconform::harness {
namespace {

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

// The library as a worker (or, under --jobs 0, this process) loads it: filled on first use, in
// the process that runs the cases (Note [No plugin code in the harness]).
struct LoadedHere {
  Registry registry;
  std::unique_ptr<adapters::LoadedLibrary> library;
  std::string error;  // the load threw (it loaded in the probe)

  // Never unloaded: its destructors could crash or rewrite the reports (under --jobs 0 this is
  // the harness process).
  ~LoadedHere() { (void)library.release(); }

  void load(const std::string& path, const adapters::PluginOptions& options, const Registry& schemas) {
    try {
      library = adapters::load_plugin(path, registry, {.schemas = &schemas, .plugin_options = options});
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
};

// Every check of the case failed with why the library is missing here.
std::vector<reports::CaseResult> not_loaded(const PlannedCase& c, const std::vector<std::string>& checks,
                                            const std::string& error,
                                            const std::function<void(const std::string&)>& on_check_start,
                                            const std::function<void(const reports::CaseResult&)>& on_result) {
  std::vector<reports::CaseResult> out;
  for (const auto& check : checks) {
    if (on_check_start) on_check_start(check);
    reports::CaseResult r;
    r.op = c.op, r.check = check, r.device = c.device, r.dtype = c.dtype, r.outcome = reports::Outcome::failed;
    r.message = "the library loaded in the probe but not in the process running the checks: " + error;
    if (on_result) on_result(r);
    out.push_back(std::move(r));
  }
  return out;
}

void write_reports(const reports::ReportFiles& files, const reports::Report& report) {
  std::string list;
  for (const auto& p : files.write(report)) list += (list.empty() ? "" : ", ") + p;
  if (!list.empty()) std::fprintf(stderr, "opconform: report written: %s\n", list.c_str());
}

void print_verbose(const std::vector<reports::CaseResult>& results) {
  for (const auto& r : results) {
    std::cout << r.op << " " << r.check << " [" << r.device << (r.dtype.empty() ? "" : ", " + r.dtype)
              << "]: " << conformance::to_string(r.outcome) << "\n";
    if (r.outcome != reports::Outcome::passed) {
      if (!r.message.empty()) std::cout << "  " << r.message << "\n";
      if (r.minimal_input) std::cout << "  minimal input: " << *r.minimal_input << "\n";
      if (!r.repro.empty()) std::cout << "  repro: " << r.repro << "\n";
    }
  }
}

// Every operator --ops can name: the library's (with or without a schema, and those whose
// registration failed) or the reference's.
std::vector<std::string> op_names(const adapters::LibraryManifest* library, const Registry& reference) {
  std::vector<std::string> names;
  if (library == nullptr) {
    for (const auto& info : reference::reference_op_infos(reference)) names.push_back(info.name);
    return names;
  }
  for (const auto& op : library->ops) names.push_back(op.name);
  for (const auto& p : library->problems) names.push_back(p.op);
  return names;
}

// --list-cases: what would run, one case a line, then the counts (stdout, for scripts).
void print_cases(const std::vector<PlannedCase>& cases, const std::vector<reports::CaseResult>& load_results) {
  std::vector<std::string> ops;
  size_t checks = 0;
  for (const auto& c : cases) {
    std::string list;
    for (const auto& check : c.checks) list += (list.empty() ? "" : ",") + check;
    std::cout << reports::console_text(c.op) << "  " << c.device << "  " << c.dtype << "  " << list << "\n";
    ops.push_back(c.op);
    checks += c.checks.size();
  }
  std::sort(ops.begin(), ops.end());
  ops.erase(std::unique(ops.begin(), ops.end()), ops.end());
  for (const auto& r : load_results)
    std::cout << "load problem: " << reports::console_text(r.op) << ": " << reports::console_text(r.message) << "\n";
  std::cout << cases.size() << (cases.size() == 1 ? " case" : " cases") << " (" << ops.size() << " ops), " << checks
            << " checks to run\n";
}

}  // namespace

namespace {
// SIGINT and SIGTERM stop the run where it is: the cases that finished are reported, marked
// interrupted (a partial report fails), instead of the process dying with no report at all.
volatile std::sig_atomic_t g_stop_signal = 0;
extern "C" void on_stop_signal(int signal) { g_stop_signal = signal; }

struct StopSignals {
  struct sigaction previous_int {}, previous_term {};
  StopSignals() {
    g_stop_signal = 0;
    struct sigaction action {};
    action.sa_handler = on_stop_signal;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGINT, &action, &previous_int);  // no SA_RESTART: poll returns at once
    ::sigaction(SIGTERM, &action, &previous_term);
  }
  ~StopSignals() {
    ::sigaction(SIGINT, &previous_int, nullptr);
    ::sigaction(SIGTERM, &previous_term, nullptr);
  }
  static bool stopped() { return g_stop_signal != 0; }
};

// While a library runs in workers, the harness is not dumpable: a process of the same user (a
// worker) cannot ptrace it or read its /proc/<pid>/mem or environ (Note [The worker sandbox]).
struct NotDumpable {
  int previous = ::prctl(PR_GET_DUMPABLE);
  NotDumpable() { ::prctl(PR_SET_DUMPABLE, 0); }
  ~NotDumpable() { ::prctl(PR_SET_DUMPABLE, previous > 0 ? previous : 1); }
};
}  // namespace

reports::ReportPaths report_paths(const RunRequest& request) {
  return {request.report_dir, request.report_paths};
}

namespace {

// The report header's fields that the request alone decides.
reports::RunInfo run_info(const RunRequest& request) {
  reports::RunInfo info;
  info.tool_version = OPCONFORM_VERSION;
  info.command = request.command;
  info.started_at = utc_now();
  info.samples = request.plan.samples;
  info.seed = request.plan.seed.value_or(0);
  info.against = request.against_reference ? "reference" : "";
  info.fail_on = request.fail_on;
  if (request.plan.shard.count > 1) {
    info.shard = std::to_string(request.plan.shard.index) + "/" + std::to_string(request.plan.shard.count);
    info.shard_source = request.plan.shard.source;
  }
  return info;
}

// What the probe learnt of the library (Note [No plugin code in the harness]), and the start of
// every repro line.
struct ProbedLibrary {
  std::optional<adapters::LibraryManifest> manifest;  // none for the reference, or when it did not load
  std::vector<reports::CaseResult> load_results;      // the load's failure or per-op problems
  bool load_failed = false;
  std::string repro_prefix = "opconform run";
};

ProbedLibrary probe_requested_library(const RunRequest& request, const Registry& reference,
                                      const SandboxOptions& sandbox, reports::RunInfo& info) {
  ProbedLibrary out;
  if (request.library.empty()) {
    info.library = "reference";
  } else {
    // Absolute, so that a repro line replays from any directory (the report folder is often not
    // where the run started).
    const std::string library = std::filesystem::absolute(request.library).lexically_normal().string();
    info.library_path = library;
    info.library = request.library;
    out.repro_prefix =
        "opconform check --library " + quoted(library) + (request.against_reference ? "" : " --against none");
    // The options choose what the plugin loads: a repro line without them checks something else.
    for (const auto& option : request.plugin_options) {
      const std::string text = adapters::format_plugin_option(option);
      info.library_options.push_back(text);
      out.repro_prefix += " --plugin-option " + quoted(text);
    }
    ProbeResult probe = probe_library(request.library, reference, request.timeout_s, sandbox, request.plugin_options);
    // Load results belong to shard 0 only (so shard reports merge), and to the ops --ops names.
    out.load_failed = probe.failure.has_value();
    if (probe.failure) {
      // The report still says what happened; nothing else can run.
      if (request.plan.shard.index == 0) out.load_results.push_back(*probe.failure);
    } else {
      out.manifest = std::move(probe.manifest);
      info.library = out.manifest->name + (out.manifest->version.empty() ? "" : " " + out.manifest->version);
      const NameFilter ops(request.plan.ops);
      for (const auto& p : out.manifest->problems) {
        if (request.plan.shard.index == 0 && ops.matches(p.op))
          out.load_results.push_back({p.op, "load", "", "", reports::Outcome::failed, p.message, "", {}, 0});
      }
    }
  }
  // Every flag that changes a verdict (issue: a hang replayed without --timeout waited 60 s).
  if (request.timeout_s != RunRequest{}.timeout_s) {
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%g", request.timeout_s);
    out.repro_prefix += std::string(" --timeout ") + seconds;
  }
  // thread_safety's thread count (Note [As many threads as can run at once]) decides what it can meet.
  if (const char* threads = std::getenv("OPCONFORM_THREAD_SAFETY_THREADS"); threads != nullptr && *threads != '\0')
    out.repro_prefix = "OPCONFORM_THREAD_SAFETY_THREADS=" + quoted(threads) + " " + out.repro_prefix;
  if (request.plan.samples != 50) out.repro_prefix += " --samples " + std::to_string(request.plan.samples);
  // The samples depend on the tier: a repro line must ask for the same one.
  if (request.plan.large_percent) out.repro_prefix += " --large-percent " + std::to_string(*request.plan.large_percent);
  if (request.plan.large_max_numel)
    out.repro_prefix += " --large-max-numel " + std::to_string(*request.plan.large_max_numel);
  return out;
}

}  // namespace

RunOutcome run_conformance(const RunRequest& request) {
  const auto start = std::chrono::steady_clock::now();
  // Opened first: reports that cannot be written fail the run before anything ran.
  std::shared_ptr<const reports::ReportFiles> report_files = request.report_files;
  if (request.write_reports && !report_files) report_files = std::make_shared<reports::ReportFiles>(report_paths(request));
  SandboxOptions sandbox = request.sandbox;
  if (report_files)
    for (const auto& dir : report_files->directories()) sandbox.read_only.push_back(dir.string());
  std::optional<NotDumpable> not_dumpable;
  if (!request.library.empty() && request.jobs > 0) not_dumpable.emplace();
  if (request.jobs > 0) one_openmp_thread_per_worker();  // Note [One OpenMP thread per worker]
  RunOutcome outcome;
  reports::Report& report = outcome.report;
  report.info = run_info(request);

  Registry reference;
  auto registration = reference::register_reference_ops(reference);
  ProbedLibrary probed = probe_requested_library(request, reference, sandbox, report.info);
  outcome.load_failed = probed.load_failed;
  const std::optional<adapters::LibraryManifest>& manifest = probed.manifest;
  std::vector<reports::CaseResult>& load_results = probed.load_results;
  const std::string& repro_prefix = probed.repro_prefix;

  std::vector<PlannedCase> cases;
  const bool loadable = request.library.empty() || manifest.has_value();
  if (loadable) {
    PlanOptions plan = request.plan;
    plan.against_reference = request.against_reference;
    cases = plan_cases(manifest ? &*manifest : nullptr, reference, plan);
  }

  // Filters that match nothing are a usage error (exit_status): no run, no PASS line, no report.
  outcome.planned_cases = cases.size();
  if (loadable) outcome.unmatched_ops = NameFilter(request.plan.ops).unmatched(op_names(manifest ? &*manifest : nullptr, reference));
  if (!outcome.unmatched_ops.empty() || (cases.empty() && load_results.empty() && loadable)) return outcome;
  if (request.list_cases) {
    print_cases(cases, load_results);
    return outcome;
  }

  reports::ConsoleOptions console_options = reports::console_options_for(stderr);
  console_options.fail_on = request.fail_on;
  if (request.color) console_options.color = *request.color;
  console_options.quiet = request.quiet;
  reports::ConsoleListener console(stderr, console_options);
  reports::Listeners listeners;
  listeners.add(console);
  // Which sandbox layers the workers get on this machine, once, for the header and the report.
  if (request.jobs > 0) report.info.sandbox = describe_layers(probe_sandbox(sandbox), sandbox);
  listeners.on_run_start(report.info, cases.size());
  // Results an --expect entry covers are marked as they come, so the console does not print an
  // expected finding as a failure (apply_expectations gives the same marks at the end).
  const std::string today = reports::today_utc();
  const auto mark_expected = [&](std::vector<reports::CaseResult>& results) {
    for (auto& r : results) r.expected = reports::expected_reason(request.expectations, r, today);
  };
  if (!load_results.empty()) {
    mark_expected(load_results);
    listeners.on_case_done(load_results, 0, cases.size());
    report.results = load_results;
  }

  // The library is loaded where the cases run: in each worker (WorkerOptions::setup), or here
  // under --jobs 0. The harness itself only has the reference.
  LoadedHere here;
  const auto load_here = [&] {
    if (!request.library.empty()) here.load(request.library, request.plugin_options, reference);
  };
  const auto run_here = [&](const PlannedCase& c, const std::vector<std::string>& checks,
                            const std::function<void(const std::string&)>& on_check_start,
                            const std::function<void(const reports::CaseResult&)>& on_result) {
    if (!request.library.empty() && !here.library) return not_loaded(c, checks, here.error, on_check_start, on_result);
    const CaseContext context{request.library.empty() ? reference : here.registry,
                              request.against_reference ? &reference : nullptr,
                              request.library.empty() ? nullptr : &reference,
                              request.plan.samples, request.plan.seed,
                              request.plan.large_percent, request.plan.large_max_numel,
                              repro_prefix};
    return run_case(context, c, checks, on_check_start, on_result);
  };
  std::vector<std::vector<reports::CaseResult>> by_case(cases.size());
  size_t done = 0;
  auto finished = [&](size_t index, std::vector<reports::CaseResult> results) {
    mark_expected(results);
    if (request.verbose) print_verbose(results);
    listeners.on_case_done(results, ++done, cases.size());
    by_case[index] = std::move(results);
  };
  StopSignals stop_signals;
  if (request.jobs == 0) {
    if (!cases.empty()) load_here();
    for (size_t i = 0; i < cases.size() && !StopSignals::stopped(); ++i)
      finished(i, run_here(cases[i], cases[i].checks, {}, {}));
  } else {
    CaseFunction run = [&](size_t index, size_t first_check, const std::function<void(size_t)>& on_check_start,
                           const std::function<void(const reports::CaseResult&)>& on_result) {
      const PlannedCase& c = cases[index];
      std::vector<std::string> checks(c.checks.begin() + static_cast<std::ptrdiff_t>(first_check), c.checks.end());
      run_here(
          c, checks,
          [&](const std::string& check) {
            for (size_t i = first_check; i < c.checks.size(); ++i)
              if (c.checks[i] == check) on_check_start(i);
          },
          on_result);
    };
    // The harness's own results (crashed, timed_out) replay with the case's seed, as the worker's do.
    const CaseContext seeds{reference, nullptr, nullptr, request.plan.samples, request.plan.seed,
                            request.plan.large_percent, request.plan.large_max_numel, repro_prefix};
    auto repro = [&](const reports::CaseResult& r) {
      return repro_line(repro_prefix, r, case_generate_spec(seeds, {r.op, r.device, r.dtype, {}}).seed);
    };
    WorkerOptions options;
    options.jobs = request.jobs, options.device_jobs = request.device_jobs, options.timeout_s = request.timeout_s;
    options.keep_going_after_hang = request.keep_going_after_hang, options.sandbox = sandbox;
    options.repro = repro;
    options.stop = [] { return StopSignals::stopped(); };
    options.setup = load_here;
    // Note [Workers from a zygote]; OPCONFORM_ZYGOTE=0 measures the run without it.
    if (const char* zygote = std::getenv("OPCONFORM_ZYGOTE"); zygote != nullptr && std::string(zygote) == "0")
      options.zygote = false;
    options.on_running = [&](const std::vector<WorkerOptions::Running>& running) {
      std::vector<reports::RunningCheck> now;
      for (const auto& r : running) {
        const PlannedCase& c = cases[r.case_index];
        now.push_back({c.op, r.check_index < c.checks.size() ? c.checks[r.check_index] : "", c.device, c.dtype, r.seconds});
      }
      listeners.on_running(now);
    };
    run_isolated(cases, run, options, finished);
  }
  outcome.stop_signal = g_stop_signal;
  report.info.interrupted = outcome.stop_signal != 0;
  for (auto& results : by_case)
    for (auto& r : results) report.results.push_back(std::move(r));
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!request.expectations_file.empty()) {
    report.info.expectations_file = request.expectations_file;
    reports::apply_expectations(report, request.expectations, today);
  }
  listeners.on_run_end(report);
  if (report_files) write_reports(*report_files, report);
  return outcome;
}

}  // namespace opconform::harness
