// Note [Workers from a zygote] (worker_zygote.h).
#include "worker_zygote.h"

#include "opconform/harness/worker_sandbox.h"

#include <dirent.h>
#include <fcntl.h>
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
#include <span>
#include <string_view>

namespace opconform::harness {
namespace {

constexpr int kFdCount = 4;  // WorkerChildEnds
// How long the harness waits for the zygote to answer a fork request.
constexpr std::chrono::milliseconds kAnswerTimeout{5000};

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
// pid (4 bytes, -1 when the fork failed), sent once the worker is the harness's child: a middle
// process forks it and exits at once, so the worker is orphaned, and so re-parented to the harness
// (the subreaper). Neither asks to die with its parent (the middle's end would kill the worker).
[[noreturn]] void serve(int socket, pid_t harness, const WorkerZygote::BecomeWorker& become) {
  constexpr ChildOptions kOrphan{.die_with_parent = false, .own_group = false};
  for (;;) {
    char request[8];
    int fds[kFdCount], count = 0;
    const ssize_t n = receive_with_fds(socket, request, sizeof request, fds, &count);
    if (n <= 0) _exit(0);  // the harness closed the socket: done
    pid_t worker = -1;
    if (count == kFdCount && n == 1 && request[0] == 'F') {
      ChildProcess middle = ChildProcess::start(
          {ChildChannels::from_child},
          [&](std::span<const int> pid_pipe) {  // the middle process: [0] writes the worker's pid
            ChildProcess child = ChildProcess::start(
                {},
                [&](std::span<const int>) -> int {
                  ::close(socket), ::close(pid_pipe[0]);
                  start_forked_worker(harness, {fds[0], fds[1], fds[2], fds[3]}, become);
                },
                kOrphan);
            const pid_t pid = child.release();  // -1 when the fork failed; never killed from here
            (void)!::write(pid_pipe[0], &pid, sizeof pid);
            return 0;
          },
          kOrphan);
      if (middle && middle.read(0, reinterpret_cast<char*>(&worker), sizeof worker) != static_cast<ssize_t>(sizeof worker))
        worker = -1;
      middle.wait();
    }
    for (int i = 0; i < count; ++i) ::close(fds[i]);
    if (!send_with_fds(socket, std::string_view(reinterpret_cast<const char*>(&worker), sizeof worker), nullptr, 0))
      _exit(0);
  }
}

}  // namespace

void WorkerZygote::start(const Prepare& prepare, const std::function<void()>& setup, const BecomeWorker& become) {
  if (state_ != State::off) return;
  int was_subreaper = 0;
  ::prctl(PR_GET_CHILD_SUBREAPER, &was_subreaper, 0, 0, 0);
  if (was_subreaper == 0) {  // one that was (a service manager, say) stays one
    if (::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0)
      return fail(std::string("this process cannot be a child subreaper: ") + std::strerror(errno));
    subreaper_ = true;
  }
  const pid_t harness = ::getpid();
  child_ = ChildProcess::start({ChildChannels::socket}, [&](std::span<const int> ends) -> int {
    const int socket = ::fcntl(ends[0], F_DUPFD_CLOEXEC, 880);  // out of the way of fds a library uses
    if (socket < 0) return 5;
    ::close(ends[0]);
    close_inherited_fds({socket});  // Note [A worker holds only its own descriptors]
    prepare();
    if (setup) setup();
    if (const int threads = other_threads(); threads != 0) {
      (void)send_with_fds(socket, "U " + std::to_string(threads), nullptr, 0);
      return 0;
    }
    if (!send_with_fds(socket, "R", nullptr, 0)) return 0;
    serve(socket, harness, become);
  });  // its own group, as a worker's: it exists before any kill
  if (const auto& failure = child_.failure())
    return fail(std::string(failure->step == StartFailure::channels ? "no socket pair: " : "cannot fork: ") +
                std::strerror(failure->error));
  state_ = State::loading;
}

bool WorkerZygote::ready() {
  if (state_ != State::loading) return state_ == State::ready;
  if (!child_.readable(0)) return false;  // still loading
  char message[64] = {};
  int fds[kFdCount], count = 0;
  const ssize_t n = receive_with_fds(child_.fd(0), message, sizeof message - 1, fds, &count);
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
    if (child_.readable(0, std::min(left, std::chrono::milliseconds(100)))) break;
  }
  return ready();
}

pid_t WorkerZygote::fork_worker(const WorkerChildEnds& ends, const std::function<bool(pid_t)>& known_pid) {
  if (!ready()) return -1;
  const int fds[kFdCount] = {ends.requests, ends.replies, ends.output, ends.note};
  if (!send_with_fds(child_.fd(0), "F", fds, kFdCount)) return fail("it does not take requests"), -1;
  if (!child_.readable(0, kAnswerTimeout)) return fail("no answer to a fork request"), -1;
  pid_t pid = -1;
  int got[kFdCount], count = 0;
  const ssize_t n = receive_with_fds(child_.fd(0), reinterpret_cast<char*>(&pid), sizeof pid, got, &count);
  for (int i = 0; i < count; ++i) ::close(got[i]);
  if (n != static_cast<ssize_t>(sizeof pid) || pid <= 0 || pid == child_.pid() || known_pid(pid))
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
  child_ = ChildProcess{};  // kills it with its group, reaps it, closes the socket
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
