#include "opconform/harness/conformance_run.h"

#include <fcntl.h>
#include <fnmatch.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <iostream>

#include "opconform/adapters/loader.h"
#include "opconform/harness/case_runner.h"
#include "opconform/harness/worker_pool.h"
#include "opconform/reference/reference.h"
#include "opconform/reports/console.h"
#include "opconform/reports/listener.h"
#include "opconform/reports/writers.h"

namespace opconform::harness {
namespace {

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

// Loads the plugin once in a child process first: a library whose registration crashes (a
// constructor, register_ops) is reported as such instead of taking the harness down.
std::optional<reports::CaseResult> probe_load(const std::string& path, Registry& schemas, double timeout_s) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return std::nullopt;  // no probe: load directly
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]), ::close(fds[1]);
    return std::nullopt;
  }
  if (pid == 0) {
    ::close(fds[0]);
    default_fatal_signals();
    try {
      Registry scratch;
      auto lib = adapters::load_plugin(path, scratch, {.schemas = &schemas});
      _exit(0);
    } catch (const std::exception& e) {
      const std::string m = e.what();
      (void)!::write(fds[1], m.data(), m.size());
      _exit(1);
    }
  }
  ::close(fds[1]);
  std::string message;
  char chunk[4096];
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  bool timed_out = false;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 60'000))) <= 0) continue;
    const ssize_t n = ::read(fds[0], chunk, sizeof chunk);
    if (n <= 0) break;
    message.append(chunk, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  reports::CaseResult r;
  r.op = path, r.check = "load";
  if (timed_out) {
    r.outcome = reports::Outcome::timed_out;
    r.message = "plugin '" + path + "': loading it did not finish within " + std::to_string(static_cast<int>(timeout_s)) +
                " s (a library constructor or register_ops that never returns?)";
    return r;
  }
  if (WIFSIGNALED(status)) {
    r.outcome = reports::Outcome::crashed;
    r.message = "plugin '" + path + "': loading it crashed the process (" + describe_signal(WTERMSIG(status)) +
                "), in a library constructor or in register_ops";
    return r;
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return std::nullopt;
  r.outcome = reports::Outcome::failed;
  r.message = message.empty() ? "plugin '" + path + "': the load failed" : message;
  return r;
}

void write_reports(const RunRequest& request, const reports::Report& report) {
  const auto written = reports::write_report_files(
      report, {request.report_dir, request.json, request.junit, request.markdown, request.html});
  std::string list;
  for (const auto& p : written) list += (list.empty() ? "" : ", ") + p;
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

RunOutcome run_conformance(const RunRequest& request) {
  const auto start = std::chrono::steady_clock::now();
  std::optional<NotDumpable> not_dumpable;
  if (!request.library.empty() && request.jobs > 0) not_dumpable.emplace();
  RunOutcome outcome;
  reports::Report& report = outcome.report;
  report.info.tool_version = OPCONFORM_VERSION;
  report.info.command = request.command;
  report.info.started_at = utc_now();
  report.info.samples = request.plan.samples;
  report.info.seed = request.plan.seed.value_or(0);
  report.info.against = request.against_reference ? "reference" : "";
  report.info.fail_on = request.fail_on;
  if (request.plan.shard.count > 1)
    report.info.shard = std::to_string(request.plan.shard.index) + "/" + std::to_string(request.plan.shard.count);

  Registry reference;
  auto registration = reference::register_reference_ops(reference);
  Registry library_registry;
  std::unique_ptr<adapters::LoadedLibrary> library;
  std::vector<reports::CaseResult> load_results;
  std::string repro_prefix = "opconform run";
  if (!request.library.empty()) {
    report.info.library_path = request.library;
    report.info.library = request.library;
    repro_prefix = "opconform check --library " + quoted(request.library) + (request.against_reference ? "" : " --against none");
    std::optional<reports::CaseResult> failure = probe_load(request.library, reference, request.timeout_s);
    if (!failure) {
      try {
        library = adapters::load_plugin(request.library, library_registry, {.schemas = &reference});
      } catch (const std::exception& e) {
        failure = reports::CaseResult{request.library, "load", "", "", reports::Outcome::failed, e.what(), "", {}, 0};
      }
    }
    // Load results belong to shard 0 only (so shard reports merge), and to the ops --ops names.
    outcome.load_failed = failure.has_value();
    if (failure) {
      // The report still says what happened; nothing else can run.
      if (request.plan.shard.index == 0) load_results.push_back(*failure);
    } else {
      report.info.library = library->name() + (library->version().empty() ? "" : " " + library->version());
      for (const auto& p : library->problems()) {
        if (request.plan.shard.index == 0 && fnmatch(request.plan.ops.c_str(), p.op.c_str(), 0) == 0)
          load_results.push_back({p.op, "load", "", "", reports::Outcome::failed, p.message, "", {}, 0});
      }
    }
  } else {
    report.info.library = "reference";
  }
  if (request.plan.samples != 50) repro_prefix += " --samples " + std::to_string(request.plan.samples);
  // The samples depend on the tier: a repro line must ask for the same one.
  if (request.plan.large_percent) repro_prefix += " --large-percent " + std::to_string(*request.plan.large_percent);
  if (request.plan.large_max_numel)
    repro_prefix += " --large-max-numel " + std::to_string(*request.plan.large_max_numel);

  std::vector<PlannedCase> cases;
  Registry& under_test = request.library.empty() ? reference : library_registry;
  if (request.library.empty() || library) {
    PlanOptions plan = request.plan;
    plan.against_reference = request.against_reference;
    cases = plan_cases(under_test, library.get(), plan);
  }

  // Filters that match nothing are a usage error (exit_status): no run, no PASS line, no report.
  outcome.planned_cases = cases.size();
  if (cases.empty() && load_results.empty() && (request.library.empty() || library)) return outcome;

  reports::ConsoleOptions console_options = reports::console_options_for(stderr);
  console_options.fail_on = request.fail_on;
  reports::ConsoleListener console(stderr, console_options);
  reports::Listeners listeners;
  listeners.add(console);
  // Which sandbox layers the workers get on this machine, once, for the header and the report.
  if (request.jobs > 0) report.info.sandbox = describe_layers(probe_sandbox(request.sandbox), request.sandbox);
  listeners.on_run_start(report.info, cases.size());
  if (!load_results.empty()) {
    listeners.on_case_done(load_results, 0, cases.size());
    report.results = load_results;
  }

  CaseContext context{under_test,          request.against_reference ? &reference : nullptr,
                      request.library.empty() ? nullptr : &reference,
                      request.plan.samples, request.plan.seed,
                      request.plan.large_percent, request.plan.large_max_numel,
                      repro_prefix};
  std::vector<std::vector<reports::CaseResult>> by_case(cases.size());
  size_t done = 0;
  auto finished = [&](size_t index, std::vector<reports::CaseResult> results) {
    if (request.verbose) print_verbose(results);
    listeners.on_case_done(results, ++done, cases.size());
    by_case[index] = std::move(results);
  };
  StopSignals stop_signals;
  if (request.jobs == 0) {
    for (size_t i = 0; i < cases.size() && !StopSignals::stopped(); ++i)
      finished(i, run_case(context, cases[i], cases[i].checks));
  } else {
    CaseFunction run = [&](size_t index, size_t first_check, const std::function<void(size_t)>& on_check_start,
                           const std::function<void(const reports::CaseResult&)>& on_result) {
      const PlannedCase& c = cases[index];
      std::vector<std::string> checks(c.checks.begin() + static_cast<std::ptrdiff_t>(first_check), c.checks.end());
      run_case(
          context, c, checks,
          [&](const std::string& check) {
            for (size_t i = first_check; i < c.checks.size(); ++i)
              if (c.checks[i] == check) on_check_start(i);
          },
          on_result);
    };
    auto repro = [&](const reports::CaseResult& r) { return repro_line(repro_prefix, r, request.plan.seed.value_or(0)); };
    WorkerOptions options;
    options.jobs = request.jobs, options.timeout_s = request.timeout_s;
    options.keep_going_after_hang = request.keep_going_after_hang, options.sandbox = request.sandbox;
    options.repro = repro;
    options.stop = [] { return StopSignals::stopped(); };
    run_isolated(cases, run, options, finished);
  }
  outcome.stop_signal = g_stop_signal;
  report.info.interrupted = outcome.stop_signal != 0;
  for (auto& results : by_case)
    for (auto& r : results) report.results.push_back(std::move(r));
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  listeners.on_run_end(report);
  if (request.write_reports) write_reports(request, report);
  return outcome;
}

}  // namespace opconform::harness
