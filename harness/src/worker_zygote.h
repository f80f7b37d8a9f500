// Note [Workers from a zygote]: every worker would load the library under test itself
// (WorkerOptions::setup). For libtorch that load is ~0.7 s of CPU (relocating libtorch_cpu,
// ATen's static registrations), and the ATen check has ~70 crashes (integer division by zero,
// SIGSEGV in a few ops), each replaced by a new worker: a third of a 61 s run on 2 cores when
// every replacement loaded again. So the pool starts a zygote as it spawns its first worker: a
// process forked like a worker that enters the sandbox, runs the setup once, and then only forks
// new workers on request. The pool waits for it to load (at most the check time-out); every
// worker, the first ones included, is forked from it with the library loaded, in about a
// millisecond. (Until 2026-12-05 the zygote started at the first replacement, and the first
// workers, the first replacement and the zygote each loaded: five loads on 2 cores.)
//
// The pool keeps its view of workers as its own children, whose deaths it sees with waitpid: the
// zygote forks twice (the middle process exits at once), and the harness is the child subreaper
// while a zygote runs, so the worker is re-parented to it. A worker waits until it has been, then
// asks to die with the harness (PR_SET_PDEATHSIG) and checks its parent once more. Orphans that a
// kernel's forked processes leave are reaped as strays meanwhile (reap_strays).
//
// The zygote is an optimisation, never a behaviour: whenever it cannot be used — it started
// threads while loading (a fork would leave them out of every worker: an OpenMP or driver pool),
// it died, hung or answered nonsense (it ran the library's constructors, so its answers are
// checked like a worker's) — the pool stops it and spawns workers as before, each loading the
// library (a library that cannot be loaded is then reported by the worker that tried, as without
// a zygote). It is not started for device cases (a library that initialised CUDA cannot be
// forked) or when there is no setup.
#pragma once
#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>

#include "opconform/harness/child_process.h"

namespace opconform::harness {

// The ends a new worker gets: where it reads requests, writes replies, writes its stdout and
// stderr, and the running-note page (a memfd).
struct WorkerChildEnds {
  int requests = -1, replies = -1, output = -1, note = -1;
};

class WorkerZygote {
 public:
  // In the zygote: gets it ready to load (the sandbox, fds it must not hold); runs first.
  using Prepare = std::function<void()>;
  // In a worker forked from the zygote, once its parent is the harness: becomes the worker.
  using BecomeWorker = std::function<void(const WorkerChildEnds&)>;

  WorkerZygote() = default;
  WorkerZygote(const WorkerZygote&) = delete;
  WorkerZygote& operator=(const WorkerZygote&) = delete;
  ~WorkerZygote() { stop(); }

  // Forks the zygote, which runs `prepare`, then `setup`, then serves fork requests. Returns at
  // once; ready() tells when it can serve.
  void start(const Prepare& prepare, const std::function<void()>& setup, const BecomeWorker& become);
  bool started() const { return state_ != State::off; }
  // Whether this process is the child subreaper for it now (orphans are re-parented here).
  bool adopting() const { return subreaper_; }
  // True once it said it loaded and may be forked; false while it loads, and for good once it
  // refused or failed (then it has been stopped).
  bool ready();
  // ready(), waiting for the load to end for at most `limit`, or until `stop` says so; a zygote
  // still loading then is stopped (a library whose load hangs is left to the workers' own
  // time-outs).
  bool wait_ready(std::chrono::milliseconds limit, const std::function<bool()>& stop = {});
  // A new worker (a child of this process by now) holding `ends`; -1 when the zygote failed,
  // which stops it. The caller closes its copies of `ends` either way.
  pid_t fork_worker(const WorkerChildEnds& ends, const std::function<bool(pid_t)>& known_pid);
  // Kills the zygote and ends the subreaper role.
  void stop();
  pid_t pid() const { return child_.pid(); }
  // Why it is not used, once it is not ("" while it is).
  const std::string& why_not() const { return why_not_; }

 private:
  void fail(std::string why);

  enum class State { off, loading, ready, failed };
  State state_ = State::off;
  ChildProcess child_;  // the zygote; its channel 0: SOCK_SEQPACKET to it
  bool subreaper_ = false;  // this process was made a child subreaper for it
  std::string why_not_;
};

// While this process is a child subreaper (a zygote runs), processes that were not its children
// (what a killed worker's kernel forked) are re-parented to it: reaps those that ended, leaving
// the ones `known_pid` names (workers, the zygote) to their owners. A program that runs children
// of its own beside run_isolated would have those reaped too: it can turn the zygote off
// (WorkerOptions::zygote).
void reap_strays(const std::function<bool(pid_t)>& known_pid);

}  // namespace opconform::harness
