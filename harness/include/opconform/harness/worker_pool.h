// Isolated execution: cases run in worker processes forked from the harness, so a kernel that
// crashes (a signal) or hangs (past the time-out) costs one check, not the run.
//
// Protocol: the harness sends "<case index> <first check index>" lines; a worker replies in
// frames (worker_frames.h) on a pipe at a high fd: "L" once, as it starts its setup (loading the
// library), "S <check index>" as each check starts, "W" when the check's kernel left threads
// running that the worker waits for before it sends the result (a crash then is that check's),
// "R <json result>" as each result is known, "X" after a result when it ends itself because its
// CUDA context is lost (Note [A CUDA fault ends the worker], core/cuda.h: the case goes on in a
// new worker), and "D" when the case is done. The channel is
// untrusted (Note [The worker channel is untrusted] in worker_pool.cpp): a malformed or forged
// message makes the running check `crashed` ("protocol error") and replaces the worker. A worker
// that dies mid-check gets that check reported `crashed` (with the signal; death is seen by
// waitpid); one silent past the time-out on a check is killed, with its process group, and the
// check `timed_out`. Either way a fresh worker continues with the case's next check. Healthy
// workers are reused.
#pragma once
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "opconform/harness/plan.h"
#include "opconform/harness/worker_sandbox.h"
#include "opconform/reports/report.h"

namespace opconform::harness {

struct WorkerOptions {
  int jobs = 1;              // worker processes
  double timeout_s = 60;     // per check
  // After a check timed out, run the case's remaining checks too (default: they are skipped).
  bool keep_going_after_hang = false;
  SandboxOptions sandbox;  // what each worker enters (worker_sandbox.h)
  // Asked between events: true stops the run (workers killed, unfinished cases left out).
  std::function<bool()> stop;
  // The repro line of a result the harness makes itself (crashed, timed_out).
  std::function<std::string(const reports::CaseResult&)> repro;
  // Run in each worker once, inside the sandbox, before its first case: where it loads the
  // library under test (Note [No plugin code in the harness]). Must not throw. A worker that
  // dies or hangs in it costs the check it was started for (its message says "while the worker
  // loaded the library"), and no further worker is started: checks that would need one are
  // skipped, saying why.
  std::function<void()> setup;
  // Replacement workers (after a crash, a time-out or a protocol error) are forked from a process
  // that ran `setup` once, instead of running it again: Note [Replacement workers from a
  // zygote] (harness/src/worker_zygote.h). Only CPU cases; off when false.
  bool zygote = true;
  // Called about twice a second with the checks running now: (case index, check index, seconds
  // it has run), the longest-running first.
  struct Running {
    size_t case_index, check_index;
    double seconds;
  };
  std::function<void(const std::vector<Running>&)> on_running;
  // At most this many workers run cases of a device other than the CPU at once (0: no limit):
  // Note [One CUDA worker per GPU] in worker_pool.cpp. The other workers take CPU cases meanwhile.
  int device_jobs = 0;
};

// Runs a case's checks from `first_check` on (in the worker: in-process, after fork), telling
// on_check_start of each check as it starts and on_result of each result as it is known.
using CaseFunction = std::function<void(size_t case_index, size_t first_check,
                                        const std::function<void(size_t check_index)>& on_check_start,
                                        const std::function<void(const reports::CaseResult&)>& on_result)>;

// Runs every case of `cases` through `run` in workers; `on_done(case_index, results)` is called in
// this process as each case completes (results in check order, one per check).
void run_isolated(const std::vector<PlannedCase>& cases, const CaseFunction& run, const WorkerOptions& options,
                  const std::function<void(size_t, std::vector<reports::CaseResult>)>& on_done);

// In a worker: what the running check is on now (a sample's description), kept in memory the
// harness reads when the worker dies or is stopped, so a crashed or timed_out result names its
// sample. Cheap (a copy of at most 4 KB); does nothing outside a worker.
void note_running(std::string_view text);
// Whether this process is a worker (note_running keeps what it is told).
bool in_worker();

// In a child that runs untrusted code: the fatal signals back to their default action, so a crash
// ends the process with its signal even where a sanitizer installed handlers of its own.
void default_fatal_signals();

// "SIGSEGV (segmentation fault)" for a signal number.
std::string describe_signal(int signal);

}  // namespace opconform::harness
