// The harness's child-process helper (Note [One way to run a child], child_process.h): exit codes,
// deaths by a signal, a hang killed at a deadline, what a child writes, and no child left
// unreaped.
#include "opconform/harness/child_process.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <fstream>
#include <iterator>
#include <string>

namespace opconform::harness {
namespace {

using std::chrono::milliseconds;

// No child of this process is left, ended or not (no zombie).
bool no_children() {
  errno = 0;
  return ::waitpid(-1, nullptr, WNOHANG) == -1 && errno == ECHILD;
}

// Whether `pid` runs (exists and is no zombie).
bool alive(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), {});
  const size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] != 'Z';
}

TEST(ChildProcess, ExitsWithItsCode) {
  {
    ChildProcess child = ChildProcess::start({}, [](std::span<const int>) { return 7; });
    ASSERT_TRUE(child);
    const ChildExit exit = child.wait();
    EXPECT_FALSE(exit.killed());
    EXPECT_EQ(exit.code(), 7);
    EXPECT_EQ(exit.signal(), 0);
    ASSERT_TRUE(child.ended());
    EXPECT_EQ(child.ended()->code(), 7);
  }
  EXPECT_TRUE(no_children());
}

TEST(ChildProcess, AnExceptionEndsTheChildNotTheParentsCode) {
  {
    ChildProcess child = ChildProcess::start({}, [](std::span<const int>) -> int { throw 42; });
    ASSERT_TRUE(child);
    EXPECT_EQ(child.wait().code(), ChildProcess::kUncaughtException);
  }
  EXPECT_TRUE(no_children());
}

TEST(ChildProcess, KilledByASignal) {
  {
    ChildProcess child = ChildProcess::start({}, [](std::span<const int>) {
      ::signal(SIGSEGV, SIG_DFL);
      ::raise(SIGSEGV);
      return 0;
    });
    ASSERT_TRUE(child);
    const ChildExit exit = child.wait();
    EXPECT_TRUE(exit.killed());
    EXPECT_EQ(exit.signal(), SIGSEGV);
    EXPECT_EQ(exit.code(), -1);
  }
  EXPECT_TRUE(no_children());
}

TEST(ChildProcess, AHangIsKilledAtItsDeadlineAndReaped) {
  {
    ChildProcess child = ChildProcess::start({ChildChannels::from_child}, [](std::span<const int>) {
      for (;;) ::pause();
      return 0;
    });
    ASSERT_TRUE(child);
    const auto started = std::chrono::steady_clock::now();
    EXPECT_FALSE(child.readable(0, milliseconds(200)));  // it says nothing: the deadline passes
    EXPECT_GE(std::chrono::steady_clock::now() - started, milliseconds(190));
    EXPECT_FALSE(child.poll_exit());
    const ChildExit exit = child.stop();
    EXPECT_TRUE(exit.killed());
    EXPECT_EQ(exit.signal(), SIGKILL);
  }
  EXPECT_TRUE(no_children());
}

TEST(ChildProcess, ItsGroupIsKilledWithIt) {
  pid_t grandchild = -1;
  {
    ChildProcess child = ChildProcess::start({ChildChannels::from_child}, [](std::span<const int> ends) {
      const pid_t pid = ::fork();  // a process the child leaves behind, in its group
      if (pid == 0)
        for (;;) ::pause();
      (void)!::write(ends[0], &pid, sizeof pid);
      return 0;
    });
    ASSERT_TRUE(child);
    ASSERT_EQ(child.read(0, reinterpret_cast<char*>(&grandchild), sizeof grandchild),
              static_cast<ssize_t>(sizeof grandchild));
    EXPECT_EQ(child.wait().code(), 0);
    EXPECT_TRUE(alive(grandchild));  // in the child's group
    child.kill_group();
  }
  // Re-parented to init (or a subreaper), it is dead soon after the group's kill: gone, or a
  // zombie its new parent has not reaped yet.
  bool dead = false;
  for (int i = 0; i < 200 && !dead; ++i, ::usleep(5000)) dead = !alive(grandchild);
  EXPECT_TRUE(dead);
  EXPECT_TRUE(no_children());
}

TEST(ChildProcess, ReadsWhatItWrites) {
  {
    ChildProcess child = ChildProcess::start({ChildChannels::to_child, ChildChannels::from_child},
                                             [](std::span<const int> ends) {
                                               char buffer[16];
                                               const ssize_t n = ::read(ends[0], buffer, sizeof buffer);
                                               if (n <= 0) return 3;
                                               const std::string reply = "got " + std::string(buffer, n);
                                               return ::write(ends[1], reply.data(), reply.size()) ==
                                                              static_cast<ssize_t>(reply.size())
                                                          ? 0
                                                          : 4;
                                             });
    ASSERT_TRUE(child);
    ASSERT_EQ(::write(child.fd(0), "ping", 4), 4);
    ASSERT_TRUE(child.readable(1, milliseconds(5000)));
    char buffer[16];
    const ssize_t n = child.read(1, buffer, sizeof buffer);
    EXPECT_EQ(std::string(buffer, n > 0 ? n : 0), "got ping");
    EXPECT_EQ(child.wait().code(), 0);
    // Its end of the pipe is closed: the child's exit is the pipe's end.
    ASSERT_TRUE(child.readable(1));
    EXPECT_EQ(child.read(1, buffer, sizeof buffer), 0);
  }
  EXPECT_TRUE(no_children());
}

TEST(ChildProcess, ASocketPairCarriesMessages) {
  {
    ChildProcess child = ChildProcess::start({ChildChannels::socket}, [](std::span<const int> ends) {
      return ::write(ends[0], "R", 1) == 1 ? 0 : 4;
    });
    ASSERT_TRUE(child);
    ASSERT_TRUE(child.readable(0, milliseconds(5000)));
    char c = 0;
    EXPECT_EQ(child.read(0, &c, 1), 1);
    EXPECT_EQ(c, 'R');
  }
  EXPECT_TRUE(no_children());
}

TEST(ChildProcess, DroppedWhileAliveItIsKilledAndReaped) {
  pid_t pid = -1;
  {
    ChildProcess child = ChildProcess::start({}, [](std::span<const int>) {
      for (;;) ::pause();
      return 0;
    });
    ASSERT_TRUE(child);
    pid = child.pid();
  }
  EXPECT_NE(::kill(pid, 0), 0);  // reaped: no such process, not even a zombie
  EXPECT_TRUE(no_children());
}

TEST(ChildProcess, AdoptsAChildForkedElsewhere) {
  {
    ChildChannels channels;
    ASSERT_TRUE(channels.open({ChildChannels::from_child}));
    const int write_end = channels.child_ends()[0];
    const pid_t pid = ::fork();
    if (pid == 0) _exit(::write(write_end, "x", 1) == 1 ? 5 : 6);
    ChildProcess child = ChildProcess::adopt(pid, std::move(channels));
    ASSERT_TRUE(child);
    EXPECT_EQ(child.pid(), pid);
    char c = 0;
    EXPECT_EQ(child.read(0, &c, 1), 1);
    EXPECT_EQ(child.wait().code(), 5);
  }
  EXPECT_TRUE(no_children());
}

TEST(ChildProcess, SaysWhyItCouldNotStart) {
  ChildProcess none;
  EXPECT_FALSE(none);
  EXPECT_FALSE(none.failure());
  EXPECT_EQ(none.pid(), -1);
  EXPECT_EQ(none.wait().status, 0);
  // More channels than a child holds: no fork, and the channels' step named.
  ChildProcess child = ChildProcess::start(
      {ChildChannels::from_child, ChildChannels::from_child, ChildChannels::from_child, ChildChannels::from_child,
       ChildChannels::from_child},
      [](std::span<const int>) { return 0; });
  EXPECT_FALSE(child);
  ASSERT_TRUE(child.failure());
  EXPECT_EQ(child.failure()->step, StartFailure::channels);
  EXPECT_TRUE(no_children());
}

TEST(WaitReadable, TimesOutWithNothingToRead) {
  int ends[2];
  ASSERT_EQ(::pipe(ends), 0);
  pollfd p{ends[0], POLLIN, 0};
  EXPECT_EQ(wait_readable({&p, 1}, milliseconds(30)), 0);
  ASSERT_EQ(::write(ends[1], "x", 1), 1);
  EXPECT_EQ(wait_readable({&p, 1}, milliseconds(30)), 1);
  ::close(ends[0]), ::close(ends[1]);
}

}  // namespace
}  // namespace opconform::harness
