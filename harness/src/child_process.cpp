// Note [One way to run a child] (child_process.h).
#include "opconform/harness/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <utility>

namespace opconform::harness {

// ---- ChildChannels ----

ChildChannels::ChildChannels(ChildChannels&& other) noexcept
    : parent_(std::exchange(other.parent_, {-1, -1, -1, -1})),
      child_(std::exchange(other.child_, {-1, -1, -1, -1})),
      count_(std::exchange(other.count_, 0)) {}

ChildChannels& ChildChannels::operator=(ChildChannels&& other) noexcept {
  if (this != &other) {
    close_all();
    parent_ = std::exchange(other.parent_, {-1, -1, -1, -1});
    child_ = std::exchange(other.child_, {-1, -1, -1, -1});
    count_ = std::exchange(other.count_, 0);
  }
  return *this;
}

bool ChildChannels::open(std::initializer_list<Kind> kinds) {
  close_all();
  for (Kind kind : kinds) {
    int ends[2];
    const bool made = kind == socket ? ::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ends) == 0
                                     : ::pipe2(ends, O_CLOEXEC) == 0;
    if (!made || count_ == kMost) {
      const int error = made ? EMFILE : errno;
      if (made) ::close(ends[0]), ::close(ends[1]);
      close_all();
      errno = error;
      return false;
    }
    // A pipe's ends: [0] reads, [1] writes; a socket pair's are alike.
    const bool child_writes = kind != to_child;
    parent_[count_] = child_writes ? ends[0] : ends[1];
    child_[count_] = child_writes ? ends[1] : ends[0];
    ++count_;
  }
  return true;
}

void ChildChannels::close_child_ends() {
  for (size_t i = 0; i < count_; ++i)
    if (child_[i] >= 0) ::close(child_[i]), child_[i] = -1;
}

void ChildChannels::close_all() {
  close_child_ends();
  for (size_t i = 0; i < count_; ++i)
    if (parent_[i] >= 0) ::close(parent_[i]), parent_[i] = -1;
  count_ = 0;
}

// ---- ChildExit ----

bool ChildExit::killed() const { return WIFSIGNALED(status); }
int ChildExit::signal() const { return WIFSIGNALED(status) ? WTERMSIG(status) : 0; }
int ChildExit::code() const { return WIFEXITED(status) ? WEXITSTATUS(status) : -1; }

// ---- ChildProcess ----

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      own_group_(other.own_group_),
      exit_(std::exchange(other.exit_, std::nullopt)),
      failure_(std::exchange(other.failure_, std::nullopt)),
      ends_(std::exchange(other.ends_, {-1, -1, -1, -1})),
      count_(std::exchange(other.count_, 0)) {}

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this != &other) {
    if (pid_ > 0 && !exit_) stop();
    close_all();
    pid_ = std::exchange(other.pid_, -1), own_group_ = other.own_group_;
    exit_ = std::exchange(other.exit_, std::nullopt), failure_ = std::exchange(other.failure_, std::nullopt);
    ends_ = std::exchange(other.ends_, {-1, -1, -1, -1}), count_ = std::exchange(other.count_, 0);
  }
  return *this;
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0 && !exit_) stop();
  close_all();
}

ChildProcess ChildProcess::start(ChildChannels channels, const Main& main, ChildOptions options) {
  std::fflush(nullptr);  // nothing buffered may be written twice
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    for (int end : channels.parent_ends()) ::close(end);
    // Both sides make the group (the classic pair): whichever runs first, a process the child
    // forks before the parent's setpgid is in the group, and kill_group() reaches it.
    if (options.own_group) ::setpgid(0, 0);
    if (options.die_with_parent) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) _exit(0);  // the harness is gone already
    }
    // An exception never unwinds into the parent's code (which would go on as a second harness).
    try {
      _exit(main(channels.child_ends()));
    } catch (...) {
      _exit(kUncaughtException);
    }
  }
  if (pid < 0) {
    ChildProcess none;
    none.failure_ = StartFailure{StartFailure::fork, errno};
    return none;
  }
  return adopt(pid, std::move(channels), options);
}

ChildProcess ChildProcess::start(std::initializer_list<ChildChannels::Kind> kinds, const Main& main,
                                 ChildOptions options) {
  ChildChannels channels;
  if (!channels.open(kinds)) {
    ChildProcess none;
    none.failure_ = StartFailure{StartFailure::channels, errno};
    return none;
  }
  return start(std::move(channels), main, options);
}

ChildProcess ChildProcess::adopt(pid_t pid, ChildChannels channels, ChildOptions options) {
  ChildProcess child;
  child.pid_ = pid, child.own_group_ = options.own_group;
  if (options.own_group) ::setpgid(pid, pid);
  channels.close_child_ends();
  child.ends_ = std::exchange(channels.parent_, {-1, -1, -1, -1});
  child.count_ = std::exchange(channels.count_, 0);
  return child;
}

void ChildProcess::close(size_t i) {
  if (i < count_ && ends_[i] >= 0) ::close(ends_[i]), ends_[i] = -1;
}

void ChildProcess::close_all() {
  for (size_t i = 0; i < count_; ++i) close(i);
}

bool ChildProcess::readable(size_t i, std::chrono::milliseconds timeout) const {
  pollfd p{fd(i), POLLIN, 0};
  return p.fd >= 0 && wait_readable({&p, 1}, timeout) > 0;
}

ssize_t ChildProcess::read(size_t i, char* buffer, size_t size) const {
  ssize_t n;
  do n = ::read(fd(i), buffer, size);
  while (n < 0 && errno == EINTR);
  return n;
}

const std::optional<ChildExit>& ChildProcess::poll_exit() {
  int status = 0;
  if (pid_ > 0 && !exit_ && ::waitpid(pid_, &status, WNOHANG) == pid_) exit_ = ChildExit{status};
  return exit_;
}

ChildExit ChildProcess::wait() {
  if (pid_ > 0 && !exit_) {
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    exit_ = ChildExit{status};
  }
  return exit_.value_or(ChildExit{});
}

void ChildProcess::kill() {
  if (pid_ > 0 && !exit_) ::kill(pid_, SIGKILL);
}

void ChildProcess::kill_group() {
  if (pid_ > 0 && own_group_) ::kill(-pid_, SIGKILL);
}

ChildExit ChildProcess::stop() {
  kill_group();
  kill();
  return wait();
}

pid_t ChildProcess::release() { return std::exchange(pid_, -1); }

int wait_readable(std::span<pollfd> fds, std::chrono::milliseconds timeout) {
  using Clock = std::chrono::steady_clock;
  const auto until = Clock::now() + timeout;
  for (;;) {
    const auto left = std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count());
    const int ready = ::poll(fds.data(), fds.size(), static_cast<int>(std::min<int64_t>(left, 1 << 30)));
    if (ready >= 0 || errno != EINTR) return ready;
  }
}

}  // namespace opconform::harness
