// A child process of the harness and the pipes to it: the one way the harness forks (the probe,
// the zygote, the workers, the sandbox probe), waits for what a child writes, and reaps it.
//
// Note [One way to run a child]: every process that runs the library under test is a child
// the harness must be able to read within a deadline, kill with whatever it forked, and see the
// death of (by waitpid, never by the end of a pipe: a forked grandchild may hold it open). Four
// places once did that by hand (fork, pipe2, poll, waitpid), each with its own way of closing
// the other side's ends, retrying EINTR and decoding the status, and a slip in any (a parent end
// left open in the child keeps a channel alive past its death) is a hang or a lost crash. So the
// steps live here once: ChildChannels makes the pipes before the child exists; ChildProcess::start
// flushes stdio, forks, closes the parent's ends in the child, runs its function and _exits
// with what it returns; the parent holds its ends, waits for them with a time-out, and reaps the
// child, killing one still alive when it is dropped. What a child does before the library is
// loaded (the sandbox, its descriptors, its signals) stays with the caller, in that function.
#pragma once
#include <poll.h>
#include <sys/types.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <functional>
#include <initializer_list>
#include <optional>
#include <span>

namespace opconform::harness {

// The channels of a child not started yet: the parent's end and the child's end of each, all
// close-on-exec. Whatever is still open is closed when it is dropped.
class ChildChannels {
 public:
  enum Kind {
    from_child,  // a pipe the child writes
    to_child,    // a pipe the child reads
    socket,      // a SOCK_SEQPACKET socket pair (both ways, descriptors can go with a message)
  };
  static constexpr size_t kMost = 4;

  ChildChannels() = default;
  ChildChannels(ChildChannels&& other) noexcept;
  ChildChannels& operator=(ChildChannels&& other) noexcept;
  ~ChildChannels() { close_all(); }

  // Makes one channel of each kind; false (errno set, none left open) when one cannot be made.
  bool open(std::initializer_list<Kind> kinds);
  size_t size() const { return count_; }
  std::span<const int> parent_ends() const { return {parent_.data(), count_}; }
  std::span<const int> child_ends() const { return {child_.data(), count_}; }
  void close_child_ends();
  void close_all();

 private:
  friend class ChildProcess;
  std::array<int, kMost> parent_{-1, -1, -1, -1}, child_{-1, -1, -1, -1};
  size_t count_ = 0;
};

// How a child ended: waitpid's status, decoded.
struct ChildExit {
  int status = 0;
  bool killed() const;  // by a signal
  int signal() const;   // the signal that killed it (0 when it exited)
  int code() const;     // its exit status (-1 when a signal killed it)
};

struct ChildOptions {
  // The child gets SIGKILL when the harness dies (PR_SET_PDEATHSIG), and exits at once when the
  // harness was gone before it asked.
  bool die_with_parent = true;
  // Its own process group, made by both the parent and the child right after fork (so a process
  // the child forks at once is in it); kill_group() kills the group. Dropping a child that was not reaped stops it, group
  // first; after a reap the caller kills what the group left (the pool's reap(), the probe's stop()).
  bool own_group = true;
};

// Why start() made no child.
struct StartFailure {
  enum Step { channels, fork } step;
  int error;  // errno
};

class ChildProcess {
 public:
  // Runs in the child with the child's ends (in the order the channels were made); what it
  // returns is the child's exit status (_exit: no destructor or atexit handler runs). An
  // exception it lets escape ends the child with kUncaughtException.
  using Main = std::function<int(std::span<const int> ends)>;
  static constexpr int kUncaughtException = 125;

  ChildProcess() = default;  // no child
  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) noexcept;  // ends the child it held, as ~ does
  // A child not reaped yet is stopped (stop()); the parent's ends are closed.
  ~ChildProcess();

  // Forks a child that runs `main` with `channels`' child ends; the parent keeps their parent
  // ends (the child's are closed here). No child (false) when the fork failed: failure() says why.
  static ChildProcess start(ChildChannels channels, const Main& main, ChildOptions options = {});
  // The same with channels of `kinds`, made first.
  static ChildProcess start(std::initializer_list<ChildChannels::Kind> kinds, const Main& main,
                            ChildOptions options = {});
  // A process that is already this one's child (another process forked it; it was re-parented
  // here) holding `channels`' child ends: held as if started here.
  static ChildProcess adopt(pid_t pid, ChildChannels channels, ChildOptions options = {});

  explicit operator bool() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  const std::optional<StartFailure>& failure() const { return failure_; }

  // The parent's end of channel `i`; -1 once closed.
  int fd(size_t i) const { return i < count_ ? ends_[i] : -1; }
  void close(size_t i);
  void close_all();
  // Whether channel `i` has data (or its end) within `timeout` (0: now).
  bool readable(size_t i, std::chrono::milliseconds timeout = {}) const;
  // read(2) on channel `i`, EINTR retried.
  ssize_t read(size_t i, char* buffer, size_t size) const;

  // Reaps it if it has ended (waitpid WNOHANG); its end, once seen.
  const std::optional<ChildExit>& poll_exit();
  const std::optional<ChildExit>& ended() const { return exit_; }
  // Waits for its end (blocking) and reaps it.
  ChildExit wait();
  // SIGKILL to it, unless it was reaped.
  void kill();
  // SIGKILL to its process group (own_group only): what it forked dies too. Also after it was
  // reaped: the group outlives its leader.
  void kill_group();
  // kill_group(), then kill() and wait() unless it was reaped: how it ends when dropped.
  ChildExit stop();
  // Lets it go: it is neither killed nor waited for here (an orphan on purpose); its pid.
  pid_t release();

 private:
  pid_t pid_ = -1;
  bool own_group_ = false;
  std::optional<ChildExit> exit_;
  std::optional<StartFailure> failure_;
  std::array<int, ChildChannels::kMost> ends_{-1, -1, -1, -1};
  size_t count_ = 0;
};

// poll(2) on `fds` for readable data (or a pipe's end) for at most `timeout`, EINTR retried with
// the time left: how many are ready (their revents set), 0 when the time ran out, -1 on an error.
int wait_readable(std::span<pollfd> fds, std::chrono::milliseconds timeout);

}  // namespace opconform::harness
