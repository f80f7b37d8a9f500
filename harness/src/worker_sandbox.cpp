// Note [The worker sandbox]: what a worker process enters before it runs the library under test.
// Each layer is a well-kept mechanism of the kernel, tried on its own; none is required:
//   - its own process group (the pool kills the group, so what a kernel forks dies with it);
//   - PR_SET_NO_NEW_PRIVS (a setuid program gains nothing; also what seccomp needs);
//   - rlimits: no core dumps, files up to 4 GiB, address space up to --memory-limit;
//   - a scrubbed environment: only kept_by_default() names and --pass-env ones remain, and the
//     process's initial environment block (what /proc/self/environ shows, which a fork keeps)
//     is overwritten, so a kernel cannot read the CI's tokens;
//   - namespaces, as bubblewrap makes them (unshare: a user namespace where allowed, a mount and
//     a network namespace): the report folders are bind-mounted read-only (a kernel cannot
//     write, delete or rename them), and the network namespace has nothing but a loopback
//     device that is down (no network, not even 127.0.0.1);
//   - a seccomp filter (libseccomp): no sockets but AF_UNIX (no network where namespaces are
//     refused), no ptrace or process_vm_readv/writev, no signals to the harness (kill, tgkill,
//     rt_sigqueueinfo, pidfd_open of its pid, its group, or -1).
// The harness itself is made non-dumpable (conformance_run.cpp), so a process of the same user
// cannot read its /proc/<pid>/mem or environ, and it writes the reports relative to directory
// descriptors opened before the run (reports/report_files.h), so a folder swapped for a symlink
// where namespaces are refused redirects nothing. Not covered: what the user running opconform
// may read, a worker may read too (files outside the report folders are not hidden).
#include "opconform/harness/worker_sandbox.h"

#include "opconform/harness/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <span>
#include <sstream>
#include <string>
#include <thread>

#if defined(OPCONFORM_WITH_SECCOMP)
#include <seccomp.h>
#endif

extern char** environ;

namespace opconform::harness {
namespace {

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

bool limits(const SandboxOptions& options) {
  bool ok = true;
  // Processes (threads too) of the user: only ever lowered; root is not held by it.
  rlimit nproc{};
  if (::getrlimit(RLIMIT_NPROC, &nproc) == 0 && nproc.rlim_cur > options.process_limit) {
    nproc.rlim_cur = options.process_limit;
    ok = ::setrlimit(RLIMIT_NPROC, &nproc) == 0 && ok;
  }
  const rlimit no_core{0, 0};
  ok = ::setrlimit(RLIMIT_CORE, &no_core) == 0 && ok;
  const rlimit fsize{options.file_size_limit, options.file_size_limit};
  ok = ::setrlimit(RLIMIT_FSIZE, &fsize) == 0 && ok;
  if (options.memory_limit) {
    const rlimit as{*options.memory_limit, *options.memory_limit};
    ok = ::setrlimit(RLIMIT_AS, &as) == 0 && ok;
  }
  return ok;
}

// The process's initial environment block: fields 50 and 51 of /proc/self/stat (Linux >= 3.5).
bool initial_environment_block(uintptr_t& start, uintptr_t& end) {
  std::ifstream in("/proc/self/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), {});
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return false;
  std::istringstream fields(stat.substr(paren + 2));
  std::string field;
  for (int k = 3; fields >> field; ++k) {
    if (k == 50) start = std::strtoull(field.c_str(), nullptr, 10);
    if (k == 51) {
      end = std::strtoull(field.c_str(), nullptr, 10);
      return start != 0 && end > start;
    }
  }
  return false;
}

bool scrub_environment(const SandboxOptions& options) {
  std::vector<std::pair<std::string, std::string>> kept;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry(*e);
    const size_t eq = entry.find('=');
    if (eq == std::string::npos) continue;
    const std::string name = entry.substr(0, eq);
    bool keep = kept_by_default(name);
    for (const auto& p : options.pass_env) keep = keep || p == name;
    if (keep) kept.emplace_back(name, entry.substr(eq + 1));
  }
  uintptr_t start = 0, end = 0;
  const bool block = initial_environment_block(start, end);
  // Every string environ points to, and the initial block (setenv may have moved strings away
  // from it, leaving the originals there).
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) std::memset(*e, 0, std::strlen(*e));
  if (block) std::memset(reinterpret_cast<void*>(start), 0, end - start);
  if (::clearenv() != 0) return false;
  for (const auto& [name, value] : kept) ::setenv(name.c_str(), value.c_str(), 1);
  return block;
}

bool write_file(const char* path, const std::string& text) {
  const int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return ok;
}

// Bind-mounts `path` onto itself read-only. A remount must keep the flags the mount has (in a
// user namespace the kernel locks nosuid, nodev, noexec and the atime ones), as bubblewrap does.
bool bind_read_only(const std::string& path) {
  if (::mount(path.c_str(), path.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) return false;
  struct statvfs fs {};
  if (::statvfs(path.c_str(), &fs) != 0) return false;
  unsigned long flags = MS_BIND | MS_REMOUNT | MS_RDONLY;
  const std::pair<unsigned long, unsigned long> kept[] = {{ST_NOSUID, MS_NOSUID},       {ST_NODEV, MS_NODEV},
                                                          {ST_NOEXEC, MS_NOEXEC},       {ST_NOATIME, MS_NOATIME},
                                                          {ST_NODIRATIME, MS_NODIRATIME}, {ST_RELATIME, MS_RELATIME}};
  for (auto [has, keep] : kept)
    if ((fs.f_flag & has) != 0) flags |= keep;
  return ::mount(nullptr, path.c_str(), nullptr, flags, nullptr) == 0;
}

// A user namespace where the machine allows one (a root worker then has no capability over the
// harness: it cannot read a non-dumpable process's /proc files), else, as root, none; then mount
// and network namespaces, the report folders read-only in the new mount namespace. Returns the
// layers entered.
unsigned enter_namespaces(const SandboxOptions& options) {
  const uid_t uid = ::getuid();
  const gid_t gid = ::getgid();
  unsigned layers = 0;
  if (::unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET) == 0) {
    // The same ids inside, so files keep their owners; setgroups must be denied first.
    if (!write_file("/proc/self/setgroups", "deny") ||
        !write_file("/proc/self/uid_map", std::to_string(uid) + " " + std::to_string(uid) + " 1") ||
        !write_file("/proc/self/gid_map", std::to_string(gid) + " " + std::to_string(gid) + " 1"))
      return 0;
    layers |= kLayerUserNamespace;
  } else if (::unshare(CLONE_NEWNS | CLONE_NEWNET) != 0) {
    return 0;
  }
  // Nothing of ours propagates back to the harness's mount namespace.
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return 0;
  for (const auto& path : options.read_only)
    if (!bind_read_only(path)) return 0;
  return layers | kLayerNamespaces;
}

bool seccomp_filter(pid_t harness) {
#if defined(OPCONFORM_WITH_SECCOMP)
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (ctx == nullptr) return false;
  bool ok = true;
  auto deny = [&](int syscall, int error, unsigned count, const scmp_arg_cmp* cmp) {
    if (syscall < 0) return;  // not on this architecture
    ok = seccomp_rule_add_array(ctx, SCMP_ACT_ERRNO(error), syscall, count, cmp) == 0 && ok;
  };
  const scmp_arg_cmp not_unix = SCMP_A0(SCMP_CMP_NE, AF_UNIX);
  deny(SCMP_SYS(socket), EACCES, 1, &not_unix);
  // Typing into a terminal's input queue (TIOCSTI), by any descriptor a kernel still finds one on.
  const scmp_arg_cmp is_tiocsti = SCMP_A1(SCMP_CMP_MASKED_EQ, 0xFFFFFFFFu, TIOCSTI);
  deny(SCMP_SYS(ioctl), EPERM, 1, &is_tiocsti);
  for (int sys : {SCMP_SYS(ptrace), SCMP_SYS(process_vm_readv), SCMP_SYS(process_vm_writev)}) deny(sys, EPERM, 0, nullptr);
  // pid arguments are ints: compare the low 32 bits only (the upper half of the register is not
  // defined for an int argument).
  const uint32_t targets[] = {static_cast<uint32_t>(harness), static_cast<uint32_t>(-harness), static_cast<uint32_t>(-1)};
  for (uint32_t target : targets) {
    const scmp_arg_cmp is_target = SCMP_A0(SCMP_CMP_MASKED_EQ, 0xFFFFFFFFu, target);
    for (int sys : {SCMP_SYS(kill), SCMP_SYS(tgkill), SCMP_SYS(rt_sigqueueinfo), SCMP_SYS(rt_tgsigqueueinfo),
                    SCMP_SYS(pidfd_open)})
      deny(sys, EPERM, 1, &is_target);
  }
  ok = ok && seccomp_load(ctx) == 0;
  seccomp_release(ctx);
  return ok;
#else
  (void)harness;
  return false;
#endif
}

}  // namespace

bool kept_by_default(const std::string& name) {
  static const char* const exact[] = {"PATH", "HOME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "LD_LIBRARY_PATH",
                                      "ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS", "OMP_NUM_THREADS", "NO_COLOR"};
  for (const char* e : exact)
    if (name == e) return true;
  return starts_with(name, "LC_") || starts_with(name, "CUDA_") || starts_with(name, "NVIDIA_") ||
         starts_with(name, "OPCONFORM_");
}

void one_openmp_thread_per_worker() { ::setenv("OMP_NUM_THREADS", "1", /*overwrite=*/0); }

namespace {

// Closes [first, last]; without close_range (Linux < 5.9), one by one up to the descriptor limit.
void close_fd_range(unsigned first, unsigned last) {
  if (first > last) return;
  if (::close_range(first, last, 0) == 0) return;
  rlimit limit{};
  const rlim_t most = ::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY ? limit.rlim_cur : 65536;
  for (unsigned fd = first; fd <= last && fd < std::min<rlim_t>(most, 1u << 20); ++fd) ::close(static_cast<int>(fd));
}

}  // namespace

void close_inherited_fds(std::initializer_list<int> keep) {  // Note [A worker holds only its own descriptors]
  int sorted[8];
  const size_t n = std::min(keep.size(), std::size(sorted));
  std::copy_n(keep.begin(), n, sorted);
  std::sort(sorted, sorted + n);
  unsigned first = 3;
  for (int fd : std::span<const int>(sorted, n)) {
    if (fd < static_cast<int>(first)) continue;
    close_fd_range(first, static_cast<unsigned>(fd) - 1);
    first = static_cast<unsigned>(fd) + 1;
  }
  close_fd_range(first, ~0u);
}

// Gives up the controlling terminal (TIOCNOTTY detaches a process that is not a session leader
// too); true when no terminal can be opened as /dev/tty afterwards. The worker's stdin is /dev/null
// and its stdout/stderr are pipes, so with this it holds no terminal at all: a kernel can neither
// type into the user's shell (TIOCSTI, also refused by seccomp) nor write escapes to it.
bool give_up_terminal() {
  if (const int tty = ::open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC); tty >= 0) {
    (void)::ioctl(tty, TIOCNOTTY);
    ::close(tty);
  }
  const int again = ::open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (again < 0) return true;
  ::close(again);
  return false;
}

unsigned enter_sandbox(const SandboxOptions& options, pid_t harness) {
  unsigned layers = 0;
  if (::setpgid(0, 0) == 0 || ::getpgrp() == ::getpid()) layers |= kLayerProcessGroup;
  if (!options.enabled) return layers;
  if (give_up_terminal()) layers |= kLayerNoTerminal;
  layers |= enter_namespaces(options);
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0) layers |= kLayerNoNewPrivs;
  if (limits(options)) layers |= kLayerLimits;
  try {
    if (scrub_environment(options)) layers |= kLayerEnvironment;
  } catch (...) {  // out of memory copying the kept variables: that layer is off
  }
  if ((layers & kLayerNoNewPrivs) != 0 && seccomp_filter(harness)) layers |= kLayerSeccomp;
  return layers;
}

std::string describe_layers(unsigned layers, const SandboxOptions& options) {
  if (!options.enabled)
    return std::string((layers & kLayerProcessGroup) != 0 ? "process group" : "NO process group") +
           ", NO sandbox (--no-sandbox)";
  std::string out;
  auto add = [&](unsigned layer, const std::string& on, const std::string& off) {
    out += (out.empty() ? "" : ", ") + ((layers & layer) != 0 ? on : off);
  };
  add(kLayerProcessGroup, "process group", "NO process group");
  add(kLayerNoNewPrivs, "no new privileges", "new privileges POSSIBLE");
  add(kLayerNoTerminal, "no terminal", "controlling terminal KEPT");
  add(kLayerLimits,
      "limits (no core, files <= " + std::to_string(options.file_size_limit >> 20) + " MiB, processes <= " +
          std::to_string(options.process_limit) +
          (options.memory_limit ? ", memory <= " + std::to_string(*options.memory_limit >> 20) + " MiB" : "") + ")",
      "NO limits");
  add(kLayerEnvironment, "scrubbed environment", "environment NOT scrubbed");
  add(kLayerNamespaces,
      std::string("namespaces (") + ((layers & kLayerUserNamespace) != 0 ? "user, " : "") +
          "mount, network: no network, report folders read-only)",
      "NO namespaces (unshare refused: report folders writable, protected by descriptors only)");
  add(kLayerSeccomp, "seccomp (no network, no ptrace, no signals to the harness, no TIOCSTI)", "NO seccomp filter");
  return out;
}

unsigned probe_sandbox(const SandboxOptions& options) {
  const pid_t harness = ::getpid();
  ChildProcess child = ChildProcess::start(
      {ChildChannels::from_child},
      [&](std::span<const int> ends) {
        const unsigned layers = enter_sandbox(options, harness);
        (void)!::write(ends[0], &layers, sizeof layers);
        return 0;
      },
      {.die_with_parent = false, .own_group = false});
  if (!child) return 0;
  unsigned layers = 0;
  if (child.read(0, reinterpret_cast<char*>(&layers), sizeof layers) != static_cast<ssize_t>(sizeof layers)) layers = 0;
  child.wait();
  return layers;
}

}  // namespace opconform::harness
