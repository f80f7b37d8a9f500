// The opconform command line, run in-process: the run and check commands with their reports,
// crash and hang isolation, shards and merge, repro lines, list, doctor, usage errors.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "opconform/harness/case_runner.h"
#include "opconform/harness/cli.h"
#include "opconform/harness/worker_sandbox.h"
#include "opconform/harness/name_filter.h"
#include "opconform/harness/worker_pool.h"
#include "opconform/reports/writers.h"

namespace opconform::harness {
namespace {

namespace fs = std::filesystem;
using reports::Outcome;

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("opconform_cli_test_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs `opconform args... --report-dir <dir>/<name>` and returns the exit status.
  int run(std::vector<std::string> args, const std::string& name = "report") {
    args.push_back("--report-dir");
    args.push_back((dir_ / name).string());
    return opconform_main(args);
  }
  reports::Report report(const std::string& name = "report") {
    std::ifstream in(dir_ / name / "report.json");
    return reports::report_from_json(std::string(std::istreambuf_iterator<char>(in), {}));
  }
  static std::map<std::string, Outcome> outcomes_of(const reports::Report& r, const std::string& op) {
    std::map<std::string, Outcome> out;
    for (const auto& c : r.results)
      if (c.op == op) out[c.check] = c.outcome;
    return out;
  }

  fs::path dir_;
};

TEST_F(Cli, RunChecksTheReferenceAndWritesEveryReport) {
  EXPECT_EQ(run({"run", "--ops", "aten::neg", "--samples", "5", "--jobs", "0"}), 0);
  for (const char* f : {"report.json", "junit.xml", "report.md", "report.html"})
    EXPECT_TRUE(fs::exists(dir_ / "report" / f)) << f;
  const auto r = report();
  EXPECT_EQ(r.info.library, "reference");
  std::set<std::string> dtypes, checks;
  for (const auto& c : r.results) {
    EXPECT_EQ(c.op, "aten::neg");
    EXPECT_TRUE(c.outcome == Outcome::passed || c.outcome == Outcome::skipped) << c.check << ": " << c.message;
    dtypes.insert(c.dtype), checks.insert(c.check);
  }
  EXPECT_GE(dtypes.size(), 4u);
  EXPECT_EQ(checks.count("reference_agreement"), 0u) << "the reference is not compared with itself";
  EXPECT_EQ(r.results.size(), dtypes.size() * checks.size());
}

TEST_F(Cli, CrashesAndHangsAreResultsAndTheRunCompletes) {
  EXPECT_EQ(run({"check", "--library", OPCONFORM_MISBEHAVING_PLUGIN, "--samples", "3", "--jobs", "2", "--timeout", "1",
                 "--checks", "test_schema,determinism,stride_invariance"}),
            1);
  const auto r = report();
  EXPECT_EQ(r.info.library, "misbehaving 1");
  auto twice = outcomes_of(r, "fixture::twice"), crash = outcomes_of(r, "fixture::crash"),
       hang = outcomes_of(r, "fixture::hang");
  for (const auto& [check, o] : twice) EXPECT_EQ(o, Outcome::passed) << check;
  ASSERT_EQ(crash.size(), 3u);
  for (const auto& [check, o] : crash) EXPECT_EQ(o, Outcome::crashed) << check;
  // The first check hangs; the case's others are skipped rather than costing a time-out each.
  ASSERT_EQ(hang.size(), 3u);
  EXPECT_EQ(hang["test_schema"], Outcome::timed_out);
  for (const auto& c : r.results)
    if (c.op == "fixture::hang" && c.check == "test_schema") EXPECT_EQ(c.cause_key(), "fixture::hang/test_schema/hang/");
  for (const auto& c : r.results) {
    if (c.op == "fixture::hang" && c.check != "test_schema") {
      EXPECT_EQ(c.outcome, Outcome::skipped) << c.check;
      EXPECT_NE(c.message.find("an earlier check of this case (test_schema) hung"), std::string::npos) << c.message;
    }
  }
  for (const auto& c : r.results) {
    if (c.outcome == Outcome::crashed || c.outcome == Outcome::timed_out) {
      if (c.outcome == Outcome::crashed) {
        EXPECT_NE(c.message.find("SIGSEGV"), std::string::npos) << c.message;
      }
      // The sample it was on, and a seed that replays the case.
      ASSERT_TRUE(c.minimal_input.has_value()) << c.message;
      EXPECT_NE(c.minimal_input->find("sample 1 of 3: x: float64["), std::string::npos) << *c.minimal_input;
      EXPECT_NE(c.message.find("it was on sample 1 of 3"), std::string::npos) << c.message;
      EXPECT_NE(c.repro.find(" --seed "), std::string::npos) << c.repro;
    }
  }
}

// Note [The worker channel is untrusted]: a library that writes garbage or forged frames to every
// fd, forks a child holding the pipes and crashes, or floods stdout costs its own checks only.
TEST_F(Cli, AHostileLibraryCannotForgeResultsOrOutliveTheRun) {
  const fs::path pids = dir_ / "pids";
  ::setenv("HOSTILE_PID_FILE", pids.c_str(), 1);
  testing::internal::CaptureStdout();
  const auto start = std::chrono::steady_clock::now();
  const int status = run({"check", "--library", OPCONFORM_HOSTILE_CHANNEL_PLUGIN, "--ops", "hostile::[gfo]*", "--samples", "2",
                          "--jobs", "2", "--timeout", "20", "--checks", "test_schema,determinism", "--pass-env",
                          "HOSTILE_PID_FILE"});
  const std::string out = testing::internal::GetCapturedStdout();
  ::unsetenv("HOSTILE_PID_FILE");
  EXPECT_EQ(status, 1);
  // The orphan's crash is seen by waitpid although its child holds the pipe: long before 20 s.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  const auto r = report();
  ASSERT_EQ(r.results.size(), 8u);  // 4 ops x 2 checks, float64: a complete report
  for (const char* op : {"hostile::garbage", "hostile::forge"}) {
    for (const auto& c : r.results) {
      if (c.op != op) continue;
      EXPECT_EQ(c.outcome, Outcome::crashed) << op << " " << c.check << ": " << c.message;
      EXPECT_NE(c.message.find("protocol error"), std::string::npos) << c.message;
    }
  }
  for (const auto& [check, o] : outcomes_of(r, "hostile::orphan")) EXPECT_EQ(o, Outcome::crashed) << check;
  // The forged "passed ... forged" for hostile::flood did not become its result.
  for (const auto& c : r.results)
    if (c.op == "hostile::flood") {
      EXPECT_EQ(c.outcome, Outcome::passed) << c.check << ": " << c.message;
    }
  for (const auto& c : r.results) EXPECT_NE(c.message, "forged");
  EXPECT_EQ(out.find("FFFFFFFF"), std::string::npos) << "the flood reached opconform's stdout";
  // The orphan's children died with their worker's process group: gone, or a zombie waiting for
  // init to reap it (kill(pid, 0) still finds those).
  std::ifstream in(pids);
  int pid = 0, children = 0;
  while (in >> pid) {
    ++children;
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string pid_field, comm, state;
    if (stat >> pid_field >> comm >> state) {
      EXPECT_EQ(state, "Z") << "child " << pid << " outlived the run";
    }
  }
  EXPECT_GE(children, 1);
}

// Note [A worker holds only its own descriptors]: a descriptor opconform inherited (here a file
// this test opens without O_CLOEXEC, as a shell's redirection would be) is closed in every process
// that runs the library, so a kernel writing to every fd cannot write into it; with workers
// forked from the zygote and with workers that load the library themselves.
TEST_F(Cli, AKernelCannotWriteToADescriptorTheHarnessInherited) {
  const fs::path file = dir_ / "inherited.log";
  for (const char* zygote : {"1", "0"}) {
    const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ASSERT_GE(fd, 3);
    ::setenv("OPCONFORM_ZYGOTE", zygote, 1);
    const int status = run({"check", "--library", OPCONFORM_HOSTILE_CHANNEL_PLUGIN, "--ops", "hostile::garbage",
                            "--samples", "1", "--jobs", "1", "--checks", "test_schema"});
    ::unsetenv("OPCONFORM_ZYGOTE");
    ::close(fd);
    EXPECT_EQ(status, 1);  // the garbage on its own channel: a protocol error, as always
    ASSERT_EQ(report().results.size(), 1u) << "zygote " << zygote;
    EXPECT_EQ(fs::file_size(file), 0u) << "zygote " << zygote << ": the kernel wrote into the inherited file";
  }
}

// Note [A worker that hangs up is waited for]: a worker whose channel ends before its death
// (a slow exit) is judged by its death; one that closed its channel and lives on breaks the
// protocol, found within the grace of 5 s and not at the time-out.
TEST_F(Cli, AWorkerThatHangsUpIsJudgedByItsDeath) {
  const auto start = std::chrono::steady_clock::now();
  const int status = run({"check", "--library", OPCONFORM_HOSTILE_CHANNEL_PLUGIN, "--ops", "hostile::hangup:hostile::mute",
                          "--samples", "1", "--jobs", "2", "--timeout", "40", "--checks", "determinism"});
  EXPECT_EQ(status, 1);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  const auto r = report();
  ASSERT_EQ(r.results.size(), 2u);
  for (const auto& c : r.results) {
    EXPECT_EQ(c.outcome, Outcome::crashed) << c.op << ": " << c.message;
    if (c.op == "hostile::hangup") {
      EXPECT_NE(c.message.find("SIGABRT"), std::string::npos) << c.message;
      EXPECT_EQ(c.message.find("protocol error"), std::string::npos) << c.message;
    } else {
      EXPECT_NE(c.message.find("protocol error: the worker sent nothing more: it closed its channel and lived on"),
                std::string::npos)
          << c.message;
    }
  }
}

// Note [The worker sandbox]: each op fails if the layer meant to stop it did not.
TEST_F(Cli, WorkersHaveNoNetworkNoSecretsAndCannotSignalTheHarness) {
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(listener, 4), 0);
  socklen_t len = sizeof a;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len);
  ::setenv("HOSTILE_PORT", std::to_string(ntohs(a.sin_port)).c_str(), 1);
  ::setenv("HOSTILE_SECRET", "s3cr3t-t0ken-xyz", 1);
  const int status = run({"check", "--library", OPCONFORM_HOSTILE_CHANNEL_PLUGIN, "--ops", "hostile::[nsp]*:hostile::memory", "--samples",
                          "2", "--jobs", "2", "--checks", "test_schema", "--pass-env", "HOSTILE_PORT", "--memory-limit",
                          "1024"});
  ::unsetenv("HOSTILE_SECRET");
  ::unsetenv("HOSTILE_PORT");
  ::close(listener);
  const auto r = report();
#if defined(OPCONFORM_WITH_SECCOMP)
  EXPECT_NE(r.info.sandbox.find("seccomp (no network"), std::string::npos) << r.info.sandbox;
  for (const char* op : {"hostile::network", "hostile::parent"})
    for (const auto& [check, o] : outcomes_of(r, op)) EXPECT_EQ(o, Outcome::passed) << op << " " << check;
#endif
  EXPECT_NE(r.info.sandbox.find("scrubbed environment"), std::string::npos) << r.info.sandbox;
  // The harness's /proc files: out of reach for a non-root worker (the harness is not dumpable)
  // and for a root one inside a user namespace; a root worker without one reads them.
  const bool harness_reachable = ::getuid() == 0 && r.info.sandbox.find("namespaces (user,") == std::string::npos;
  for (const auto& [check, o] : outcomes_of(r, "hostile::secret"))
    EXPECT_EQ(o, harness_reachable ? Outcome::failed : Outcome::passed) << check;
#if !defined(__SANITIZE_ADDRESS__)
  for (const auto& c : r.results) {
    if (c.op != "hostile::memory") continue;
    EXPECT_EQ(c.outcome, Outcome::failed) << c.message;
    EXPECT_NE(c.message.find("out of memory (3 GiB refused)"), std::string::npos) << c.message;
  }
  EXPECT_EQ(status, 1);  // memory's failure
#else
  (void)status;
#endif
}

// Note [No plugin code in the harness]: what a library does in its constructor or destructor
// costs its checks at most; this process never loads it (it would crash or hang this test).
class LifecycleEnv {
 public:
  LifecycleEnv(const std::string& mode, const fs::path& marker, const fs::path& report_dir = {}) {
    ::setenv("LIFECYCLE_MODE", mode.c_str(), 1);
    ::setenv("LIFECYCLE_MARKER", marker.c_str(), 1);
    ::setenv("LIFECYCLE_REPORT_DIR", report_dir.c_str(), 1);
  }
  ~LifecycleEnv() {
    for (const char* name : {"LIFECYCLE_MODE", "LIFECYCLE_MARKER", "LIFECYCLE_REPORT_DIR"}) ::unsetenv(name);
  }
  static std::vector<std::string> pass() {
    return {"--pass-env", "LIFECYCLE_MODE", "--pass-env", "LIFECYCLE_MARKER", "--pass-env", "LIFECYCLE_REPORT_DIR"};
  }
};

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST_F(Cli, ALibraryThatCrashesOrHangsOnItsSecondLoadCostsChecksNotTheRun) {
  for (const std::string mode : {"crash_second_load", "hang_second_load"}) {
    SCOPED_TRACE(mode);
    LifecycleEnv env(mode, dir_ / (mode + ".marker"));
    const auto start = std::chrono::steady_clock::now();
    // The probe loads it first (and creates the marker); the worker's load is the second.
    const int status = run(with({"check", "--library", OPCONFORM_LIFECYCLE_PLUGIN, "--ops", "lifecycle::twice",
                                 "--checks", "test_schema,determinism", "--samples", "2", "--jobs", "1", "--timeout", "1"},
                                LifecycleEnv::pass()),
                           mode);
    EXPECT_EQ(status, 1);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(15));
    const auto r = report(mode);
    ASSERT_EQ(r.results.size(), 2u);
    EXPECT_EQ(r.results[0].check, "test_schema");
    EXPECT_EQ(r.results[0].outcome, mode == "crash_second_load" ? Outcome::crashed : Outcome::timed_out)
        << r.results[0].message;
    EXPECT_NE(r.results[0].message.find("while the worker loaded the library"), std::string::npos)
        << r.results[0].message;
    EXPECT_EQ(r.results[1].outcome, Outcome::skipped);
    EXPECT_NE(r.results[1].message.find("not run"), std::string::npos) << r.results[1].message;
  }
  // list and doctor learn what a library registers the same way: a crash in loading is theirs to report.
  EXPECT_EQ(opconform_main({"list", "--library", OPCONFORM_CRASHING_REGISTRATION_PLUGIN}), 3);
  testing::internal::CaptureStdout();
  EXPECT_EQ(opconform_main({"doctor", "--library", OPCONFORM_CRASHING_REGISTRATION_PLUGIN}), 1);
  EXPECT_NE(testing::internal::GetCapturedStdout().find("crashed the process"), std::string::npos);
}

TEST_F(Cli, ALibrarysDestructorNeverRunsInTheHarness) {
  for (const std::string mode : {"crash_in_destructor", "forge_in_destructor"}) {
    SCOPED_TRACE(mode);
    LifecycleEnv env(mode, dir_ / "unused", dir_ / mode);
    EXPECT_EQ(run(with({"check", "--library", OPCONFORM_LIFECYCLE_PLUGIN, "--ops", "lifecycle::twice", "--checks",
                        "test_schema,determinism", "--samples", "2", "--jobs", "1"},
                       LifecycleEnv::pass()),
                  mode),
              0);
    const auto r = report(mode);  // parses: not "all passed"
    ASSERT_EQ(r.results.size(), 2u);
    for (const auto& c : r.results) EXPECT_EQ(c.outcome, Outcome::passed) << c.check << ": " << c.message;
  }
}

// Note [Threads a kernel leaves running]
TEST_F(Cli, ACrashOnAThreadAfterTheKernelReturnedIsChargedToTheCheckThatRanIt) {
  LifecycleEnv env("", dir_ / "late.marker");
  EXPECT_EQ(run(with({"check", "--library", OPCONFORM_LIFECYCLE_PLUGIN, "--ops", "lifecycle::late_crash", "--checks",
                      "test_schema,determinism", "--samples", "2", "--jobs", "1"},
                     LifecycleEnv::pass())),
            1);
  const auto r = report();
  ASSERT_EQ(r.results.size(), 2u);
  EXPECT_EQ(r.results[0].check, "test_schema");
  EXPECT_EQ(r.results[0].outcome, Outcome::crashed) << r.results[0].message;
  EXPECT_NE(r.results[0].message.find("on a thread the check's kernel started"), std::string::npos)
      << r.results[0].message;
  // The sample whose call started the thread is still named (noted until the result is sent).
  EXPECT_NE(r.results[0].message.find("it was on sample"), std::string::npos) << r.results[0].message;
  EXPECT_EQ(r.results[1].outcome, Outcome::passed) << r.results[1].message;  // the next check is not blamed
}

// A kernel that writes into the report folder and swaps it for a symlink redirects nothing:
// read-only in the worker's mount namespace, or written through the descriptor opened before.
TEST_F(Cli, TheReportFolderIsOutOfTheWorkersReach) {
  const fs::path folder = dir_ / "report";
  LifecycleEnv env("", dir_ / "unused", folder);
  EXPECT_EQ(run(with({"check", "--library", OPCONFORM_LIFECYCLE_PLUGIN, "--ops", "lifecycle::report_writer",
                      "--checks", "test_schema", "--samples", "2", "--jobs", "1"},
                     LifecycleEnv::pass())),
            0);
  EXPECT_FALSE(fs::exists(dir_ / "report.evil" / "report.json"));
  const bool namespaces = !fs::is_symlink(folder);
  const fs::path written = namespaces ? folder : dir_ / "report.moved";
  std::ifstream in(written / "report.json");
  const auto r = reports::report_from_json(std::string(std::istreambuf_iterator<char>(in), {}));
  ASSERT_EQ(r.results.size(), 1u);
  EXPECT_EQ(r.results[0].outcome, Outcome::passed) << r.results[0].message;
  if (namespaces) {
    EXPECT_NE(r.info.sandbox.find("network: no network, report folders read-only)"), std::string::npos)
        << r.info.sandbox;
  } else {
    EXPECT_NE(r.info.sandbox.find("NO namespaces"), std::string::npos) << r.info.sandbox;
  }
}

TEST_F(Cli, SigintStopsTheRunAndWritesAPartialReportMarkedInterrupted) {
  // The hanging op would hold the run for 30 s per check; SIGINT after 1.5 s ends it.
  std::thread interrupter([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    ::kill(::getpid(), SIGINT);
  });
  const auto start = std::chrono::steady_clock::now();
  const int status = run({"check", "--library", OPCONFORM_MISBEHAVING_PLUGIN, "--samples", "2", "--jobs", "1",
                          "--timeout", "30", "--checks", "test_schema"});
  interrupter.join();
  EXPECT_EQ(status, 128 + SIGINT);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  const auto r = report();
  EXPECT_TRUE(r.info.interrupted);
  EXPECT_TRUE(reports::fails(r));
  EXPECT_LT(r.results.size(), 3u);  // the hang's case did not finish: left out, not invented
  for (const auto& c : r.results) EXPECT_NE(c.op, "fixture::hang") << c.check;
  std::ifstream junit(dir_ / "report" / "junit.xml");
  const std::string xml((std::istreambuf_iterator<char>(junit)), {});
  EXPECT_NE(xml.find("the run was stopped before every case ran"), std::string::npos);
}

TEST_F(Cli, KeepGoingAfterHangRunsEveryCheckOfAHungCase) {
  EXPECT_EQ(run({"check", "--library", OPCONFORM_MISBEHAVING_PLUGIN, "--ops", "fixture::hang", "--samples", "2",
                 "--jobs", "2", "--timeout", "1", "--checks", "test_schema,determinism", "--keep-going-after-hang"}),
            1);
  const auto hang = outcomes_of(report(), "fixture::hang");
  ASSERT_EQ(hang.size(), 2u);
  for (const auto& [check, o] : hang) EXPECT_EQ(o, Outcome::timed_out) << check;
}

TEST_F(Cli, FailOnDecidesTheExitStatus) {
  const std::vector<std::string> args = {"check", "--library", OPCONFORM_MISBEHAVING_PLUGIN, "--samples", "2",
                                         "--jobs", "1", "--ops", "fixture::crash", "--checks", "test_schema"};
  EXPECT_EQ(run(args), 1);
  auto lenient = args;
  lenient.insert(lenient.end(), {"--fail-on", "failed,timed_out"});
  EXPECT_EQ(run(lenient), 0);
}

// Note [Untested is not a pass]: a case every check skipped fails the run, says so, and junit.xml
// agrees with the exit status.
TEST_F(Cli, AnUntestedCaseFailsTheRunUnlessFailOnRelaxesIt) {
  testing::internal::CaptureStderr();
  // gradcheck has nothing to differentiate on int64: every result is skipped.
  EXPECT_EQ(run({"run", "--ops", "aten::neg", "--checks", "gradcheck", "--dtype", "int64", "--samples", "3", "--jobs",
                 "0"}),
            1);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("1 untested case"), std::string::npos) << err;
  EXPECT_NE(err.find("UNTESTED aten::neg [cpu, int64]: gradcheck: skipped"), std::string::npos) << err;
  EXPECT_NE(err.find("\nFAIL\n"), std::string::npos) << err;
  std::ifstream junit(dir_ / "report" / "junit.xml");
  const std::string xml(std::istreambuf_iterator<char>(junit), {});
  EXPECT_NE(xml.find("failures=\"1\""), std::string::npos) << xml;
  EXPECT_NE(xml.find("<failure type=\"untested\""), std::string::npos) << xml;
  EXPECT_EQ(run({"run", "--ops", "aten::neg", "--checks", "gradcheck", "--dtype", "int64", "--samples", "3", "--jobs",
                 "0", "--fail-on", "failed,crashed,timed_out"},
                "relaxed"),
            0);
  std::ifstream relaxed(dir_ / "relaxed" / "junit.xml");
  const std::string relaxed_xml(std::istreambuf_iterator<char>(relaxed), {});
  EXPECT_NE(relaxed_xml.find("failures=\"0\" errors=\"0\""), std::string::npos) << relaxed_xml;
  EXPECT_EQ(report("relaxed").info.fail_on, (reports::FailPolicy{{Outcome::failed, Outcome::crashed, Outcome::timed_out}, false}));
}

// A filter that matches nothing is a usage error before anything runs: no PASS line, no report.
TEST_F(Cli, AFilterMatchingNothingPrintsNoVerdict) {
  testing::internal::CaptureStderr();
  EXPECT_EQ(run({"run", "--ops", "aten::nonexistent*"}), 2);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(err.find("PASS"), std::string::npos) << err;
  EXPECT_NE(err.find("--ops 'aten::nonexistent*' matches no operator"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(dir_ / "report" / "report.json"));
}

TEST_F(Cli, APluginThatCrashesWhileLoadingIsReported) {
  EXPECT_EQ(run({"check", "--library", OPCONFORM_CRASHING_REGISTRATION_PLUGIN}), 1);
  const auto r = report();
  ASSERT_EQ(r.results.size(), 1u);
  EXPECT_EQ(r.results[0].check, "load");
  EXPECT_EQ(r.results[0].outcome, Outcome::crashed);
  EXPECT_NE(r.results[0].message.find("SIGSEGV"), std::string::npos) << r.results[0].message;
}

TEST_F(Cli, AFileThatIsNotAPluginIsAFailedLoad) {
  const auto garbage = dir_ / "garbage.so";
  std::ofstream(garbage) << "not a library";
  EXPECT_EQ(run({"check", "--library", garbage.string()}), 1);
  const auto r = report();
  ASSERT_EQ(r.results.size(), 1u);
  EXPECT_EQ(r.results[0].outcome, Outcome::failed);
  EXPECT_NE(r.results[0].message.find("not a shared library"), std::string::npos) << r.results[0].message;
  EXPECT_EQ(r.results[0].cause()->kind, conformance::FindingKind::load);
}

TEST_F(Cli, ShardsCoverTheRunAndMergeBackIntoIt) {
  const std::vector<std::string> base = {"run", "--ops", "aten::abs", "--samples", "3", "--jobs", "0", "--checks",
                                         "test_schema"};
  ASSERT_EQ(run(base, "whole"), 0);
  for (int i = 0; i < 3; ++i) {
    auto args = base;
    args.insert(args.end(), {"--shard", std::to_string(i) + "/3"});
    ASSERT_EQ(run(args, "shard" + std::to_string(i)), 0);
  }
  std::multiset<std::string> whole, shards;
  for (const auto& c : report("whole").results) whole.insert(c.key());
  for (int i = 0; i < 3; ++i)
    for (const auto& c : report("shard" + std::to_string(i)).results) shards.insert(c.key());
  EXPECT_EQ(whole, shards);
  EXPECT_EQ(opconform_main({"report", "merge", (dir_ / "shard0/report.json").string(),
                            (dir_ / "shard1/report.json").string(), (dir_ / "shard2/report.json").string(),
                            "--report-dir", (dir_ / "merged").string()}),
            0);
  std::multiset<std::string> merged;
  for (const auto& c : report("merged").results) merged.insert(c.key());
  EXPECT_EQ(merged, whole);
}

TEST_F(Cli, GtestShardVariablesShardTheRun) {
  setenv("GTEST_SHARD_INDEX", "1", 1);
  setenv("GTEST_TOTAL_SHARDS", "2", 1);
  const int status = run({"run", "--ops", "aten::abs", "--samples", "2", "--jobs", "0", "--checks", "test_schema"});
  unsetenv("GTEST_SHARD_INDEX");
  unsetenv("GTEST_TOTAL_SHARDS");
  EXPECT_EQ(status, 0);
  const auto r = report();
  EXPECT_EQ(r.info.shard, "1/2");
  ASSERT_EQ(run({"run", "--ops", "aten::abs", "--samples", "2", "--jobs", "0", "--checks", "test_schema"}, "all"), 0);
  // Half the cases, give or take one: shards are balanced by expected cost, not by count.
  const size_t all = report("all").results.size();
  EXPECT_GE(r.results.size(), all / 2);
  EXPECT_LE(r.results.size(), (all + 1) / 2);
}

// A worker gives up its controlling terminal: with one (a pty made the session's terminal, as a
// user's shell has), /dev/tty opens before enter_sandbox and not after, and the layer is named.
TEST(WorkerSandbox, AWorkerHasNoTerminal) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const int master = ::posix_openpt(O_RDWR | O_NOCTTY);
    if (master < 0 || ::grantpt(master) != 0 || ::unlockpt(master) != 0 || ::setsid() < 0) _exit(10);
    const int slave = ::open(::ptsname(master), O_RDWR);  // a session leader's first tty: its terminal
    if (slave < 0) _exit(11);
    const pid_t worker = ::fork();  // not the session leader, as a worker is not
    if (worker == 0) {
      const int before = ::open("/dev/tty", O_RDWR | O_NOCTTY);
      if (before < 0) _exit(12);
      ::close(before);
      const unsigned layers = enter_sandbox(SandboxOptions{}, ::getppid());
      if ((layers & kLayerNoTerminal) == 0) _exit(13);
      _exit(::open("/dev/tty", O_RDWR | O_NOCTTY) < 0 ? 0 : 14);
    }
    int status = 0;
    ::waitpid(worker, &status, 0);
    _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 15);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10-11: no pty here, 12: no terminal to begin with, 13: no layer, 14: kept";
}

// Note [Library text in a repro line]: an op name is the library's text. Whatever it holds, the
// repro line is one line of printable characters, and a shell (and `opconform repro`) reads the name
// back as one word, never as more commands.
TEST(ReproLine, HostileOpNamesStayOneWordOnOneLine) {
  const std::vector<std::string> names = {
      "aten::add.Tensor",                     // bare
      "evil::x; touch /tmp/pwned",            // a second command
      "evil::$(reboot)`id`",                  // substitutions
      "evil::it's",                           // a quote
      "evil::x\nrm -rf ~\n",                  // lines of their own when pasted
      "evil::\x1b]0;title\x07\x1b[2J\tx\\y",  // terminal control, a tab, a backslash
      "",
  };
  for (const std::string& name : names) {
    reports::CaseResult r;
    r.op = name, r.check = "determinism", r.device = "cpu", r.dtype = "float32";
    const std::string line = repro_line("opconform check --library x.so", r, 7);
    for (char c : line) EXPECT_FALSE(static_cast<unsigned char>(c) < 0x20 || c == 0x7f) << line;
    const std::vector<std::string> words = split_command_line(line);
    ASSERT_EQ(words.size(), 14u) << line;
    EXPECT_EQ(words[5], name) << line;
    EXPECT_EQ(words[6], "--checks") << line;
  }
  EXPECT_EQ(quoted("aten::add.Tensor"), "aten::add.Tensor");
  EXPECT_EQ(quoted("a b"), "'a b'");
  EXPECT_EQ(quoted("x\ny"), "$'x\\ny'");
}

TEST_F(Cli, AReproLineReplaysTheSameResult) {
  ASSERT_EQ(run({"check", "--library", OPCONFORM_MISBEHAVING_PLUGIN, "--samples", "2", "--jobs", "1", "--ops",
                 "fixture::crash", "--checks", "determinism"}),
            1);
  const auto r = report();
  ASSERT_EQ(r.results.size(), 1u);
  // A crash has no repro line from opcheck (the worker died); a failed check does. Use the plan's own.
  const std::string line = "opconform check --library " OPCONFORM_MISBEHAVING_PLUGIN
                           " --ops fixture::twice --checks determinism --dtype float64 --seed 7";
  testing::internal::CaptureStdout();
  EXPECT_EQ(opconform_main({"repro", line}), 0);
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("fixture::twice determinism [cpu, float64]: passed"), std::string::npos) << out;
}

// A repro line replays its one case even inside a sharded CI job, whose shard variables would
// otherwise give the case to another shard (and run nothing here).
TEST_F(Cli, AReproIgnoresTheShardVariablesOfTheJobItRunsIn) {
  const std::string line = "opconform check --library " OPCONFORM_MISBEHAVING_PLUGIN
                           " --ops fixture::twice --checks determinism --dtype float64 --seed 7";
  for (const char* index : {"0", "1"}) {
    ::setenv("GTEST_SHARD_INDEX", index, 1);
    ::setenv("GTEST_TOTAL_SHARDS", "2", 1);
    testing::internal::CaptureStdout();
    const int status = opconform_main({"repro", line});
    const std::string out = testing::internal::GetCapturedStdout();
    ::unsetenv("GTEST_SHARD_INDEX");
    ::unsetenv("GTEST_TOTAL_SHARDS");
    EXPECT_EQ(status, 0) << "shard " << index << ":\n" << out;
    EXPECT_NE(out.find("fixture::twice determinism [cpu, float64]: passed"), std::string::npos) << out;
  }
}

TEST_F(Cli, AReproOfACrashReportsTheCrashInsteadOfCrashing) {
  // repro runs the line in a worker: before, it ran in this process, and the crash ended it.
  const std::string line = "opconform check --library " OPCONFORM_MISBEHAVING_PLUGIN
                           " --ops fixture::crash --checks determinism --dtype float64";
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  EXPECT_EQ(opconform_main({"repro", line}), 1);
  const std::string out = testing::internal::GetCapturedStdout();
  testing::internal::GetCapturedStderr();
  EXPECT_NE(out.find("fixture::crash determinism [cpu, float64]: crashed"), std::string::npos) << out;
  EXPECT_NE(out.find("SIGSEGV"), std::string::npos) << out;
}

TEST_F(Cli, ReportDiffFindsRegressions) {
  const std::vector<std::string> args = {"check", "--library", OPCONFORM_MISBEHAVING_PLUGIN, "--samples", "2",
                                         "--jobs", "1", "--checks", "test_schema", "--timeout", "1"};
  auto good = args;
  good.insert(good.end(), {"--ops", "fixture::twice"});
  ASSERT_EQ(run(good, "before"), 0);
  auto all = args;
  all.insert(all.end(), {"--ops", "fixture::*"});
  ASSERT_EQ(run(all, "after"), 1);
  testing::internal::CaptureStdout();
  const int status = opconform_main({"report", "diff", (dir_ / "before/report.json").string(),
                                     (dir_ / "after/report.json").string()});
  const std::string out = testing::internal::GetCapturedStdout();
  // New ops are no regressions, but what they bring is new findings (by cause): a crash and a hang.
  EXPECT_EQ(status, 1) << "a new finding fails the diff:\n" << out;
  EXPECT_NE(out.find("## New findings (2)"), std::string::npos) << out;
  EXPECT_NE(out.find("fixture::crash/test_schema/crash/SIGSEGV"), std::string::npos) << out;
  EXPECT_NE(out.find("0 regressions"), std::string::npos) << out;
  testing::internal::CaptureStdout();
  const int same = opconform_main({"report", "diff", (dir_ / "after/report.json").string(),
                                   (dir_ / "after/report.json").string()});
  testing::internal::GetCapturedStdout();
  EXPECT_EQ(same, 0) << "the same findings: nothing new";
  testing::internal::CaptureStdout();
  const int reverse = opconform_main({"report", "diff", (dir_ / "after/report.json").string(),
                                      (dir_ / "before/report.json").string()});
  const std::string reverse_out = testing::internal::GetCapturedStdout();
  EXPECT_EQ(reverse, 1) << "results that vanished fail the diff:\n" << reverse_out;
}

TEST_F(Cli, UsageErrorsAreExitStatusTwo) {
  testing::internal::CaptureStderr();
  EXPECT_EQ(opconform_main({"check"}), 2);                       // --library missing
  EXPECT_EQ(opconform_main({"run", "--samples", "0"}), 2);       // not positive
  EXPECT_EQ(opconform_main({"run", "--shard", "3/2"}), 2);       // index past count
  EXPECT_EQ(opconform_main({"run", "--checks", "nonsense"}), 2); // unknown check
  EXPECT_EQ(opconform_main({"frobnicate"}), 2);
  EXPECT_EQ(opconform_main({"check", "--library", ""}), 2);      // not the reference in disguise
  EXPECT_EQ(opconform_main({"run", "--timeout", "nan"}), 2);     // NaN passed PositiveNumber
  EXPECT_EQ(opconform_main({"run", "--timeout", "1e10"}), 2);    // overflowed the deadline
  EXPECT_EQ(opconform_main({"run", "--jobs", "-3"}), 2);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("unknown check 'nonsense'"), std::string::npos) << err;
  EXPECT_NE(err.find("0 <= i < N"), std::string::npos) << err;
  EXPECT_NE(err.find("--library is empty"), std::string::npos) << err;
  EXPECT_NE(err.find("must be seconds in (0, 86400]: nan"), std::string::npos) << err;
}

TEST_F(Cli, AReportDirThatCannotBeWrittenIsAUsageErrorBeforeAnyCheck) {
  std::ofstream(dir_ / "a_file") << "x";
  testing::internal::CaptureStderr();
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(opconform_main({"run", "--report-dir", (dir_ / "a_file").string()}), 2);  // the whole reference run otherwise
  EXPECT_EQ(opconform_main({"run", "--ops", "aten::neg", "--json", dir_.string()}), 2);  // a directory, not a file
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));  // no check ran
  EXPECT_NE(err.find("cannot create the directory"), std::string::npos) << err;
  EXPECT_NE(err.find("it is a directory"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(dir_ / "a_file" / "report.json"));
  // The check leaves no file behind in a directory it can write.
  EXPECT_EQ(run({"run", "--ops", "aten::neg", "--dtype", "float32", "--samples", "2", "--jobs", "0"}), 0);
  for (const auto& e : fs::directory_iterator(dir_ / "report"))
    EXPECT_NE(e.path().filename().string().rfind(".", 0), 0u) << e.path();  // no temporary left
}

TEST_F(Cli, ReportCommandsReadRegularFilesOnly) {
  testing::internal::CaptureStderr();
  EXPECT_EQ(opconform_main({"report", "merge", "/dev/zero"}), 3);  // read until out of memory before
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("not a regular file"), std::string::npos) << err;
}

TEST_F(Cli, HelpTellsEveryCommand) {
  testing::internal::CaptureStdout();
  EXPECT_EQ(opconform_main({"--help"}), 0);
  const std::string out = testing::internal::GetCapturedStdout();
  for (const char* command : {"run", "check", "list", "doctor", "repro", "report"})
    EXPECT_NE(out.find(std::string("  ") + command), std::string::npos) << command;
}

TEST_F(Cli, ListAndDoctorDescribeALibrary) {
  testing::internal::CaptureStdout();
  EXPECT_EQ(opconform_main({"list", "--library", OPCONFORM_MISBEHAVING_PLUGIN}), 0);
  std::string out = testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("fixture::hang  [cpu,fake]  float64"), std::string::npos) << out;
  testing::internal::CaptureStdout();
  EXPECT_EQ(opconform_main({"doctor", "--library", OPCONFORM_MISBEHAVING_PLUGIN}), 0);
  out = testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("'fixture::crash' has no autograd formula"), std::string::npos) << out;
  EXPECT_NE(out.find("0 broken, 3 notes"), std::string::npos) << out;
}

// --plugin-option reaches the probe and every worker, is recorded in the report, and travels in
// repro lines, so a replay loads the same library the same way.
TEST_F(Cli, PluginOptionsReachEveryLoadAndTheReproLine) {
  const std::vector<std::string> base = {"check", "--library", OPCONFORM_OPTIONS_PLUGIN, "--samples", "3", "--jobs",
                                         "1", "--checks", "determinism"};
  auto with = [&](std::vector<std::string> extra) {
    auto args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  testing::internal::CaptureStderr();
  EXPECT_EQ(run(with({"--plugin-option", "factor=2"}), "steady"), 0);
  EXPECT_EQ(report("steady").info.library_options, std::vector<std::string>{"factor=2"});
  EXPECT_EQ(run(with({}), "missing"), 1);  // the load fails, and says why
  EXPECT_EQ(run(with({"--plugin-option", "factor"}), "malformed"), 2);
  EXPECT_EQ(run(with({"--plugin-option", "factor=2", "--plugin-option", "drift=1"}), "drifting"), 1);
  testing::internal::GetCapturedStderr();
  const auto missing = report("missing");
  ASSERT_EQ(missing.results.size(), 1u);
  EXPECT_NE(missing.results[0].message.find("option 'factor' is required"), std::string::npos)
      << missing.results[0].message;
  const auto drifting = report("drifting");
  ASSERT_FALSE(drifting.results.empty());
  const std::string line = drifting.results[0].repro;
  EXPECT_NE(line.find("--plugin-option factor=2 --plugin-option drift=1"), std::string::npos) << line;
  testing::internal::CaptureStdout();
  EXPECT_EQ(opconform_main({"repro", line}), 1);  // fails again: the options came with it
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("options::scaled determinism [cpu, float64]: failed"), std::string::npos) << out;
  testing::internal::CaptureStdout();
  EXPECT_EQ(opconform_main({"list", "--library", OPCONFORM_OPTIONS_PLUGIN, "--plugin-option", "factor=3"}), 0);
  const std::string listed = testing::internal::GetCapturedStdout();
  EXPECT_NE(listed.find("option: --plugin-option factor=... (required)  what x is multiplied by"), std::string::npos)
      << listed;
}

// The machine-readable form opconform_add_conformance_tests (cmake/) reads at build time.
TEST_F(Cli, ListNamesGivesOneOperatorALine) {
  testing::internal::CaptureStdout();
  EXPECT_EQ(opconform_main({"list", "--library", OPCONFORM_MISBEHAVING_PLUGIN, "--names"}), 0);
  EXPECT_EQ(testing::internal::GetCapturedStdout(), "fixture::crash\nfixture::hang\nfixture::twice\n");
  testing::internal::CaptureStdout();
  EXPECT_EQ(opconform_main({"list", "--library", OPCONFORM_MISBEHAVING_PLUGIN, "--names", "--ops", "fixture::[ct]*"}), 0);
  EXPECT_EQ(testing::internal::GetCapturedStdout(), "fixture::crash\nfixture::twice\n");
  testing::internal::CaptureStdout();
  EXPECT_EQ(opconform_main({"list", "--names", "--ops", "aten::neg"}), 0);
  EXPECT_EQ(testing::internal::GetCapturedStdout(), "aten::neg\n");
}

// --version, and --help telling the exit statuses and every environment variable read.
TEST_F(Cli, VersionAndHelpTellExitStatusesAndEnvironment) {
  testing::internal::CaptureStdout();
  EXPECT_EQ(opconform_main({"--version"}), 0);
  const std::string version = testing::internal::GetCapturedStdout();
  EXPECT_EQ(version.rfind("opconform ", 0), 0u) << version;
  EXPECT_GT(version.size(), std::string("opconform \n").size()) << version;
  testing::internal::CaptureStdout();
  EXPECT_EQ(opconform_main({"run", "--help"}), 0);
  const std::string help = testing::internal::GetCapturedStdout();
  for (const char* text : {"Exit status:", "  0  the run passed", "  1  the verdict", "  2  a usage error",
                           "  3  an error that stopped", "128+N", "NO_COLOR", "FORCE_COLOR", "OPCONFORM_SEED",
                           "GTEST_SHARD_INDEX", "GTEST_TOTAL_SHARDS", "CI_NODE_INDEX", "BUILDKITE_PARALLEL_JOB",
                           "CIRCLE_NODE_INDEX", "SLURM_ARRAY_TASK_ID", "JOB_COMPLETION_INDEX", "OPCONFORM_SHARD_COUNT",
                           "--color", "--quiet", "--list-cases"})
    EXPECT_NE(help.find(text), std::string::npos) << text << "\n" << help;
  EXPECT_EQ(help.find("opt-in"), std::string::npos) << help;
}

TEST(NameFilter, SelectsAsGtestFiltersDo) {
  const NameFilter f("aten::add*:aten::mul*-aten::add.out");
  EXPECT_TRUE(f.matches("aten::add.Tensor"));
  EXPECT_TRUE(f.matches("aten::mul.Scalar"));
  EXPECT_FALSE(f.matches("aten::add.out"));  // left out
  EXPECT_FALSE(f.matches("aten::sub.Tensor"));
  EXPECT_EQ(f.positive(), (std::vector<std::string>{"aten::add*", "aten::mul*"}));
  const NameFilter all_but("-aten::add*");  // no positive pattern: every name
  EXPECT_TRUE(all_but.matches("aten::neg"));
  EXPECT_FALSE(all_but.matches("aten::add.Tensor"));
  const NameFilter range("hostile::[f-h]*,test_schema");  // a '-' in [...] is a range; ',' separates too
  EXPECT_TRUE(range.matches("hostile::garbage"));
  EXPECT_TRUE(range.matches("test_schema"));
  EXPECT_TRUE(range.negative().empty());
  const NameFilter exact("vendor::odd[name]");  // an exact name matches itself, glob or not
  EXPECT_TRUE(exact.matches("vendor::odd[name]"));
  EXPECT_EQ(NameFilter("aten::neg:aten::typo*").unmatched({"aten::neg", "aten::abs"}),
            std::vector<std::string>{"aten::typo*"});
}

TEST_F(Cli, OpsAndChecksTakeListsAndNegativePatterns) {
  ASSERT_EQ(run({"run", "--ops", "aten::abs:aten::neg-aten::neg", "--checks", "test_schema:determinism-determinism",
                 "--dtype", "float32", "--samples", "2", "--jobs", "0"}),
            0);
  const auto r = report();
  ASSERT_FALSE(r.results.empty());
  for (const auto& c : r.results) {
    EXPECT_EQ(c.op, "aten::abs");
    EXPECT_EQ(c.check, "test_schema");
  }
  // A pattern that matches nothing is a usage error, even beside one that matches.
  testing::internal::CaptureStderr();
  EXPECT_EQ(run({"run", "--ops", "aten::abs:aten::typo*", "--jobs", "0"}, "typo"), 2);
  EXPECT_EQ(run({"run", "--checks", "test_sch*:nomatch*", "--jobs", "0"}, "typo"), 2);
  EXPECT_EQ(run({"run", "--checks", "*-*", "--jobs", "0"}, "typo"), 2);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("--ops 'aten::typo*' matches no operator"), std::string::npos) << err;
  EXPECT_NE(err.find("--checks 'nomatch*' matches no check"), std::string::npos) << err;
  EXPECT_NE(err.find("leaves no check to run"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(dir_ / "typo" / "report.json"));
}

TEST_F(Cli, ListCasesPrintsThePlanAndRunsNothing) {
  testing::internal::CaptureStdout();
  EXPECT_EQ(run({"run", "--ops", "aten::neg", "--dtype", "float32,float64", "--checks", "test_schema,determinism",
                 "--list-cases"}),
            0);
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("aten::neg  cpu  float32  test_schema,determinism\n"), std::string::npos) << out;
  EXPECT_NE(out.find("aten::neg  cpu  float64  test_schema,determinism\n"), std::string::npos) << out;
  EXPECT_NE(out.find("2 cases (1 ops), 4 checks to run\n"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(dir_ / "report")) << "a dry run writes no report";
  testing::internal::CaptureStderr();
  EXPECT_EQ(run({"run", "--ops", "aten::typo*", "--list-cases"}), 2);
  testing::internal::GetCapturedStderr();
}

TEST_F(Cli, QuietAndColourShapeTheConsole) {
  const std::vector<std::string> args = {"check", "--library", OPCONFORM_MISBEHAVING_PLUGIN, "--ops", "fixture::crash:fixture::twice",
                                         "--checks", "determinism", "--samples", "2", "--jobs", "1"};
  auto with = [&](std::vector<std::string> extra) {
    auto a = args;
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  ::setenv("FORCE_COLOR", "1", 1);
  testing::internal::CaptureStderr();
  EXPECT_EQ(run(with({"--quiet", "--color", "never"}), "quiet"), 1);
  const std::string quiet = testing::internal::GetCapturedStderr();
  testing::internal::CaptureStderr();
  EXPECT_EQ(run(with({"--color", "always"}), "always"), 1);
  const std::string always = testing::internal::GetCapturedStderr();
  testing::internal::CaptureStderr();
  EXPECT_EQ(run(with({}), "forced"), 1);
  const std::string forced = testing::internal::GetCapturedStderr();
  ::unsetenv("FORCE_COLOR");
  EXPECT_EQ(quiet.find("Checking"), std::string::npos) << quiet;  // no header, no progress
  EXPECT_EQ(quiet.find("cases/s"), std::string::npos) << quiet;
  EXPECT_NE(quiet.find("CRASHED     fixture::crash determinism [cpu, float64]"), std::string::npos) << quiet;
  EXPECT_NE(quiet.find("\nFAIL\n"), std::string::npos) << quiet;
  EXPECT_EQ(quiet.find("\x1b["), std::string::npos) << "--color never wins over FORCE_COLOR";
  EXPECT_NE(always.find("\x1b["), std::string::npos) << always;
  EXPECT_NE(forced.find("\x1b["), std::string::npos) << "FORCE_COLOR colours a log: " << forced;
  testing::internal::CaptureStderr();
  EXPECT_EQ(opconform_main({"run", "--color", "sometimes"}), 2);
  testing::internal::GetCapturedStderr();
}

// The library path of a repro line is absolute, so the line replays from any directory, and
// repro takes it as the console prints it ("repro: ...") or as report.md quotes it.
TEST_F(Cli, AReproLineReplaysFromAnotherDirectory) {
  fs::create_directories(dir_ / "lib");
  fs::copy_file(OPCONFORM_MISBEHAVING_PLUGIN, dir_ / "lib" / "libmisbehaving.so");
  const fs::path before = fs::current_path();
  fs::current_path(dir_);
  testing::internal::CaptureStderr();
  const int status = opconform_main({"check", "--library", "lib/libmisbehaving.so", "--ops", "fixture::crash", "--checks",
                                     "determinism", "--samples", "2", "--jobs", "1", "--report-dir", "report"});
  testing::internal::GetCapturedStderr();
  fs::current_path("/");
  ASSERT_EQ(status, 1);
  const auto r = report();
  ASSERT_EQ(r.results.size(), 1u);
  const std::string line = r.results[0].repro;
  EXPECT_NE(line.find("--library " + (dir_ / "lib" / "libmisbehaving.so").string()), std::string::npos) << line;
  EXPECT_EQ(r.info.library_path, (dir_ / "lib" / "libmisbehaving.so").string());
  for (const std::string& printed : {"repro: " + line, "Repro: `" + line + "`"}) {
    testing::internal::CaptureStdout();
    testing::internal::CaptureStderr();
    EXPECT_EQ(opconform_main({"repro", printed}), 1) << printed;
    const std::string out = testing::internal::GetCapturedStdout();
    testing::internal::GetCapturedStderr();
    EXPECT_NE(out.find("fixture::crash determinism [cpu, float64]: crashed"), std::string::npos) << out;
  }
  fs::current_path(before);
  EXPECT_EQ(repro_line_as_printed("  repro: opconform run --ops x\n"), "opconform run --ops x");
  EXPECT_EQ(repro_line_as_printed("opconform run"), "opconform run");
}

// One format with and without --library, and the same as JSON for scripts.
TEST_F(Cli, ListHasOneFormatAndJson) {
  testing::internal::CaptureStdout();
  EXPECT_EQ(opconform_main({"list", "--ops", "aten::neg:aten::eq.Tensor"}), 0);
  const std::string reference = testing::internal::GetCapturedStdout();
  EXPECT_NE(reference.find("reference "), std::string::npos) << reference;
  EXPECT_NE(reference.find("(bundled): 2 operators\n"), std::string::npos) << reference;
  // "name  [kernels]  dtypes  schema", as for a library (ListAndDoctorDescribeALibrary).
  const auto line_of = [&](const std::string& op) {
    const size_t at = reference.find("\n" + op + "  [cpu");
    return at == std::string::npos ? std::string() : reference.substr(at + 1, reference.find('\n', at + 1) - at - 1);
  };
  EXPECT_NE(line_of("aten::neg").find(",fake,autograd]  "), std::string::npos) << reference;
  EXPECT_NE(line_of("aten::neg").find("float32"), std::string::npos) << reference;
  EXPECT_NE(line_of("aten::eq.Tensor").find(",fake]  "), std::string::npos) << reference;
  testing::internal::CaptureStdout();
  EXPECT_EQ(opconform_main({"list", "--library", OPCONFORM_MISBEHAVING_PLUGIN, "--json"}), 0);
  const std::string json = testing::internal::GetCapturedStdout();
  for (const char* text : {"\"library\": {", "\"name\": \"misbehaving\"", "\"name\": \"fixture::hang\"",
                           "\"kernels\": [", "\"dtypes\": [", "\"options\": []", "\"problems\": []"})
    EXPECT_NE(json.find(text), std::string::npos) << text << "\n" << json;
  testing::internal::CaptureStdout();
  EXPECT_EQ(opconform_main({"list", "--json", "--ops", "aten::neg"}), 0);
  const std::string reference_json = testing::internal::GetCapturedStdout();
  EXPECT_NE(reference_json.find("\"name\": \"reference\""), std::string::npos) << reference_json;
  EXPECT_NE(reference_json.find("\"name\": \"aten::neg\""), std::string::npos) << reference_json;
}

// doctor notes what can be fixed: the reference's ops without an autograd formula are the ones
// it does not differentiate (comparisons, integer and out= ops), so they are no notes.
TEST_F(Cli, DoctorNotesOnlyWhatCanBeFixed) {
  testing::internal::CaptureStdout();
  EXPECT_EQ(opconform_main({"doctor"}), 0);
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_EQ(out.find("autograd formula"), std::string::npos) << out;
  EXPECT_EQ(out.find("'aten::eq.Tensor'"), std::string::npos) << out;
  EXPECT_NE(out.find("opconform doctor: 0 broken"), std::string::npos) << out;
}

// Note [One OpenMP thread per worker].
TEST(Workers, EachWorkerGetsOneOpenMPThreadUnlessTheUserSetsIt) {
  const char* user = std::getenv("OMP_NUM_THREADS");
  const std::string saved = user != nullptr ? user : "";
  ::unsetenv("OMP_NUM_THREADS");
  one_openmp_thread_per_worker();
  ASSERT_NE(std::getenv("OMP_NUM_THREADS"), nullptr);
  EXPECT_STREQ(std::getenv("OMP_NUM_THREADS"), "1");
  ::setenv("OMP_NUM_THREADS", "3", 1);  // the user's: kept
  one_openmp_thread_per_worker();
  EXPECT_STREQ(std::getenv("OMP_NUM_THREADS"), "3");
  if (user != nullptr) ::setenv("OMP_NUM_THREADS", saved.c_str(), 1);
  else ::unsetenv("OMP_NUM_THREADS");
}

TEST(Workers, HealthyWorkersAreReused) {
  std::vector<PlannedCase> cases(12, PlannedCase{"op", "cpu", "float64", {"a", "b"}});
  std::set<pid_t> pids;
  size_t done = 0;
  // Each result carries the worker's pid in its message.
  CaseFunction run = [](size_t index, size_t first, const std::function<void(size_t)>& started,
                        const std::function<void(const reports::CaseResult&)>& result) {
    for (size_t c = first; c < 2; ++c) {
      started(c);
      result({"op", c == 0 ? "a" : "b", "cpu", "float64", Outcome::passed, std::to_string(getpid()), "", {}, 0});
    }
  };
  run_isolated(cases, run, {2, 10}, [&](size_t, std::vector<reports::CaseResult> results) {
    ++done;
    ASSERT_EQ(results.size(), 2u);
    for (const auto& r : results) pids.insert(std::stoi(r.message));
  });
  EXPECT_EQ(done, cases.size());
  EXPECT_EQ(pids.size(), 2u) << "two workers for twelve cases";
  EXPECT_EQ(pids.count(getpid()), 0u) << "the cases ran outside this process";
}

// The progress line hears of the checks running now, with their time (WorkerOptions::on_running).
TEST(Workers, RunningChecksAreToldWithTheirTime) {
  std::vector<PlannedCase> cases(1, PlannedCase{"op", "cpu", "float64", {"slow"}});
  CaseFunction run = [](size_t, size_t, const std::function<void(size_t)>& started,
                        const std::function<void(const reports::CaseResult&)>& result) {
    started(0);
    ::usleep(1'300'000);
    result({"op", "slow", "cpu", "float64", Outcome::passed, "", "", {}, 0});
  };
  WorkerOptions options{1, 10};
  double longest = 0;
  size_t calls = 0;
  options.on_running = [&](const std::vector<WorkerOptions::Running>& running) {
    ++calls;
    for (const auto& r : running) {
      EXPECT_EQ(r.case_index, 0u);
      EXPECT_EQ(r.check_index, 0u);
      longest = std::max(longest, r.seconds);
    }
  };
  run_isolated(cases, run, options, [](size_t, std::vector<reports::CaseResult>) {});
  EXPECT_GE(calls, 2u);
  EXPECT_GE(longest, 0.5);
  EXPECT_LT(longest, 2.0);
}

// Note [One CUDA worker per GPU]: with device_jobs = 1 no two device cases run at once, while
// CPU cases fill the other workers; without the limit they overlap. The workers count in a page
// they share (they are processes).
int most_device_cases_at_once(int device_jobs) {
  struct Counts {
    std::atomic<int> now{0}, most{0}, cpu_during_device{0};
  };
  void* page = ::mmap(nullptr, sizeof(Counts), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  EXPECT_NE(page, MAP_FAILED);
  auto* counts = new (page) Counts;
  std::vector<PlannedCase> cases;
  for (int i = 0; i < 4; ++i) {
    cases.push_back(PlannedCase{"op" + std::to_string(i), "cuda", "float32", {"c"}});
    cases.push_back(PlannedCase{"op" + std::to_string(i), "cpu", "float32", {"c"}});
  }
  CaseFunction run = [&](size_t index, size_t, const std::function<void(size_t)>& started,
                         const std::function<void(const reports::CaseResult&)>& result) {
    const PlannedCase& c = cases[index];
    started(0);
    if (c.device == "cuda") {
      const int now = ++counts->now;
      for (int most = counts->most.load(); now > most && !counts->most.compare_exchange_weak(most, now);) {
      }
      ::usleep(150'000);
      --counts->now;
    } else {
      if (counts->now.load() > 0) ++counts->cpu_during_device;
      ::usleep(20'000);
    }
    result({c.op, "c", c.device, c.dtype, Outcome::passed, "", "", {}, 0});
  };
  WorkerOptions options{4, 10};
  options.device_jobs = device_jobs;
  size_t done = 0;
  run_isolated(cases, run, options, [&](size_t, std::vector<reports::CaseResult> r) { done += r.size(); });
  EXPECT_EQ(done, cases.size());
  if (device_jobs == 1) {
    EXPECT_GT(counts->cpu_during_device.load(), 0) << "CPU cases ran beside the device case";
  }
  const int most = counts->most.load();
  ::munmap(page, sizeof(Counts));
  return most;
}

TEST(Workers, DeviceCasesRunOnAsManyWorkersAsDeviceJobsAllows) {
  EXPECT_EQ(most_device_cases_at_once(1), 1);
  EXPECT_GT(most_device_cases_at_once(0), 1);
}

// Note [Workers from a zygote]: a run of cases whose first check crashes the worker,
// counting the library loads (WorkerOptions::setup) in a page every process shares.
struct ZygoteRun {
  int loads = 0;
  std::set<pid_t> pids;  // of the workers that ran a second check
  std::vector<reports::CaseResult> results;
};

// The processes whose parent is this one (zombies included).
std::set<pid_t> children_of_this_process() {
  std::set<pid_t> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
    std::ifstream stat(e.path() / "stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    // pid (comm) state ppid ...: comm may hold spaces, so read after its closing parenthesis.
    const size_t close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 1));
    std::string state;
    pid_t ppid = 0;
    if (rest >> state >> ppid && ppid == ::getpid()) out.insert(std::stoi(name));
  }
  return out;
}

// What the library's load (WorkerOptions::setup) does besides counting itself.
enum class Load { quietly, starting_a_thread, crashing_in_the_zygote, hanging_in_the_zygote };

// The zygote is the one process that loads with /dev/null as its stdout (a worker's is a pipe).
bool loading_in_the_zygote() {
  struct stat st {};
  return ::fstat(STDOUT_FILENO, &st) == 0 && S_ISCHR(st.st_mode);
}

ZygoteRun crash_every_case(size_t cases_count, bool zygote, Load load = Load::quietly) {
  struct Shared {
    std::atomic<int> loads{0};
  };
  void* page = ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  EXPECT_NE(page, MAP_FAILED);
  auto* shared = new (page) Shared;
  std::vector<PlannedCase> cases;
  for (size_t i = 0; i < cases_count; ++i) cases.push_back(PlannedCase{"op" + std::to_string(i), "cpu", "float64", {"crash", "live"}});
  CaseFunction run = [&](size_t index, size_t first, const std::function<void(size_t)>& started,
                         const std::function<void(const reports::CaseResult&)>& result) {
    for (size_t c = first; c < 2; ++c) {
      started(c);
      if (c == 0) {
        note_running("sample " + std::to_string(index));
        ::raise(SIGSEGV);
      }
      result({cases[index].op, "live", "cpu", "float64", Outcome::passed, std::to_string(getpid()), "", {}, 0});
    }
  };
  // A hanging zygote is waited for as long as a check may take: a short time-out here.
  WorkerOptions options{1, load == Load::hanging_in_the_zygote ? 2.0 : 20.0};
  options.zygote = zygote;
  options.setup = [&] {
    ++shared->loads;
    if (load == Load::starting_a_thread) std::thread([] { ::pause(); }).detach();
    if (load == Load::crashing_in_the_zygote && loading_in_the_zygote()) ::raise(SIGSEGV);
    if (load == Load::hanging_in_the_zygote && loading_in_the_zygote())
      for (;;) ::pause();
  };
  ZygoteRun out;
  const std::set<pid_t> before = children_of_this_process();
  run_isolated(cases, run, options, [&](size_t, std::vector<reports::CaseResult> results) {
    for (auto& r : results) {
      if (r.check == "live") out.pids.insert(std::stoi(r.message));
      out.results.push_back(std::move(r));
    }
  });
  out.loads = shared->loads.load();
  ::munmap(page, sizeof(Shared));
  for (pid_t pid : children_of_this_process())
    EXPECT_TRUE(before.count(pid)) << "process " << pid << " of the run is left behind";
  return out;
}

TEST(Workers, EveryWorkerIsForkedFromAZygoteThatLoadedTheLibraryOnce) {
  const size_t n = 12;
  const ZygoteRun run = crash_every_case(n, true);
  ASSERT_EQ(run.results.size(), 2 * n);
  for (const auto& r : run.results) {
    if (r.check == "live") {
      EXPECT_EQ(r.outcome, Outcome::passed) << r.op << ": " << r.message;
      continue;
    }
    // The death of a worker forked from the zygote is seen as any other, with its noted sample.
    EXPECT_EQ(r.outcome, Outcome::crashed) << r.op;
    EXPECT_NE(r.message.find("SIGSEGV"), std::string::npos) << r.message;
    EXPECT_NE(r.message.find("it was on sample " + r.op.substr(2)), std::string::npos) << r.message;
  }
  EXPECT_EQ(run.pids.size(), n) << "each case's second check ran in a new worker";
  // 13 workers, the first one included, forked from the zygote: one load in all.
  EXPECT_EQ(run.loads, 1) << "a worker loaded the library itself";
}

// A zygote that dies or never gets ready costs nothing but its own load: the pool spawns workers
// as without it, and the run completes with every result.
TEST(Workers, AZygoteThatCrashesOrHangsWhileLoadingIsLeftOut) {
  const size_t n = 4;
  for (const Load load : {Load::crashing_in_the_zygote, Load::hanging_in_the_zygote}) {
    SCOPED_TRACE(load == Load::crashing_in_the_zygote ? "crashing" : "hanging");
    const ZygoteRun run = crash_every_case(n, true, load);
    EXPECT_EQ(run.loads, static_cast<int>(n) + 2) << "every worker loaded for itself, the zygote tried once";
    ASSERT_EQ(run.results.size(), 2 * n);
    for (const auto& r : run.results)
      EXPECT_EQ(r.outcome, r.check == "live" ? Outcome::passed : Outcome::crashed) << r.check << ": " << r.message;
    EXPECT_EQ(run.pids.size(), n);
  }
}

// The pool waits for the zygote's load before its first worker; a run stopped meanwhile (Ctrl-C)
// does not wait for a load that hangs until the time-out.
TEST(Workers, AStoppedRunDoesNotWaitForAZygoteThatHangsWhileLoading) {
  const std::vector<PlannedCase> cases = {{"op", "cpu", "float64", {"a"}}};
  CaseFunction run = [&](size_t, size_t, const std::function<void(size_t)>& started,
                         const std::function<void(const reports::CaseResult&)>& result) {
    started(0);
    result({"op", "a", "cpu", "float64", Outcome::passed, "", "", {}, 0});
  };
  WorkerOptions options{1, 30};
  options.setup = [] {
    if (loading_in_the_zygote())
      for (;;) ::pause();
  };
  const auto start = std::chrono::steady_clock::now();
  options.stop = [&] { return std::chrono::steady_clock::now() - start > std::chrono::milliseconds(300); };
  run_isolated(cases, run, options, [](size_t, std::vector<reports::CaseResult>) {});
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(Workers, EveryReplacementLoadsTheLibraryWhenTheZygoteIsOffOrItsLoadStartsThreads) {
  const size_t n = 4;
  const ZygoteRun off = crash_every_case(n, false);
  EXPECT_EQ(off.loads, static_cast<int>(n) + 1);
  // A thread started while loading would be missing in a forked worker: the zygote refuses, and
  // each worker loads for itself (the zygote's own load is the one more).
  const ZygoteRun threads = crash_every_case(n, true, Load::starting_a_thread);
  EXPECT_EQ(threads.loads, static_cast<int>(n) + 2);
  for (const auto& run : {off, threads}) {
    ASSERT_EQ(run.results.size(), 2 * n);
    for (const auto& r : run.results)
      EXPECT_EQ(r.outcome, r.check == "live" ? Outcome::passed : Outcome::crashed) << r.check << ": " << r.message;
  }
}

// Note [A death outside any check]: a worker that dies before a check ran a sample, after it had
// run others, shows what an earlier check left (damaged memory): the check is run again in a new
// worker, and its result says so. Dying that way in a new worker too is a crash of that check.
TEST(Workers, ADeathBeforeACheckRanASampleRunsItAgainInANewWorker) {
  struct Shared {
    std::atomic<int> between_deaths{0};
  };
  void* page = ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(page, MAP_FAILED);
  auto* shared = new (page) Shared;
  const std::vector<PlannedCase> cases = {{"damaging", "cpu", "float64", {"a"}},
                                          {"victim", "cpu", "float64", {"b", "c"}},
                                          {"between", "cpu", "float64", {"d", "e"}},
                                          {"doomed", "cpu", "float64", {"f"}}};
  static bool damaged = false;  // per worker process: what "damaging" leaves behind
  CaseFunction run = [&](size_t index, size_t first, const std::function<void(size_t)>& started,
                         const std::function<void(const reports::CaseResult&)>& result) {
    if (damaged || cases[index].op == "doomed") ::raise(SIGSEGV);  // as the case starts
    for (size_t c = first; c < cases[index].checks.size(); ++c) {
      if (c == 1 && cases[index].op == "between" && shared->between_deaths++ == 0) ::raise(SIGSEGV);
      started(c);
      note_running("sample 1");
      result({cases[index].op, cases[index].checks[c], "cpu", "float64", Outcome::passed, std::to_string(getpid()), "", {}, 0});
      note_running("");
    }
    if (cases[index].op == "damaging") damaged = true;
  };
  std::map<std::string, reports::CaseResult> by_check;
  run_isolated(cases, run, {1, 20}, [&](size_t, std::vector<reports::CaseResult> results) {
    for (auto& r : results) by_check[r.check] = r;
  });
  ::munmap(page, sizeof(Shared));
  ASSERT_EQ(by_check.size(), 6u);
  const std::string again = "the check was run again in a new worker";
  // The victim's first check ran again and passed; its message names the check the dead worker ran last.
  EXPECT_EQ(by_check["b"].outcome, Outcome::passed) << by_check["b"].message;
  EXPECT_NE(by_check["b"].message.find("killed by SIGSEGV"), std::string::npos) << by_check["b"].message;
  EXPECT_NE(by_check["b"].message.find("after it had run damaging a [cpu, float64]"), std::string::npos) << by_check["b"].message;
  EXPECT_NE(by_check["b"].message.find(again), std::string::npos) << by_check["b"].message;
  EXPECT_NE(by_check["b"].message, by_check["a"].message) << "the victim ran in a new worker";
  EXPECT_EQ(by_check["c"].message.find(again), std::string::npos) << by_check["c"].message;
  // A death between two checks of one case: the second runs again.
  EXPECT_EQ(by_check["d"].outcome, Outcome::passed);
  EXPECT_EQ(by_check["e"].outcome, Outcome::passed) << by_check["e"].message;
  EXPECT_NE(by_check["e"].message.find("after it had run between d [cpu, float64]"), std::string::npos) << by_check["e"].message;
  // A check that dies before its first sample in a new worker too is crashed, with both deaths told.
  EXPECT_EQ(by_check["f"].outcome, Outcome::crashed) << by_check["f"].message;
  EXPECT_NE(by_check["f"].message.find("the worker process running this check was killed by SIGSEGV"), std::string::npos)
      << by_check["f"].message;
  EXPECT_NE(by_check["f"].message.find(again), std::string::npos) << by_check["f"].message;
}

}  // namespace
}  // namespace opconform::harness

namespace opconform::harness {
namespace {

// Note [One finding per cause], Note [A crash says where], Note [A crash says its input]: a crash
// is a result with a typed cause (its signal), the crashing thread's backtrace, the values of its
// sample's small tensors, and a repro line that keeps the flags that change the verdict.
TEST_F(Cli, ACrashCarriesItsCauseBacktraceValuesAndAFullReproLine) {
  EXPECT_EQ(run({"check", "--library", OPCONFORM_MISBEHAVING_PLUGIN, "--ops", "fixture::crash", "--checks", "test_schema",
                 "--samples", "3", "--jobs", "1", "--timeout", "7"}),
            1);
  const auto r = report();
  ASSERT_EQ(r.results.size(), 1u);
  const auto& c = r.results[0];
  ASSERT_EQ(c.outcome, Outcome::crashed);
  EXPECT_EQ(c.cause_key(), "fixture::crash/test_schema/crash/SIGSEGV");
  EXPECT_NE(c.message.find("opconform worker: fatal signal SIGSEGV"), std::string::npos) << c.message;
  EXPECT_NE(c.message.find("backtrace of the crashing thread"), std::string::npos) << c.message;
  EXPECT_NE(c.message.find("libopconform_misbehaving_plugin.so("), std::string::npos) << c.message;
  EXPECT_NE(c.repro.find(" --timeout 7 "), std::string::npos) << c.repro;
  // The sample's tensor has 20 elements: its values are in the note.
  ASSERT_TRUE(c.minimal_input.has_value());
  EXPECT_NE(c.minimal_input->find("(values: x = tensor("), std::string::npos) << *c.minimal_input;
}

// --expect: expected findings do not fail the run; a new one does; a stale entry fails only with
// --fail-on stale; an expired one always fails; a malformed file is a usage error.
TEST_F(Cli, AnExpectationsFileGatesTheRunOnNewFindings) {
  const std::vector<std::string> args = {"check", "--library", OPCONFORM_MISBEHAVING_PLUGIN, "--ops", "fixture::crash",
                                         "--checks", "test_schema", "--samples", "2", "--jobs", "1"};
  const auto with_file = [&](const std::string& text, std::vector<std::string> extra = {}) {
    const fs::path file = dir_ / "expect.txt";
    std::ofstream(file) << text;
    auto a = args;
    a.insert(a.end(), {"--expect", file.string()});
    a.insert(a.end(), extra.begin(), extra.end());
    return run(a);
  };
  EXPECT_EQ(run(args), 1);
  EXPECT_EQ(with_file("cause=fixture::crash/test_schema/crash/SIGSEGV outcome=crashed reason=\"seeded crash\"\n"), 0);
  EXPECT_EQ(report().results[0].expected, "seeded crash");
  EXPECT_EQ(report().expectations.at(0).matched, 1u);
  // A new finding: the entry expects another outcome.
  EXPECT_EQ(with_file("op=fixture::crash outcome=failed reason=\"wrong outcome\"\n"), 1);
  // Stale: reported, fails only with --fail-on stale.
  const std::string stale = "op=fixture::crash reason=known\nop=fixture::gone reason=\"fixed long ago\"\n";
  EXPECT_EQ(with_file(stale), 0);
  EXPECT_EQ(report().expectations.at(1).status, reports::ExpectationEntry::Status::stale);
  EXPECT_EQ(with_file(stale, {"--fail-on", "failed,crashed,timed_out,untested,stale"}), 1);
  // Expired: covers nothing and fails the run.
  EXPECT_EQ(with_file("op=fixture::crash reason=known until=2020-01-01\n"), 1);
  EXPECT_EQ(report().expectations.at(0).status, reports::ExpectationEntry::Status::expired);
  // Malformed: a usage error before anything runs.
  EXPECT_EQ(with_file("op=fixture::crash\n"), 2);
}

}  // namespace
}  // namespace opconform::harness
