#include "opconform/harness/worker_pool.h"

#include "crash_backtrace.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <deque>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include "opconform/core/cuda.h"
#include "opconform/core/detail/capped_text.h"
#include "opconform/core/error.h"
#include "opconform/harness/child_process.h"
#include "opconform/harness/worker_frames.h"
#include "opconform/reports/writers.h"
#include "worker_zygote.h"

namespace opconform::harness {
namespace {

// What a worker's result may carry in its message and its minimal input (Note [A library's message
// has a size]): more than a kernel's own message (16 KiB), for the check's words around it.
constexpr size_t kMaxWorkerText = 64 * 1024;

using Clock = std::chrono::steady_clock;
using reports::CaseResult;

// What a worker notes about its running check (note_running), in a shared page the pool maps
// before the fork and reads after the worker ended. The library can scribble on it like on any of
// its memory: what the harness reads is bounded and shown as data.
struct RunningNote {
  std::atomic<uint32_t> length{0};
  char text[4096 - sizeof(std::atomic<uint32_t>)];
};
RunningNote* g_running_note = nullptr;  // set in a worker only

// The page is a memfd, so a worker forked from the zygote (Note [Replacement workers from a
// zygote]) can map it too: `fd` goes to it, the harness closes its copy once the worker exists.
struct RunningNotePage {
  int fd = -1;
  RunningNote* note = nullptr;
};

RunningNote* map_running_note_fd(int fd) {
  void* page = ::mmap(nullptr, sizeof(RunningNote), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  return page == MAP_FAILED ? nullptr : static_cast<RunningNote*>(page);
}

RunningNotePage make_running_note() {
  RunningNotePage page;
  page.fd = ::memfd_create("opconform-running-note", MFD_CLOEXEC);
  if (page.fd < 0) return page;
  if (::ftruncate(page.fd, sizeof(RunningNote)) != 0 || (page.note = map_running_note_fd(page.fd)) == nullptr) {
    ::close(page.fd);
    return RunningNotePage{};
  }
  new (page.note) RunningNote;
  return page;
}

std::string read_running_note(const RunningNote* note) {
  if (note == nullptr) return "";
  const uint32_t n = std::min<uint32_t>(note->length.load(), sizeof note->text);
  return std::string(note->text, n);
}

// ---- the worker side (after fork) ----

// Note [Threads a kernel leaves running]: a kernel may start a thread that goes on after the
// kernel returned, and crash there 100 ms later, when the worker is already in the next check.
// So the worker notes its threads as each check starts; when the check's result is ready and
// threads started since are still alive, it says so ("W") and waits for them to end, up to
// kSettleTime, before it sends the result: a crash meanwhile is the check's own ("on a thread
// the check left running"). Threads that live on past that (a library's thread pool) are waited
// for once, in the check that started them. opconform's own threads (named "opc-...", the
// thread_safety pool) are not waited for.
constexpr auto kSettleTime = std::chrono::milliseconds(250);

// The ids of this process's threads that are not opconform's own, sorted. Read before and after
// every check: a thread's name (/proc/self/task/N/comm) is read once, the first time its id is
// seen; `known_foreign` (an earlier answer) and the ids already found to be opconform's are not
// read again (opconform's threads never end, so their ids are not reused).
std::vector<pid_t> foreign_threads(const std::vector<pid_t>& known_foreign = {}) {
  static std::vector<pid_t> own;  // sorted
  std::vector<pid_t> out;
  DIR* dir = ::opendir("/proc/self/task");
  if (dir == nullptr) return out;
  while (const dirent* e = ::readdir(dir)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    const pid_t tid = static_cast<pid_t>(std::strtol(e->d_name, nullptr, 10));
    if (std::binary_search(own.begin(), own.end(), tid)) continue;
    if (std::binary_search(known_foreign.begin(), known_foreign.end(), tid)) {
      out.push_back(tid);
      continue;
    }
    char path[64], comm[32] = {};
    std::snprintf(path, sizeof path, "/proc/self/task/%d/comm", static_cast<int>(tid));
    if (const int fd = ::open(path, O_RDONLY | O_CLOEXEC); fd >= 0) {
      (void)!::read(fd, comm, sizeof comm - 1);
      ::close(fd);
    }
    if (std::strncmp(comm, "opc-", 4) != 0) {
      out.push_back(tid);
    } else {
      own.insert(std::upper_bound(own.begin(), own.end(), tid), tid);
    }
  }
  ::closedir(dir);
  std::sort(out.begin(), out.end());
  return out;
}

// Waits (up to kSettleTime) until no thread of `now` that is not in `before` is alive; false
// when the time ran out.
bool settle(const std::vector<pid_t>& before, std::vector<pid_t> now) {
  const auto deadline = Clock::now() + kSettleTime;
  for (;;) {
    std::vector<pid_t> started;
    std::set_difference(now.begin(), now.end(), before.begin(), before.end(), std::back_inserter(started));
    if (started.empty()) return true;
    if (Clock::now() >= deadline) return false;
    ::usleep(2000);
    now = foreign_threads(now);
  }
}

// Note [A CUDA fault ends the worker] (core/cuda.h): the check during which the device faulted.
CaseResult with_device_fault(CaseResult r, const std::string& fault) {
  const std::string said = r.message;
  r.outcome = conformance::Outcome::crashed;
  r.recorded_cause = conformance::Cause{conformance::FindingKind::crash, "cuda fault", "a CUDA kernel faulted"};
  r.message = "a CUDA kernel faulted in this check: synchronising the device after it returned '" + fault +
              "'; the process's CUDA context is lost, so the next check runs in a new worker" +
              (said.empty() ? "" : "; the check itself said: " + said);
  return r;
}

[[noreturn]] void worker_main(int requests, int replies, const CaseFunction& run, const std::function<void()>& setup);

// In a new worker, whichever way it was started: its channel on high fds, where a kernel writing
// to "its" fd 1, 2 or 3 does not land; what a kernel prints on stdout or stderr (glibc's "double
// free" among it) into `output`, which goes with the result and never to opconform's own stdout.
[[noreturn]] void become_worker(const WorkerChildEnds& ends, const CaseFunction& run, const std::function<void()>& setup) {
  const int requests = ::fcntl(ends.requests, F_DUPFD_CLOEXEC, 900), replies = ::fcntl(ends.replies, F_DUPFD_CLOEXEC, 900);
  if (requests < 0 || replies < 0) _exit(5);
  ::close(ends.requests), ::close(ends.replies);
  ::dup2(ends.output, STDERR_FILENO);
  ::dup2(ends.output, STDOUT_FILENO);
  ::close(ends.output);
  if (const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC); null >= 0) ::dup2(null, STDIN_FILENO), ::close(null);
  // A write to a closed pipe fails (EPIPE) instead of killing: a kernel scribbling on every fd
  // is then seen for what it wrote (the harness's end of the channel is closed only when the
  // worker is killed anyway; PDEATHSIG ends it with the harness).
  signal(SIGPIPE, SIG_IGN);
  install_crash_backtrace();  // Note [A crash says where]
  worker_main(requests, replies, run, setup);
}

[[noreturn]] void worker_main(int requests, int replies, const CaseFunction& run, const std::function<void()>& setup) {
  if (setup) {
    if (!write_all(replies, encode_frame("L"))) _exit(4);
    setup();
  }
  std::string buffer;
  char chunk[256];
  for (;;) {
    size_t newline;
    while ((newline = buffer.find('\n')) == std::string::npos) {
      ssize_t n = ::read(requests, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) _exit(0);  // the harness closed the pipe: done
      buffer.append(chunk, static_cast<size_t>(n));
    }
    const std::string request = buffer.substr(0, newline);
    buffer.erase(0, newline + 1);
    size_t case_index = 0, first_check = 0;
    if (std::sscanf(request.c_str(), "%zu %zu", &case_index, &first_check) != 2) _exit(3);
    std::vector<pid_t> threads_before;
    run(
        case_index, first_check,
        [&](size_t check) {
          note_running("");
          threads_before = foreign_threads(threads_before);
          if (!write_all(replies, encode_frame("S " + std::to_string(check)))) _exit(4);
        },
        [&](const CaseResult& r) {
          // Note [Threads a kernel leaves running]
          std::vector<pid_t> now = foreign_threads(threads_before);
          if (now != threads_before) {
            if (!write_all(replies, encode_frame("W"))) _exit(4);
            settle(threads_before, now);  // a crash meanwhile keeps the sample noted
            threads_before = foreign_threads(now);  // what lives on is not waited for again
          }
          note_running("");  // a death from here on is between checks
          const std::optional<std::string> fault = cuda::device_fault();
          if (!write_all(replies, encode_frame("R " + reports::result_to_json_line(fault ? with_device_fault(r, *fault) : r))))
            _exit(4);
          if (fault) {  // "X": this worker retires; the pool goes on with the case in a new one
            (void)write_all(replies, encode_frame("X"));
            _exit(0);
          }
        });
    if (!write_all(replies, encode_frame("D"))) _exit(4);
  }
}

// ---- the harness side ----

// Note [A worker that hangs up is waited for]: the end of a worker's channel is not its death.
// A process's pipes close early in its exit, before the rest of its files are released, and a
// CUDA context lost to a device-side assert can take the driver seconds to release: ATen 2.11 on
// an H100 had 15 results blamed on a worker that "closed its channel and lives on" while it was
// exiting after a fault (2026-12-05). So at the channel's end the pool stops reading it and waits
// for the death through waitpid (the death is the result, or a retiring worker's normal end); only
// a worker still alive kHangUpGrace later (or at its check's deadline) broke the protocol.
constexpr std::chrono::seconds kHangUpGrace{5};

// A worker's channels, in ChildChannels' order: requests (to it), replies, its stdout and stderr.
enum WorkerChannel : size_t { kRequests, kReplies, kOutput };

// Note [The worker channel is untrusted]: a worker runs the library under test, which may write
// anything to any fd, fork, or die at any moment. So its replies come as checked frames
// (worker_frames.h) on a pipe at a high fd, its stdout and stderr go to a captured pipe (only
// the tail is kept), it gets /dev/null as stdin and a process group of its own (killed whole),
// and its death is noticed by waitpid, not by the end of the pipe (a forked child may hold it
// open). A message that is no frame, or a result for another case or a check that already has
// one, is a protocol error: the running check is crashed with that reason and the worker is
// replaced. What a library can still do is lie about its own case's results; it cannot touch
// other cases' results, the exit status or the files, which only the harness writes.
struct Worker {
  // Its pipes (Note [One way to run a child]); kOutput is closed once the worker closed its
  // stderr, and ended() is set once waitpid saw it end.
  ChildProcess child;
  FrameReader frames;
  RunningNote* note = nullptr;     // shared with the worker (note_running)
  std::string last_note;           // what it said last, read when it ended
  std::string stderr_tail;  // the last bytes the worker wrote to stderr in the running check
  bool loading = false;     // in its setup (WorkerOptions::setup): said "L", no check started yet
  bool settling = false;    // said "W": waits for threads the running check left (Note [Threads a kernel leaves running])
  bool retiring = false;    // said "X" after a result: it ends, and no check of its case is lost (a CUDA fault)
  bool started = false;     // a check started in this worker (its setup is over)
  bool busy = false;
  // Note [A worker that hangs up is waited for]: its channel ended while it lived; until then
  // the pool waits for its death instead of blaming it for the hang-up.
  std::optional<Clock::time_point> hung_up_until;
  std::string last_ran;     // "op check [device, dtype]" of the last result it sent
  size_t case_index = 0;
  size_t first = 0;    // the first check of this assignment
  size_t running = 0;  // the check running now (index into the case's checks)
  Clock::time_point deadline;
  Clock::time_point check_started;  // when the running check started (or the case was sent)
};

class Pool {
 public:
  Pool(const std::vector<PlannedCase>& cases, const CaseFunction& run, const WorkerOptions& options,
       const std::function<void(size_t, std::vector<CaseResult>)>& on_done)
      : cases_(cases), run_(run), options_(options), on_done_(on_done), results_(cases.size()) {
    for (size_t i = 0; i < cases.size(); ++i) {
      results_[i].resize(cases[i].checks.size());
      pending_.emplace_back(i, 0);
    }
    // Note [Workers from a zygote]: not for device cases (a library that initialised
    // CUDA cannot be forked), nor when there is nothing to load.
    zygote_allowed_ = options.zygote && options.setup &&
                      std::all_of(cases.begin(), cases.end(), [](const PlannedCase& c) { return c.device == "cpu"; });
  }
  // Whatever path leaves run() (an exception included), no worker outlives the pool.
  ~Pool() {
    for (auto& w : workers_) reap(w, true);
  }

  void run() {
    const size_t n = std::max<size_t>(1, std::min<size_t>(static_cast<size_t>(std::max(1, options_.jobs)), cases_.size()));
    workers_.resize(n);
    while (finished_ < cases_.size()) {
      if (options_.stop && options_.stop()) break;  // interrupted: the destructor kills the workers
      for (auto& w : workers_) {
        if (w.busy || pending_.empty()) continue;
        const auto next = next_assignable();
        if (next == pending_.end()) break;  // only device cases wait, and the device is busy
        auto [case_index, first] = *next;
        pending_.erase(next);
        // An idle worker may have died between cases (nothing of ours ran): start another.
        bool sent = false;
        if (!w.child && !unloadable_.empty()) {
          skip_case(case_index, first, "not run: no new worker is started since loading the library in one failed (" +
                                           unloadable_ + ")");
          continue;
        }
        if (w.child && w.started && needs_a_new_worker(case_index, first)) reap(w, true);
        for (int attempt = 0; attempt < 2 && !sent; ++attempt) {
          if (!w.child) spawn(w);
          sent = write_all(w.child.fd(kRequests), std::to_string(case_index) + " " + std::to_string(first) + "\n");
          if (!sent) reap(w, true);
        }
        OPCONFORM_CHECK(sent, ErrorCode::kInternal, "cannot start a worker process");
        w.busy = true, w.case_index = case_index, w.first = first, w.running = first;
        w.stderr_tail.clear();
        w.check_started = Clock::now();
        w.deadline = w.check_started + timeout();
      }
      wait_for_events();
      tell_running();
    }
    if (zygote_.adopting()) reap_strays([this](pid_t p) { return known_pid(p); });
    zygote_.stop();
    // Done: idle workers end when their pipe closes; stopped: busy ones are killed too.
    const bool stopped = finished_ < cases_.size();
    for (auto& w : workers_) reap(w, stopped);
  }

 private:
  // WorkerOptions::on_running, at most every 500 ms.
  void tell_running() {
    if (!options_.on_running) return;
    const auto now = Clock::now();
    if (now - last_told_ < std::chrono::milliseconds(500)) return;
    last_told_ = now;
    std::vector<WorkerOptions::Running> running;
    for (const auto& w : workers_)
      if (w.busy && w.child)
        running.push_back({w.case_index, w.running, std::chrono::duration<double>(now - w.check_started).count()});
    std::sort(running.begin(), running.end(), [](const auto& a, const auto& b) { return a.seconds > b.seconds; });
    options_.on_running(running);
  }

  std::chrono::milliseconds timeout() const {
    return std::chrono::milliseconds(static_cast<int64_t>(options_.timeout_s * 1000));
  }

  // Whether `pid` is a process the pool waits for itself (a worker or the zygote).
  bool known_pid(pid_t pid) const {
    if (pid == zygote_.pid()) return true;
    return std::any_of(workers_.begin(), workers_.end(), [&](const Worker& w) { return w.child.pid() == pid; });
  }

  // In a process forked from the harness (a worker or the zygote), before it runs library code,
  // once it closed what it inherited (close_inherited_fds: the other workers' pipes among them; a
  // worker holding one would keep another's channel open past its death): the sandbox.
  void leave_the_harness(pid_t parent) {
    enter_sandbox(options_.sandbox, parent);  // Note [The worker sandbox]; the run reports its layers
  }

  // Note [Workers from a zygote]: the first spawn starts the zygote and waits for its load;
  // every worker is forked from it while it serves.
  bool from_zygote() {
    if (!zygote_allowed_) return false;
    if (!zygote_.started()) {
      const pid_t parent = ::getpid();
      zygote_.start(
          [this, parent] {
            leave_the_harness(parent);
            if (const int null = ::open("/dev/null", O_RDWR | O_CLOEXEC); null >= 0)
              ::dup2(null, STDIN_FILENO), ::dup2(null, STDOUT_FILENO), ::dup2(null, STDERR_FILENO), ::close(null);
            signal(SIGPIPE, SIG_IGN);
            default_fatal_signals();
          },
          options_.setup,
          [this](const WorkerChildEnds& ends) {
            g_running_note = map_running_note_fd(ends.note);
            ::close(ends.note);
            become_worker(ends, run_, nullptr);  // the library is loaded: no setup, no "L"
          });
    }
    return zygote_.wait_ready(timeout(), options_.stop);
  }

  // A worker's pipes, both ends (WorkerChannel's order), and its running-note page.
  struct Channel {
    ChildChannels pipes;
    RunningNotePage note;
    WorkerChildEnds child_ends() const {
      const auto ends = pipes.child_ends();
      return {ends[kRequests], ends[kReplies], ends[kOutput], note.fd};
    }
    // The harness's copy of the page's fd, once the worker holds its own.
    void close_note_fd() {
      if (note.fd >= 0) ::close(note.fd), note.fd = -1;
    }
  };

  static Channel make_channel() {
    Channel c;
    // Close-on-exec: a process a kernel starts must not hold our pipes open (EOF is how a crash shows).
    OPCONFORM_CHECK(c.pipes.open({ChildChannels::to_child, ChildChannels::from_child, ChildChannels::from_child}),
                    ErrorCode::kInternal, "cannot create a pipe for a worker: ", std::strerror(errno));
    c.note = make_running_note();  // none: results name no sample, nothing else is lost
    return c;
  }

  void spawn(Worker& w) {
    const bool use_zygote = from_zygote();  // before the pipes: the zygote must not hold them
    Channel c = make_channel();
    ChildProcess child;
    if (use_zygote && c.note.fd >= 0) {
      const pid_t pid = zygote_.fork_worker(c.child_ends(), [this](pid_t p) { return known_pid(p); });
      if (pid > 0) {
        child = ChildProcess::adopt(pid, std::move(c.pipes));  // its own group, as fork_worker's
      } else {  // the zygote failed (and was stopped): a worker it may have forked must not share this channel
        c.close_note_fd();
        if (c.note.note != nullptr) ::munmap(c.note.note, sizeof(RunningNote));
        c = make_channel();
      }
    }
    if (!child) child = fork_worker(c);
    c.close_note_fd();
    w = Worker{};
    w.child = std::move(child), w.note = c.note.note;
  }

  // A worker forked from the harness itself; it loads the library (WorkerOptions::setup). The
  // worker's setup, in order: its descriptors, the sandbox, then become_worker (its channel, its
  // signal handlers), which loads the library.
  ChildProcess fork_worker(Channel& c) {
    const pid_t parent = ::getpid();
    const WorkerChildEnds ends = c.child_ends();
    RunningNote* note = c.note.note;
    // A worker dies with the harness (ChildOptions::die_with_parent: a killed CI job leaves no
    // kernel spinning).
    ChildProcess child = ChildProcess::start(std::move(c.pipes), [&](std::span<const int>) -> int {
      g_running_note = note;
      if (ends.note >= 0) ::close(ends.note);
      close_inherited_fds({ends.requests, ends.replies, ends.output});  // Note [A worker holds only its own descriptors]
      leave_the_harness(parent);
      become_worker(ends, run_, options_.setup);
    });
    OPCONFORM_CHECK(child, ErrorCode::kInternal, "cannot fork a worker: ", std::strerror(child.failure()->error));
    return child;
  }

  // Ends a worker (SIGKILL first when `kill`), closes its pipes, returns how it ended.
  ChildExit reap(Worker& w, bool kill) {
    if (!w.child) return {};
    if (kill || w.child.ended()) w.child.kill_group();  // the group: children a kernel forked too
    if (kill) w.child.kill();
    drain_stderr(w);
    w.child.close_all();
    const ChildExit exit = w.child.wait();
    if (!kill) w.child.kill_group();  // a healthy worker's leftovers
    w.last_note = read_running_note(w.note);
    if (w.note != nullptr) ::munmap(w.note, sizeof(RunningNote)), w.note = nullptr;
    w.child = ChildProcess{};  // reaped: nothing is killed
    w.hung_up_until.reset();
    return exit;
  }

  // Note [One CUDA worker per GPU]: worker processes that run CUDA cases at the same time each
  // have a CUDA context, and one GPU runs one context at a time, switching between them in time
  // slices; a check's many small synchronous steps (copies, allocations) then each wait for a
  // turn. Measured on an H200 (ATen 2.11, 5 ops, 30 s): 1 worker ran 731 results, 8 workers 204,
  // 16 workers 187. NVIDIA's MPS removes the switching (16 workers: 731 results in 13 s) but
  // shares one fault among all clients: a device-side assert in one worker failed 20,938 checks
  // of the others (Note [A CUDA fault ends the worker]). So device cases are limited to
  // device_jobs workers at once, and the other workers run the CPU cases meanwhile.
  std::deque<std::pair<size_t, size_t>>::iterator next_assignable() {
    if (options_.device_jobs <= 0) return pending_.begin();
    int on_device = 0;
    for (const auto& w : workers_)
      if (w.busy && cases_[w.case_index].device != "cpu") ++on_device;
    if (on_device < options_.device_jobs) return pending_.begin();
    return std::find_if(pending_.begin(), pending_.end(), [&](const auto& p) { return cases_[p.first].device == "cpu"; });
  }

  // Reads what the worker's stderr holds now (at most 64 KB per call, so a flood cannot starve
  // the deadlines), keeping the last 2 KB; at EOF the pipe is closed and no longer polled.
  static void drain_stderr(Worker& w) {
    char chunk[4096];
    for (int round = 0; round < 16 && w.child.fd(kOutput) >= 0; ++round) {
      if (!w.child.readable(kOutput)) return;
      const ssize_t n = w.child.read(kOutput, chunk, sizeof chunk);
      if (n <= 0) {
        w.child.close(kOutput);
        return;
      }
      w.stderr_tail.append(chunk, static_cast<size_t>(n));
      // Room for a crash's backtrace (Note [A crash says where]).
      if (w.stderr_tail.size() > 6144) w.stderr_tail.erase(0, w.stderr_tail.size() - 6144);
    }
  }

  // The worker is gone (it died, or we killed it): the check it was running gets `outcome`; a
  // fresh worker continues with the next check of the case.
  // `cause` says what ended it (Note [One finding per cause]): its subject is the signal, never the sample.
  void lost(Worker& w, conformance::Outcome outcome, std::string reason, conformance::Cause cause) {
    auto& results = results_[w.case_index];
    const PlannedCase& c = cases_[w.case_index];
    const size_t check = check_lost_with(w);
    w.busy = false;
    if (w.settling) {
      reason += ", on a thread the check's kernel started and left running after it returned";
      w.settling = false;
    }
    if (w.loading) {
      reason = "while the worker loaded the library (in a library constructor or register_ops): " + reason;
      if (unloadable_.empty() && check < c.checks.size())
        unloadable_ = c.op + " " + c.checks[check] + " [" + c.device + ", " + c.dtype + "]: " +
                      (outcome == conformance::Outcome::timed_out ? "it hung" : "it crashed");
      w.loading = false;
    }
    if (check >= c.checks.size()) {
      complete(w.case_index);
      return;
    }
    CaseResult r;
    r.op = c.op, r.check = c.checks[check], r.device = c.device, r.dtype = c.dtype;
    r.outcome = outcome;
    r.message = std::move(reason);
    r.recorded_cause = std::move(cause);
    // The sample it was on (note_running): the result's input, as far as the worker said.
    if (!w.last_note.empty()) {
      r.message += "; it was on " + w.last_note;
      r.minimal_input = w.last_note + " (the sample running when the worker ended, not shrunk)";
    }
    if (!w.stderr_tail.empty()) r.message += "; its last output on stderr: " + w.stderr_tail;
    if (options_.repro) r.repro = options_.repro(r);
    results[check] = with_first_death(w.case_index, check, std::move(r));
    // A kernel that hung once usually hangs again: the case's other checks would each cost the
    // whole time-out (21 of them for one op). They are skipped, saying why, unless asked for.
    if (outcome == conformance::Outcome::timed_out && !options_.keep_going_after_hang) {
      skip_case(w.case_index, check + 1,
                "not run: an earlier check of this case (" + c.checks[check] +
                    ") hung past the time-out; --keep-going-after-hang runs the rest");
      return;
    }
    if (check + 1 < c.checks.size()) {
      pending_.emplace_front(w.case_index, check + 1);
    } else {
      complete(w.case_index);
    }
  }

  // The check a worker's end costs: the running one, or, once its result was sent (between
  // checks), the next one (the case's check count when there is none).
  size_t check_lost_with(const Worker& w) const {
    const auto& results = results_[w.case_index];
    return w.running < results.size() && results[w.running] ? w.running + 1 : w.running;
  }

  void crashed(Worker& w) {
    const ChildExit exit = reap(w, false);
    if (w.retiring) {  // Note [A CUDA fault ends the worker]: the case goes on in a new worker
      w.retiring = false, w.busy = false;
      const size_t next = check_lost_with(w);
      if (next < cases_[w.case_index].checks.size()) pending_.emplace_front(w.case_index, next);
      else complete(w.case_index);
      return;
    }
    const std::string death = exit.killed() ? "was killed by " + describe_signal(exit.signal())
                                            : "exited with status " + std::to_string(exit.code()) + " (a kernel called exit?)";
    if (run_again_in_a_new_worker(w, death)) return;
    const char* abbrev = exit.killed() ? sigabbrev_np(exit.signal()) : nullptr;
    const std::string how = exit.killed() ? (abbrev ? "SIG" + std::string(abbrev) : "signal") : "exit";
    const std::string& check = cases_[w.case_index].checks[std::min(check_lost_with(w), cases_[w.case_index].checks.size() - 1)];
    lost(w, conformance::Outcome::crashed, "the worker process running this check " + death,
         {conformance::FindingKind::crash, how,
          exit.killed() ? "the kernel crashed (" + how + ") in " + check : "the kernel ended the process in " + check});
  }

  // Note [A death outside any check]: a worker that has run checks and dies before any sample of
  // the next one ran (between checks, or as a case starts) shows what an earlier check left: memory
  // a kernel wrote out of bounds, a crash while a check's tensors were freed, a thread a kernel left.
  // Measured: ATen 1.13's max_pool2d_with_indices_backward writes out of bounds for some samples
  // without crashing, and the same worker then died at the start of an aten::maximum case, which
  // was reported crashed. So the check is run again, once, in a new worker; its result is what
  // that run gives, and its message tells of the first worker's death and what that worker had
  // run last. A check that dies that way in a new worker too is crashed, as before.
  bool run_again_in_a_new_worker(Worker& w, const std::string& death) {
    const size_t check = check_lost_with(w);
    if (!w.started || w.loading || !w.last_note.empty() || check >= cases_[w.case_index].checks.size()) return false;
    const auto key = std::make_pair(w.case_index, check);
    if (first_deaths_.count(key) != 0) return false;
    first_deaths_[key] = "a worker process " + death + " before this check ran a sample, after it had run " +
                         (w.last_ran.empty() ? std::string("other checks") : w.last_ran) +
                         " (memory an earlier kernel damaged, or a crash while that check's tensors were freed); "
                         "the check was run again in a new worker";
    w.busy = false;
    pending_.emplace_front(w.case_index, check);
    return true;
  }

  // A result of a check that was run again (Note [A death outside any check]) says why.
  CaseResult with_first_death(size_t case_index, size_t check, CaseResult r) const {
    if (auto it = first_deaths_.find({case_index, check}); it != first_deaths_.end())
      r.message += (r.message.empty() ? "" : "; ") + it->second;
    return r;
  }

  bool needs_a_new_worker(size_t case_index, size_t first) const {
    return first_deaths_.count({case_index, first}) != 0;
  }

  // Every check of the case from `first` on is skipped with `reason`; the case completes.
  void skip_case(size_t case_index, size_t first, const std::string& reason) {
    const PlannedCase& c = cases_[case_index];
    for (size_t k = first; k < c.checks.size(); ++k) {
      if (results_[case_index][k]) continue;
      CaseResult skipped;
      skipped.op = c.op, skipped.check = c.checks[k], skipped.device = c.device, skipped.dtype = c.dtype;
      skipped.outcome = conformance::Outcome::skipped;
      skipped.message = reason;
      skipped.recorded_cause = conformance::Cause{conformance::FindingKind::not_applicable, "after a hang",
                                                  "not run: an earlier check of the case hung"};
      results_[case_index][k] = skipped;
    }
    complete(case_index);
  }

  void complete(size_t case_index) {
    ++finished_;
    std::vector<CaseResult> out;
    for (auto& r : results_[case_index])
      if (r) out.push_back(*r);
    on_done_(case_index, std::move(out));
  }

  // One message of the running case (Note [The worker channel is untrusted]); throws
  // ProtocolError for anything a well-behaved worker does not send.
  void handle_message(Worker& w, const std::string& m) {
    const PlannedCase& c = cases_[w.case_index];
    auto& results = results_[w.case_index];
    // After "X" a worker only ends: a worker that went on could die in a later check and have
    // that death taken for its retirement (the check re-run elsewhere, its crash never reported).
    if (w.retiring) throw ProtocolError("a message after 'retiring': '" + m.substr(0, 40) + "'");
    if (m == "L") {
      if (w.started || w.loading) throw ProtocolError("a second 'loading' message");
      w.loading = true;
    } else if (m == "W") {
      w.settling = true;
    } else if (m == "X") {
      if (w.running >= c.checks.size() || !results[w.running]) throw ProtocolError("'retiring' before the check's result");
      w.retiring = true;
    } else if (m.rfind("S ", 0) == 0) {
      size_t k = 0;
      const auto [end, ec] = std::from_chars(m.data() + 2, m.data() + m.size(), k);
      if (ec != std::errc() || end != m.data() + m.size() || k < w.running || k >= c.checks.size())
        throw ProtocolError("a check start that is not the case's next check: '" + m.substr(0, 40) + "'");
      w.running = k;
      w.loading = false, w.started = true, w.settling = false;
      w.check_started = Clock::now();
      w.deadline = w.check_started + timeout();
      w.stderr_tail.clear();
    } else if (m.rfind("R ", 0) == 0) {
      CaseResult r;
      try {
        r = reports::result_from_json_line(m.substr(2));
      } catch (const std::exception& e) {
        throw ProtocolError(std::string("a result that does not parse: ") + e.what());
      }
      // A worker runs library code, which may write its own frames: its text has a size too (Note [A
      // library's message has a size]); a frame may be up to kMaxFramePayload.
      r.message = ::opconform::detail::capped_text(r.message, kMaxWorkerText);
      if (r.minimal_input) r.minimal_input = ::opconform::detail::capped_text(*r.minimal_input, kMaxWorkerText);
      size_t i = w.first;
      while (i < c.checks.size() && (c.checks[i] != r.check || results[i])) ++i;
      if (r.op != c.op || r.device != c.device || r.dtype != c.dtype || i == c.checks.size())
        throw ProtocolError("a result for another case or check, or a second one (" + r.op + " " + r.check + ")");
      w.last_ran = r.op + " " + r.check + " [" + r.device + ", " + r.dtype + "]";
      results[i] = with_first_death(w.case_index, i, std::move(r));
      w.settling = false;
    } else if (m == "D") {
      for (size_t i = w.first; i < c.checks.size(); ++i)
        if (!results[i]) throw ProtocolError("'done' before check '" + c.checks[i] + "' had its result");
      w.busy = false;
      complete(w.case_index);
    } else {
      throw ProtocolError("an unknown message '" + m.substr(0, 40) + "'");
    }
  }

  // Reads what the worker's channel holds now (all of it when it has ended) and handles the
  // frames; false when the worker broke the protocol or closed the channel (and was replaced).
  bool read_channel(Worker& w, bool until_empty) {
    char chunk[65536];
    for (;;) {
      if (until_empty && !w.child.readable(kReplies)) return true;
      const ssize_t n = w.child.read(kReplies, chunk, sizeof chunk);
      if (n <= 0) {
        if (until_empty) return true;  // the worker is gone; its death is the result
        // The end of the channel: the worker died or is dying (its death is the result), or a
        // kernel closed the channel. Note [A worker that hangs up is waited for].
        if (w.child.ended()) {
          crashed(w);
          return false;
        }
        w.hung_up_until = std::min(w.deadline, Clock::now() + kHangUpGrace);
        return false;
      }
      w.frames.feed(std::string_view(chunk, static_cast<size_t>(n)));
      try {
        while (w.busy)
          if (auto payload = w.frames.next()) handle_message(w, *payload);
          else break;
      } catch (const ProtocolError& e) {
        protocol_error(w, e.what());
        return false;
      }
      if (!until_empty) return true;
    }
  }

  void protocol_error(Worker& w, const std::string& what) {
    reap(w, true);
    lost(w, conformance::Outcome::crashed,
         "protocol error: the worker sent " + what + "; the worker was replaced (does a kernel write to fds it does not own?)",
         {conformance::FindingKind::crash, "protocol", "the worker broke the result protocol (a kernel wrote to its channel?)"});
  }

  void wait_for_events() {
    std::vector<pollfd> fds;
    std::vector<Worker*> owners;
    auto now = Clock::now();
    auto earliest = now + std::chrono::hours(24);
    bool any_busy = false;
    for (auto& w : workers_) {
      if (!w.busy) continue;
      any_busy = true;
      if (!w.hung_up_until) {  // its channel is at its end: the death is found by waitpid below
        fds.push_back({w.child.fd(kReplies), POLLIN, 0});
        owners.push_back(&w);
      }
      if (w.child.fd(kOutput) >= 0) {
        fds.push_back({w.child.fd(kOutput), POLLIN, 0});
        owners.push_back(&w);
      }
      earliest = std::min(earliest, w.hung_up_until.value_or(w.deadline));
    }
    if (!any_busy) return;
    const auto wait_ms = std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(earliest - now).count());
    // At most 50 ms: deaths are found by waitpid below, also while a forked child holds the pipe.
    const int ready = wait_readable(fds, std::chrono::milliseconds(std::min<int64_t>(wait_ms + 1, 50)));
    if (ready < 0) throw Error(ErrorCode::kInternal, std::string("poll: ") + std::strerror(errno));
    for (size_t i = 0; i < fds.size(); ++i) {
      Worker& w = *owners[i];
      if (fds[i].revents == 0 || !w.busy || !w.child) continue;
      if (fds[i].fd == w.child.fd(kOutput)) {
        drain_stderr(w);
        continue;
      }
      read_channel(w, false);
    }
    // Death by waitpid, not by the pipe's end: a child the kernel forked may hold the pipe open.
    for (auto& w : workers_) {
      if (!w.busy || !w.child || !w.child.poll_exit()) continue;
      if (read_channel(w, true) && w.busy) crashed(w);  // what it sent before dying counts
      else if (!w.busy) reap(w, false);                 // it finished the case, then died
    }
    if (zygote_.adopting()) reap_strays([this](pid_t p) { return known_pid(p); });
    now = Clock::now();
    for (auto& w : workers_)
      if (w.busy && w.hung_up_until && now >= *w.hung_up_until)
        protocol_error(w, "nothing more: it closed its channel and lived on (a kernel closed a pipe it does not own?)");
    for (auto& w : workers_) {
      if (!w.busy || now < w.deadline) continue;
      reap(w, true);
      char seconds[32];
      std::snprintf(seconds, sizeof seconds, "%g", options_.timeout_s);
      lost(w, conformance::Outcome::timed_out,
           std::string("no result within the time-out of ") + seconds +
               " s: the check was stopped (a kernel that never returns?)",
           {conformance::FindingKind::hang, "", "the kernel hung past the time-out"});
    }
  }

  const std::vector<PlannedCase>& cases_;
  const CaseFunction& run_;
  WorkerOptions options_;
  const std::function<void(size_t, std::vector<CaseResult>)>& on_done_;
  std::vector<std::vector<std::optional<CaseResult>>> results_;  // per case, one per check
  std::deque<std::pair<size_t, size_t>> pending_;                // (case, first check)
  std::vector<Worker> workers_;
  size_t finished_ = 0;
  std::string unloadable_;  // set when a worker's setup crashed or hung: which check it cost
  bool zygote_allowed_ = false;
  WorkerZygote zygote_;  // Note [Workers from a zygote]
  // Checks run again after a worker died before they ran a sample: why (Note [A death outside any check]).
  std::map<std::pair<size_t, size_t>, std::string> first_deaths_;
  Clock::time_point last_told_;  // the last on_running
};

}  // namespace

void note_running(std::string_view text) {
  RunningNote* note = g_running_note;
  if (note == nullptr) return;
  const size_t n = std::min(text.size(), sizeof note->text);
  note->length.store(0, std::memory_order_relaxed);
  std::memcpy(note->text, text.data(), n);
  note->length.store(static_cast<uint32_t>(n), std::memory_order_release);
}

bool in_worker() { return g_running_note != nullptr; }

void default_fatal_signals() {
  for (int s : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP}) signal(s, SIG_DFL);
}

std::string describe_signal(int signal) {
  const char* what = strsignal(signal);
  const char* abbrev = sigabbrev_np(signal);
  std::string out = abbrev ? "SIG" + std::string(abbrev) : "signal " + std::to_string(signal);
  if (what) out += std::string(" (") + what + ")";
  return out;
}

void run_isolated(const std::vector<PlannedCase>& cases, const CaseFunction& run, const WorkerOptions& options,
                  const std::function<void(size_t, std::vector<CaseResult>)>& on_done) {
  if (cases.empty()) return;
  // A worker that dies while we write to it must not take the harness down with SIGPIPE.
  struct sigaction ignore{}, previous{};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGPIPE, &ignore, &previous);
  try {
    Pool(cases, run, options, on_done).run();
  } catch (...) {
    sigaction(SIGPIPE, &previous, nullptr);
    throw;
  }
  sigaction(SIGPIPE, &previous, nullptr);
}

}  // namespace opconform::harness
