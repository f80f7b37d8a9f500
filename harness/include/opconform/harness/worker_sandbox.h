// The worker sandbox: the layers a worker process enters before it runs the library under test
// (Note [The worker sandbox] in worker_sandbox.cpp; harness/README.md has the threat model).
// Each layer is tried on its own; one the machine refuses is left out and the run says which
// layers were active (RunInfo::sandbox).
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

namespace opconform::harness {

struct SandboxOptions {
  bool enabled = true;  // false (--no-sandbox): a process group only, for debugging and measuring
  std::vector<std::string> pass_env;      // environment variables kept besides the defaults
  std::optional<uint64_t> memory_limit;   // bytes of address space (RLIMIT_AS); nullopt: none
  uint64_t file_size_limit = uint64_t{4} << 30;  // RLIMIT_FSIZE: a kernel cannot fill the disk
  uint64_t process_limit = 16384;                // RLIMIT_NPROC (lowered only): a fork bomb stops there
  // Directories a worker sees read-only (the report folders), where namespaces are allowed.
  std::vector<std::string> read_only;
};

enum SandboxLayer : unsigned {
  kLayerProcessGroup = 1u << 0,
  kLayerNoNewPrivs = 1u << 1,
  kLayerLimits = 1u << 2,       // core dumps off, file size, memory when asked
  kLayerEnvironment = 1u << 3,  // scrubbed, the initial block overwritten
  kLayerSeccomp = 1u << 4,      // no network, no ptrace, no signals to the harness
  kLayerNamespaces = 1u << 5,   // mount and network namespaces: read-only report folders, no network
  kLayerUserNamespace = 1u << 6,  // ... inside a user namespace: no capability over the harness, root or not
  kLayerNoTerminal = 1u << 7,     // no controlling terminal: nothing typed into the user's shell (TIOCSTI)
};

// In the worker, after fork: enters every layer it can; returns those that took effect. Never
// throws (a child of fork). `harness` is the harness's pid (its group id too).
unsigned enter_sandbox(const SandboxOptions& options, pid_t harness);

// Note [A worker holds only its own descriptors]: opconform inherits the file descriptors of
// whatever started it (a shell's redirections, a CI runner's log, a build tool's job-server pipe,
// /usr/bin/time's output file), and so did every process it forks. A process that runs the
// library's code (the probe, the zygote, a worker that loads the library itself) closes all of
// them but stdin, stdout, stderr and `keep` before the library is loaded, with or without the
// sandbox: a kernel that writes to every descriptor (harness/tests/fixtures/
// hostile_channel_plugin.c) wrote its forged frames into the output file of the /usr/bin/time
// that ran the test suite. A worker forked from the zygote keeps what the library opened while
// it loaded (the zygote closed the rest before). `keep`: at most 8. Never throws, allocates
// nothing (a child of fork).
void close_inherited_fds(std::initializer_list<int> keep);

// What the layers are, in words ("process group, no new privileges, ..."), for the report.
std::string describe_layers(unsigned layers, const SandboxOptions& options);

// The layers a worker gets on this machine: a child enters the sandbox and reports back
// (about a millisecond).
unsigned probe_sandbox(const SandboxOptions& options);

// The variables a worker keeps without --pass-env (PATH, HOME, locale, temp, library paths,
// CUDA_*, OPCONFORM_*, sanitizer options).
bool kept_by_default(const std::string& name);

// Note [One OpenMP thread per worker]: a library with a thread pool of its own (ATen's OpenMP
// pool: one thread per core) in each of N workers puts N x cores threads on the cores, and even a
// lone worker loses by its pool: a check's samples are small (at most 16,384 elements, under
// ATen's grain of 32,768 for most kernels) and every parallel region wakes and spins the pool.
// Measured with ATen: on an H200 host's 16 cores (2.11, the a*-c* ops) -j 16 took 8.2 s with the
// pool and 4.5 s with OMP_NUM_THREADS=1, -j 1 49.0 s with 16 threads and 33.2 s with 1; on the
// 2-core CI machine (1.13, every op) -j 1 65.5 s with 2 threads and 51.4 s with 1. So workers get
// OMP_NUM_THREADS=1 unless the user set it (until 2026-12-06 they got cores / jobs, the -j 1 runs
// above). Sets it for the workers a run starts, unless it is set.
void one_openmp_thread_per_worker();

}  // namespace opconform::harness
