#include "opconform/harness/conformance_run.h"

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
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
std::optional<reports::CaseResult> probe_load(const std::string& path, Registry& schemas) {
  int fds[2];
  if (::pipe(fds) != 0) return std::nullopt;  // no probe: load directly
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
  for (ssize_t n; (n = ::read(fds[0], chunk, sizeof chunk)) > 0;) message.append(chunk, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  reports::CaseResult r;
  r.op = path, r.check = "load";
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
  const std::filesystem::path dir = request.report_dir;
  auto path_of = [&](const std::optional<std::string>& given, const char* file) -> std::string {
    if (given) return *given;
    return (dir / file).string();
  };
  const struct {
    std::string path;
    std::string (*write)(const reports::Report&);
  } outputs[] = {
      {path_of(request.json, "report.json"), reports::to_json},
      {path_of(request.junit, "junit.xml"), reports::to_junit},
      {path_of(request.markdown, "report.md"), reports::to_markdown},
      {path_of(request.html, "report.html"), reports::to_html},
  };
  std::string written;
  for (const auto& o : outputs) {
    if (o.path.empty()) continue;
    reports::write_atomically(o.path, o.write(report));
    written += (written.empty() ? "" : ", ") + o.path;
  }
  if (!written.empty()) std::fprintf(stderr, "opconform: report written: %s\n", written.c_str());
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

reports::Report run_conformance(const RunRequest& request) {
  const auto start = std::chrono::steady_clock::now();
  reports::Report report;
  report.info.tool_version = OPCONFORM_VERSION;
  report.info.command = request.command;
  report.info.started_at = utc_now();
  report.info.samples = request.plan.samples;
  report.info.seed = request.plan.seed.value_or(0);
  report.info.against = request.against_reference ? "reference" : "";
  if (request.plan.shard.count > 1)
    report.info.shard = std::to_string(request.plan.shard.index) + "/" + std::to_string(request.plan.shard.count);

  Registry reference;
  auto registration = reference::register_reference_ops(reference);
  Registry library_registry;
  std::unique_ptr<adapters::LoadedLibrary> library;
  std::string repro_prefix = "opconform run";
  if (!request.library.empty()) {
    report.info.library_path = request.library;
    report.info.library = request.library;
    repro_prefix = "opconform check --library " + request.library + (request.against_reference ? "" : " --against none");
    std::optional<reports::CaseResult> failure = probe_load(request.library, reference);
    if (!failure) {
      try {
        library = adapters::load_plugin(request.library, library_registry, {.schemas = &reference});
      } catch (const std::exception& e) {
        failure = reports::CaseResult{request.library, "load", "", "", reports::Outcome::failed, e.what(), "", {}, 0};
      }
    }
    if (failure) {
      // The report still says what happened; nothing else can run.
      report.results.push_back(*failure);
      std::fprintf(stderr, "opconform: %s\n", failure->message.c_str());
    } else {
      report.info.library = library->name() + (library->version().empty() ? "" : " " + library->version());
      for (const auto& p : library->problems()) {
        report.results.push_back({p.op, "load", "", "", reports::Outcome::failed, p.message, "", {}, 0});
      }
    }
  } else {
    report.info.library = "reference";
  }
  if (request.plan.samples != 50) repro_prefix += " --samples " + std::to_string(request.plan.samples);

  std::vector<PlannedCase> cases;
  Registry& under_test = request.library.empty() ? reference : library_registry;
  if (request.library.empty() || library) {
    PlanOptions plan = request.plan;
    plan.against_reference = request.against_reference;
    cases = plan_cases(under_test, library.get(), plan);
  }

  reports::ConsoleListener console(stderr, reports::console_options_for(stderr));
  reports::Listeners listeners;
  listeners.add(console);
  listeners.on_run_start(report.info, cases.size());

  CaseContext context{under_test, request.against_reference ? &reference : nullptr, request.plan.samples,
                      request.plan.seed, repro_prefix};
  std::vector<std::vector<reports::CaseResult>> by_case(cases.size());
  size_t done = 0;
  auto finished = [&](size_t index, std::vector<reports::CaseResult> results) {
    if (request.verbose) print_verbose(results);
    listeners.on_case_done(results, ++done, cases.size());
    by_case[index] = std::move(results);
  };
  if (request.jobs == 0) {
    for (size_t i = 0; i < cases.size(); ++i) finished(i, run_case(context, cases[i], cases[i].checks));
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
    run_isolated(cases, run, {request.jobs, request.timeout_s}, finished);
  }
  for (auto& results : by_case)
    for (auto& r : results) report.results.push_back(std::move(r));
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  listeners.on_run_end(report);
  if (request.write_reports) write_reports(request, report);
  return report;
}

}  // namespace opconform::harness
