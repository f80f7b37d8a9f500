// A real Slurm run: a single-node cluster (munged, slurmctld, slurmd from Debian's slurm-wlm and
// munge) on 127.0.0.1, configured in a temporary folder, runs four shards of a small main job as a
// job array; the engine's own variables shard it (no --shard), and the merged report equals the
// unsharded run. Skips, saying why, where the daemons cannot start (not root, packages missing);
// OPCONFORM_REQUIRE_SLURM=1 turns that skip into a failure.
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <thread>

#include "opconform/harness/cli.h"
#include "opconform/harness/plan.h"
#include "opconform/reports/writers.h"

namespace opconform::harness {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), {}};
}

std::string tail(const std::string& text, size_t n = 1500) {
  return text.size() <= n ? text : "..." + text.substr(text.size() - n);
}

// `command` through /bin/sh, with its output (stdout and stderr) and exit status.
std::pair<int, std::string> shell(const std::string& command) {
  std::string out;
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (p == nullptr) return {-1, "popen failed"};
  char buffer[4096];
  for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, p)) > 0;) out.append(buffer, n);
  const int status = ::pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), out};
}

// The absolute path of a program in PATH or in the sbin folders (often not in a test's PATH).
std::string find_program(const std::string& name) {
  std::string dirs = std::getenv("PATH") ? std::getenv("PATH") : "";
  dirs += ":/usr/sbin:/sbin:/usr/bin:/bin";
  for (size_t start = 0; start <= dirs.size();) {
    const size_t end = std::min(dirs.find(':', start), dirs.size());
    const fs::path candidate = fs::path(dirs.substr(start, end - start)) / name;
    if (end > start && ::access(candidate.c_str(), X_OK) == 0) return candidate.string();
    start = end + 1;
  }
  return "";
}

// Two distinct free TCP ports on 127.0.0.1 (held together while chosen, so they differ).
std::pair<int, int> free_ports() {
  int fds[2], ports[2];
  for (int i = 0; i < 2; ++i) {
    fds[i] = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    ::bind(fds[i], reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    ::getsockname(fds[i], reinterpret_cast<sockaddr*>(&addr), &len);
    ports[i] = ntohs(addr.sin_port);
  }
  ::close(fds[0]), ::close(fds[1]);
  return {ports[0], ports[1]};
}

// A process with stdin from /dev/null and its output in `log`, killed when this process dies (a
// test killed by ctest's timeout leaves no daemon behind).
pid_t spawn(const std::vector<std::string>& args, const fs::path& log) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  const int in = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    ::dup2(in, 0), ::dup2(out, 1), ::dup2(out, 2);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(out), ::close(in);
  return pid;
}

bool alive(pid_t pid) { return ::waitpid(pid, nullptr, WNOHANG) == 0; }

// Polls `ready` every 100 ms until it holds or `limit` passes; false also when `pid` died.
template <typename Ready>
bool wait_for(Ready ready, std::chrono::seconds limit, pid_t pid) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (ready()) return true;
    if (!alive(pid)) return false;
    std::this_thread::sleep_for(100ms);
  }
  return ready();
}

// munged, slurmctld and slurmd on localhost, everything they write in one temporary folder.
class SlurmCluster {
 public:
  ~SlurmCluster() { stop(); }

  // "" when the node is idle, else why the cluster did not start.
  std::string start(const fs::path& dir) {
    dir_ = dir;
    for (const char* name : {"munged", "slurmctld", "slurmd", "sbatch", "sinfo", "scancel"}) {
      programs_[name] = find_program(name);
      if (programs_[name].empty())
        return std::string(name) + " is not installed (apt-get install slurm-wlm munge: scripts/install-deps.sh)";
    }
    fs::create_directories(dir_ / "munge");
    fs::create_directories(dir_ / "state");
    fs::create_directories(dir_ / "spool");
    fs::permissions(dir_ / "munge", fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
    write_munge_key();
    const fs::path socket = dir_ / "munge" / "munge.socket";
    const pid_t munged = launch({programs_["munged"], "-F", "-f", "--socket=" + socket.string(),
                                 "--key-file=" + (dir_ / "munge" / "munge.key").string(),
                                 "--pid-file=" + (dir_ / "munge" / "munged.pid").string(),
                                 "--seed-file=" + (dir_ / "munge" / "munged.seed").string(),
                                 "--log-file=" + (dir_ / "munge" / "munged.log").string()},
                                "munged.out");
    if (!wait_for([&] { return fs::exists(socket); }, 10s, munged))
      return "munged did not start: " + tail(read_text(dir_ / "munged.out") + read_text(dir_ / "munge" / "munged.log"));
    write_conf(socket);
    ::setenv("SLURM_CONF", conf_.c_str(), 1);  // for sinfo, sbatch and scancel (and the jobs)
    controller_ = launch({programs_["slurmctld"], "-D", "-f", conf_.string()}, "slurmctld.out");
    const pid_t slurmd = launch({programs_["slurmd"], "-D", "-f", conf_.string(), "-N", "localhost"}, "slurmd.out");
    if (!wait_for([&] { return shell(programs_["sinfo"] + " -h -o %T").second.find("idle") == 0; }, 30s, slurmd) ||
        !alive(controller_))
      return "the Slurm node did not become idle: " + tail(read_text(dir_ / "slurmctld.out"), 800) +
             tail(read_text(dir_ / "slurmd.out"), 800);
    return "";
  }

  std::string program(const std::string& name) { return programs_[name]; }

  // Cancels what still runs, then ends the daemons (SIGTERM, SIGKILL after 5 s), newest first.
  void stop() {
    if (controller_ > 0 && alive(controller_)) shell(programs_["scancel"] + " --quiet --user=root");
    for (auto it = daemons_.rbegin(); it != daemons_.rend(); ++it) {
      ::kill(*it, SIGTERM);
      if (!wait_for([&] { return !alive(*it); }, 5s, *it)) ::kill(*it, SIGKILL);
      ::waitpid(*it, nullptr, 0);
    }
    daemons_.clear();
    controller_ = -1;
    ::unsetenv("SLURM_CONF");
  }

 private:
  pid_t launch(const std::vector<std::string>& args, const char* log) {
    const pid_t pid = spawn(args, dir_ / log);
    if (pid > 0) daemons_.push_back(pid);
    return pid;
  }

  void write_munge_key() {
    std::random_device random;
    std::string key(1024, '\0');
    for (char& c : key) c = static_cast<char>(random());
    const fs::path path = dir_ / "munge" / "munge.key";
    std::ofstream(path, std::ios::binary) << key;
    fs::permissions(path, fs::perms::owner_read | fs::perms::owner_write);  // munged refuses a readable key
  }

  void write_conf(const fs::path& munge_socket) {
    const auto [controller_port, node_port] = free_ports();
    conf_ = dir_ / "slurm.conf";
    std::ofstream(dir_ / "plugstack.conf");  // empty: not /etc/slurm's
    std::ofstream out(conf_);
    const std::string d = dir_.string();
    out << "ClusterName=opconformtest\nSlurmctldHost=localhost(127.0.0.1)\n"
        << "SlurmUser=root\nSlurmdUser=root\n"
        << "SlurmctldPort=" << controller_port << "\nSlurmdPort=" << node_port << "\n"
        << "CommunicationParameters=NoCtldInAddrAny,NoInAddrAny\n"  // bind 127.0.0.1, not every address
        << "AuthType=auth/munge\nCredType=cred/munge\nAuthInfo=socket=" << munge_socket.string() << "\n"
        << "StateSaveLocation=" << d << "/state\nSlurmdSpoolDir=" << d << "/spool\n"
        << "SlurmctldPidFile=" << d << "/slurmctld.pid\nSlurmdPidFile=" << d << "/slurmd.pid\n"
        << "SlurmctldLogFile=" << d << "/slurmctld.log\nSlurmdLogFile=" << d << "/slurmd.log\n"
        << "PlugStackConfig=" << d << "/plugstack.conf\n"
        << "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nSwitchType=switch/none\n"
        << "SelectType=select/cons_tres\nSelectTypeParameters=CR_CPU\nSchedulerType=sched/builtin\n"
        << "MpiDefault=none\nReturnToService=2\nMailProg=/bin/true\n"
        << "JobAcctGatherType=jobacct_gather/none\nAccountingStorageType=accounting_storage/none\n"
        << "JobCompType=jobcomp/none\n"
        << "NodeName=localhost NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN\n"
        << "PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP\n";
  }

  fs::path dir_, conf_;
  std::map<std::string, std::string> programs_;
  std::vector<pid_t> daemons_;
  pid_t controller_ = -1;
};

class Slurm : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/opconform_slurm_XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
    const std::string why = ::geteuid() != 0 ? "not root: slurmd runs the jobs as root here" : cluster_.start(dir_);
    if (why.empty()) return;
    const char* require = std::getenv("OPCONFORM_REQUIRE_SLURM");
    if (require != nullptr && std::string(require) == "1") FAIL() << why;
    GTEST_SKIP() << why;
  }
  void TearDown() override {
    cluster_.stop();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  reports::Report report(const fs::path& dir) { return reports::report_from_json(read_text(dir / "report.json")); }

  // The job array's script: the shard comes from SLURM_ARRAY_TASK_ID alone (the other engines'
  // variables, which a CI running this test may set, are cleared so they do not conflict).
  fs::path write_job(const fs::path& program) {
    const fs::path job = dir_ / "job.sh";
    std::ofstream out(job);
    out << "#!/bin/sh\n";
    for (const ShardEngine& e : shard_engines())
      if (std::string(e.name) != "slurm") out << "unset " << e.index_var << "\n";
    out << "exec '" << program.string() << "' run --ops 'aten::[a-c]*' --samples 3 --jobs 1 --report-dir '"
        << dir_.string() << "/shard_'\"$SLURM_ARRAY_TASK_ID\"\n";
    out.close();
    fs::permissions(job, fs::perms::owner_all);
    return job;
  }

  SlurmCluster cluster_;
  fs::path dir_;
};

// What a result says, for comparing runs: its outcome and message by key (not its time).
std::map<std::string, std::string> verdicts(const reports::Report& r) {
  std::map<std::string, std::string> out;
  for (const auto& c : r.results) out[c.key()] = std::string(conformance::to_string(c.outcome)) + ": " + c.message;
  return out;
}

TEST_F(Slurm, AJobArrayShardsTheRunAndTheMergeEqualsTheWholeRun) {
  // The opconform program is built next to this test (harness/CMakeLists.txt).
  const fs::path program = fs::read_symlink("/proc/self/exe").parent_path() / "opconform";
  ASSERT_TRUE(fs::exists(program)) << program << " is not built";
  ASSERT_EQ(opconform_main({"run", "--ops", "aten::[a-c]*", "--samples", "3", "--report-dir", (dir_ / "whole").string()}),
            0);
  const fs::path job = write_job(program);
  const auto [status, output] =
      shell("cd '" + dir_.string() + "' && timeout 180 " + cluster_.program("sbatch") +
            " --array=0-3 --wait --output='" + dir_.string() + "/slurm_%a.out' '" + job.string() + "'");
  std::string logs;
  for (int i = 0; i < 4; ++i) logs += tail(read_text(dir_ / ("slurm_" + std::to_string(i) + ".out")), 600);
  ASSERT_EQ(status, 0) << output << logs;

  std::vector<std::string> merge = {"report", "merge"};
  for (int i = 0; i < 4; ++i) {
    const fs::path shard = dir_ / ("shard_" + std::to_string(i));
    ASSERT_TRUE(fs::exists(shard / "report.json")) << logs;
    const reports::Report r = report(shard);
    EXPECT_EQ(r.info.shard, std::to_string(i) + "/4");
    EXPECT_EQ(r.info.shard_source, "slurm SLURM_ARRAY_TASK_ID=" + std::to_string(i));
    EXPECT_FALSE(r.results.empty());
    merge.push_back((shard / "report.json").string());
  }
  merge.insert(merge.end(), {"--report-dir", (dir_ / "merged").string()});
  ASSERT_EQ(opconform_main(merge), 0);
  const reports::Report whole = report(dir_ / "whole"), merged = report(dir_ / "merged");
  EXPECT_EQ(merged.results.size(), whole.results.size());
  EXPECT_EQ(verdicts(merged), verdicts(whole));
}

}  // namespace
}  // namespace opconform::harness
