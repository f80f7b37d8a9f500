// Note [Workers from a zygote] (worker_zygote.h).
#include "worker_zygote.h"

#include "opconform/harness/worker_sandbox.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string_view>

namespace opconform::harness {
namespace {

constexpr int kFdCount = 4;  // WorkerChildEnds
// How long the harness waits for the zygote to answer a fork request.
constexpr int kAnswerTimeoutMs = 5000;

bool send_with_fds(int socket, std::string_view bytes, const int* fds, int count) {
  iovec iov{const_cast<char*>(bytes.data()), bytes.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kFdCount)] = {};
  msghdr msg{};
  msg.msg_iov = &iov, msg.msg_iovlen = 1;
  if (count > 0) {
    msg.msg_control = control, msg.msg_controllen = CMSG_SPACE(sizeof(int) * count);
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET, c->cmsg_type = SCM_RIGHTS, c->cmsg_len = CMSG_LEN(sizeof(int) * count);
    std::memcpy(CMSG_DATA(c), fds, sizeof(int) * count);
  }
  ssize_t n;
  do n = ::sendmsg(socket, &msg, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  return n == static_cast<ssize_t>(bytes.size());
}

// One message into `buffer`; the fds that came with it (close-on-exec) into `fds`, their number
// into `count`. Returns the message's length, 0 at the end, -1 on an error.
ssize_t receive_with_fds(int socket, char* buffer, size_t size, int* fds, int* count) {
  iovec iov{buffer, size};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kFdCount)] = {};
  msghdr msg{};
  msg.msg_iov = &iov, msg.msg_iovlen = 1;
  msg.msg_control = control, msg.msg_controllen = sizeof control;
  ssize_t n;
  do n = ::recvmsg(socket, &msg, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  *count = 0;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const int got = static_cast<int>((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
    for (int i = 0; i < got; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      if (*count < kFdCount) fds[(*count)++] = fd;
      else ::close(fd);
    }
  }
  return n;
}

// Threads of this process besides the calling one.
int other_threads() {
  int n = -1;
  if (DIR* dir = ::opendir("/proc/self/task")) {
    while (const dirent* e = ::readdir(dir))
      if (e->d_name[0] >= '0' && e->d_name[0] <= '9') ++n;
    ::closedir(dir);
  }
  return n;
}

// The worker's side of a fork request (in the zygote's grandchild): waits to be re-parented to
// the harness (the middle process has exited or is exiting), then becomes the worker.
[[noreturn]] void start_forked_worker(pid_t harness, const WorkerChildEnds& ends,
                                      const WorkerZygote::BecomeWorker& become) {
  for (int i = 0; i < 4000 && ::getppid() != harness; ++i) ::usleep(250);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != harness) _exit(0);  // the harness is gone (or it never adopted us)
  ::setpgid(0, 0);  // its own group, which the pool kills whole
  become(ends);
  _exit(6);
}

// The zygote's loop: each request ("F" with the four ends) is answered with the new worker's
// pid (4 bytes, -1 when the fork failed), sent once the worker is the harness's child.
[[noreturn]] void serve(int socket, pid_t harness, const WorkerZygote::BecomeWorker& become) {
  for (;;) {
    char request[8];
    int fds[kFdCount], count = 0;
    const ssize_t n = receive_with_fds(socket, request, sizeof request, fds, &count);
    if (n <= 0) _exit(0);  // the harness closed the socket: done
    pid_t worker = -1;
    int pid_pipe[2];
    if (count == kFdCount && n == 1 && request[0] == 'F' && ::pipe2(pid_pipe, O_CLOEXEC) == 0) {
      const pid_t middle = ::fork();
      if (middle == 0) {
        const pid_t child = ::fork();
        if (child == 0) {
          ::close(socket), ::close(pid_pipe[0]), ::close(pid_pipe[1]);
          start_forked_worker(harness, {fds[0], fds[1], fds[2], fds[3]}, become);
        }
        (void)!::write(pid_pipe[1], &child, sizeof child);
        _exit(0);  // the worker is orphaned, and so re-parented to the harness (the subreaper)
      }
      ::close(pid_pipe[1]);
      if (middle > 0) {
        if (::read(pid_pipe[0], &worker, sizeof worker) != static_cast<ssize_t>(sizeof worker)) worker = -1;
        while (::waitpid(middle, nullptr, 0) < 0 && errno == EINTR) {
        }
      }
      ::close(pid_pipe[0]);
    }
    for (int i = 0; i < count; ++i) ::close(fds[i]);
    if (!send_with_fds(socket, std::string_view(reinterpret_cast<const char*>(&worker), sizeof worker), nullptr, 0))
      _exit(0);
  }
}

}  // namespace

void WorkerZygote::start(const Prepare& prepare, const std::function<void()>& setup, const BecomeWorker& become) {
  if (state_ != State::off) return;
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
    return fail(std::string("no socket pair: ") + std::strerror(errno));
  int was_subreaper = 0;
  ::prctl(PR_GET_CHILD_SUBREAPER, &was_subreaper, 0, 0, 0);
  if (was_subreaper == 0) {  // one that was (a service manager, say) stays one
    if (::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) {
      ::close(sv[0]), ::close(sv[1]);
      return fail(std::string("this process cannot be a child subreaper: ") + std::strerror(errno));
    }
    subreaper_ = true;
  }
  const pid_t harness = ::getpid();
  std::fflush(nullptr);  // nothing buffered may be written twice
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(sv[0]), ::close(sv[1]);
    return fail(std::string("cannot fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != harness) _exit(0);
    ::close(sv[0]);
    const int socket = ::fcntl(sv[1], F_DUPFD_CLOEXEC, 880);  // out of the way of fds a library uses
    if (socket < 0) _exit(5);
    ::close(sv[1]);
    close_inherited_fds({socket});  // Note [A worker holds only its own descriptors]
    prepare();
    if (setup) setup();
    if (const int threads = other_threads(); threads != 0) {
      (void)send_with_fds(socket, "U " + std::to_string(threads), nullptr, 0);
      _exit(0);
    }
    if (!send_with_fds(socket, "R", nullptr, 0)) _exit(0);
    serve(socket, harness, become);
  }
  ::setpgid(pid, pid);  // as for a worker: its group exists before any kill
  ::close(sv[1]);
  socket_ = sv[0], pid_ = pid, state_ = State::loading;
}

bool WorkerZygote::ready() {
  if (state_ != State::loading) return state_ == State::ready;
  pollfd p{socket_, POLLIN, 0};
  if (::poll(&p, 1, 0) <= 0) return false;  // still loading
  char message[64] = {};
  int fds[kFdCount], count = 0;
  const ssize_t n = receive_with_fds(socket_, message, sizeof message - 1, fds, &count);
  for (int i = 0; i < count; ++i) ::close(fds[i]);
  if (n == 1 && message[0] == 'R') {
    state_ = State::ready;
    return true;
  }
  if (n > 2 && message[0] == 'U' && message[1] == ' ')
    fail("the library started threads while loading (" + std::string(message + 2, static_cast<size_t>(n - 2)) +
         "), which a forked worker would not have");
  else
    fail("it ended or answered nonsense while loading the library");
  return false;
}

bool WorkerZygote::wait_ready(std::chrono::milliseconds limit, const std::function<bool()>& stop) {
  const auto until = std::chrono::steady_clock::now() + limit;
  // In slices, so that an interrupted run does not wait for a load that hangs.
  while (state_ == State::loading) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
    if (left.count() <= 0 || (stop && stop())) {
      fail(left.count() <= 0 ? "it did not finish loading the library within " + std::to_string(limit.count() / 1000) + " s"
                             : std::string("the run was stopped while it loaded the library"));
      return false;
    }
    pollfd p{socket_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 100))) > 0) break;
  }
  return ready();
}

pid_t WorkerZygote::fork_worker(const WorkerChildEnds& ends, const std::function<bool(pid_t)>& known_pid) {
  if (!ready()) return -1;
  const int fds[kFdCount] = {ends.requests, ends.replies, ends.output, ends.note};
  if (!send_with_fds(socket_, "F", fds, kFdCount)) return fail("it does not take requests"), -1;
  pollfd p{socket_, POLLIN, 0};
  int ready_fds;
  do ready_fds = ::poll(&p, 1, kAnswerTimeoutMs);
  while (ready_fds < 0 && errno == EINTR);
  if (ready_fds <= 0) return fail("no answer to a fork request"), -1;
  pid_t pid = -1;
  int got[kFdCount], count = 0;
  const ssize_t n = receive_with_fds(socket_, reinterpret_cast<char*>(&pid), sizeof pid, got, &count);
  for (int i = 0; i < count; ++i) ::close(got[i]);
  if (n != static_cast<ssize_t>(sizeof pid) || pid <= 0 || pid == pid_ || known_pid(pid))
    return fail("it answered a fork request with no new worker"), -1;
  // Its answer is checked as a worker's would be: the pid must be a child of ours (alive, or
  // dead and not yet waited for: then the pool finds its death as usual).
  siginfo_t info{};
  if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0)
    return fail("it named a process that is not a child of the harness"), -1;
  ::setpgid(pid, pid);  // its own group before anything could kill the zygote's
  return pid;
}

void WorkerZygote::fail(std::string why) {
  if (why_not_.empty()) why_not_ = std::move(why);
  stop();
  state_ = State::failed;
}

void WorkerZygote::stop() {
  if (pid_ > 0) {
    ::kill(-pid_, SIGKILL), ::kill(pid_, SIGKILL);
    while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
  }
  if (socket_ >= 0) ::close(socket_), socket_ = -1;
  if (subreaper_) ::prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0), subreaper_ = false;
  if (state_ != State::off) {
    state_ = State::failed;
    if (why_not_.empty()) why_not_ = "stopped";
  }
}

void reap_strays(const std::function<bool(pid_t)>& known_pid) {
  for (int round = 0; round < 64; ++round) {
    siginfo_t info{};
    if (::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid == 0) return;
    if (known_pid(info.si_pid)) return;  // its owner waits for it (the next round finds it gone)
    ::waitpid(info.si_pid, nullptr, WNOHANG);
  }
}

}  // namespace opconform::harness
