// thread_safety: the op called from several threads at once gives what sequential calls give
// (bitwise; within tolerance for ops tagged nondeterministic_bitwise), and each thread gets the
// error a sequential call gets. Every thread has its own input: the sample, or the sample with
// each tensor's elements rotated by the thread's number, so that a kernel sharing a scratch
// buffer between calls mixes different values instead of writing the same ones twice. An op that
// builds its own samples (a sample builder: its inputs have structure, such as boxes with
// x1 < x2 or a column of batch indices) gets copies of the sample itself in every thread, since a
// rotation would hand it inputs its builder never makes. The concurrent calls start together (a
// latch), before the sequential ones.
//
// Note [Concurrent first calls]: a kernel that initialises state lazily (a lookup table, a
// cache, a plan) without synchronisation races only on its first use, so the concurrent calls
// must be the op's first calls: every list of checks runs in in_run_order() (thread_safety
// first, wherever it was named: opcheck, the harness's plan, the GoogleTest suite's
// check_names()), and opcheck runs each check over all samples before the next, so the first
// sample's concurrent calls are the first calls of the op in a case.
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <latch>
#include <memory>
#include <mutex>
#include <thread>

#include "opconform/conformance/detail/builtin_checks.h"
#include "opconform/conformance/detail/check_kit.h"
#include "opconform/core/detail/biased_count.h"

namespace opconform::conformance::detail {
namespace {

using opconform::detail::concat;

// Note [As many threads as can run at once]: the op is called from min(4, the CPUs this process
// may run on) threads at once, and never fewer than 2. A thread beyond the CPUs cannot run at the
// same time as the others: it starts when one of them ends or blocks, so its call (microseconds
// long) overlaps none and is a sequential call with a wake-up added. Measured on the 2-CPU CI
// machine (the ATen 1.13 check, -j 2, thread_safety only): 4 threads 8.6 s, 2 threads 5.1 s,
// the same outcomes result by result; with 4, 17.6% of that run's CPU time was idle (threads
// waiting to be woken; 5.0% in a run of every other check). A race a kernel opens by blocking (a slow first initialisation, a sleep) is
// still met by the second thread. OPCONFORM_THREAD_SAFETY_THREADS (2 to 64) sets the number.
constexpr int kMaxThreads = 4;

// How many threads, and why that many (said in every pass). Read by each process's pool when it
// is made (a forked worker makes its own).
struct ThreadCount {
  int n;
  const char* why;
};

ThreadCount concurrent_threads() {
  if (const char* env = std::getenv("OPCONFORM_THREAD_SAFETY_THREADS"); env && *env) {
    char* end = nullptr;
    const long v = std::strtol(env, &end, 10);
    OPCONFORM_CHECK(end && *end == '\0' && v >= 2 && v <= 64, ErrorCode::kInvalidArgument,
                    "OPCONFORM_THREAD_SAFETY_THREADS='", env, "' is not a number of threads from 2 to 64");
    return {static_cast<int>(v), "set by OPCONFORM_THREAD_SAFETY_THREADS"};
  }
  cpu_set_t cpus;
  const int available = ::sched_getaffinity(0, sizeof cpus, &cpus) == 0
                            ? CPU_COUNT(&cpus)
                            : static_cast<int>(std::thread::hardware_concurrency());
  static_assert(kMaxThreads == 4, "the words below name the bound");
  return {std::clamp(available, 2, kMaxThreads),
          "as many as this process has CPUs, 2 to 4; OPCONFORM_THREAD_SAFETY_THREADS sets it"};
}

// t's elements, in logical order, moved `k` places along the flattened tensor (a new
// contiguous tensor on t's device).
Tensor rotated(const Tensor& t, int64_t k) {
  if (!t.defined() || t.numel() < 2 || !t.storage() || !t.storage()->has_data()) return t;
  Tensor host = t.detach().to(t.dtype(), Device::cpu()).contiguous();
  Tensor out = empty(t.sizes(), TensorOptions(t.dtype()));
  const size_t item = itemsize(t.dtype());
  const size_t n = static_cast<size_t>(t.numel()), shift = static_cast<size_t>(k) % n;
  const auto* src = static_cast<const unsigned char*>(host.const_data_ptr());
  auto* dst = static_cast<unsigned char*>(out.mutable_data_ptr());
  std::memcpy(dst + shift * item, src, (n - shift) * item);
  std::memcpy(dst, src + (n - shift) * item, shift * item);
  return out.to(t.dtype(), t.device());
}

Stack variant(const Stack& sample, int thread, bool rotate) {
  Stack args = clone_args(sample);
  if (thread == 0 || !rotate) return args;
  for (IValue& v : args) {
    if (v.is_tensor()) {
      v = IValue(rotated(v.to_tensor(), thread));
    } else if (v.is_tensor_list()) {
      std::vector<Tensor> list = v.to_tensor_list();
      for (Tensor& t : list) t = rotated(t, thread);
      v = IValue(std::move(list));
    }
  }
  return args;
}

// concurrent_threads() threads that run one job at a time, each thread its share, all released at
// once: the caller runs share 0 itself and the pool threads the rest. Kept for the process:
// starting threads for every sample cost more than the calls (measured on the reference run's
// 1,624 cases: 16.2 s with threads started per sample, 5.8 s with the pool). A forked child (a
// harness worker) has none of its parent's threads, so a pool belongs to the process that made it.
//
// Note [Waking the pool costs more than the calls]: on the ATen check (2 cores, -j 2) a third of
// thread_safety's CPU was waking and waiting (futex, sched_yield, the condition variable's mutex
// taken by four woken threads in turn), more than its eight calls of the op per sample. So the
// caller is one of the threads (one thread fewer to wake and to wait for), and the pool threads
// wait on the job counter itself (std::atomic::wait, a futex on it), taking no lock: the job is
// published before the counter moves, and not replaced until every thread has passed the start
// latch, by which time each has its copy.
class Pool {
 public:
  static Pool& of_this_process() {
    static std::mutex m;
    static Pool* pool = nullptr;
    std::lock_guard lock(m);
    if (pool == nullptr || pool->pid_ != ::getpid()) pool = new Pool();  // a parent's pool is not ours: left alone
    return *pool;
  }

  // Runs job(i) for i in [0, threads()) at once, job(0) on this thread; returns when all are done.
  void run(const std::function<void(int)>& job) {
    std::lock_guard one_job(busy_);
    // Shared, not on this stack: a thread may still be inside count_down() when wait() returns.
    struct Latches {
      explicit Latches(int n) : start(n), done(n - 1) {}
      std::latch start, done;
    };
    auto latches = std::make_shared<Latches>(count_.n);
    job_ = [latches, &job](int i) {
      latches->start.arrive_and_wait();
      job(i);
      latches->done.count_down();
    };
    generation_.fetch_add(1, std::memory_order_release);
    generation_.notify_all();
    latches->start.arrive_and_wait();
    job(0);
    latches->done.wait();
  }

  int threads() const { return count_.n; }
  const char* why_this_many() const { return count_.why; }

 private:
  Pool() : pid_(::getpid()), count_(concurrent_threads()) {
    for (int i = 1; i < count_.n; ++i) std::thread([this, i] { serve(i); }).detach();
  }
  void serve(int i) {
    // "opc-" threads are opconform's own: a harness worker does not wait for them to end
    // (Note [Threads a kernel leaves running] in harness/src/worker_pool.cpp).
    ::pthread_setname_np(::pthread_self(), "opc-pool");
    uint32_t seen = 0;
    for (;;) {
      generation_.wait(seen, std::memory_order_acquire);
      seen = generation_.load(std::memory_order_acquire);
      const std::function<void(int)> job = job_;  // Note [Waking the pool costs more than the calls]
      // The outputs of this thread's last job were dropped by the caller's thread and queued to
      // this one, their memory held until it merges them: here, before the next job, the thread's
      // safe point (Note [Biased reference counts], core/detail/biased_count.h).
      opconform::detail::merge_queued_counts();
      job(i);
    }
  }

  pid_t pid_;
  ThreadCount count_;
  std::mutex busy_;
  std::atomic<uint32_t> generation_{0};  // a 32-bit counter: std::atomic::wait is a futex on it
  std::function<void(int)> job_;
};

// run_op, with every exception caught: one escaping a thread would end the process.
Run run_anything(const OperatorHandle& op, const Stack& args) {
  try {
    return run_op(op, args);
  } catch (const std::exception& e) {
    Run r;
    r.error = Error(ErrorCode::kInternal, concat("threw a non-opconform exception: ", e.what()));
    return r;
  }
}

class ThreadSafety final : public Check {
 public:
  std::string_view name() const override { return "thread_safety"; }

  CheckResult run(const CheckContext& ctx) const override {
    const CheckRun k(name(), ctx);
    const std::string& op = ctx.op.name();
    if (ctx.op.has_tag(Tag::not_thread_safe)) {
      return k.skipped(concat("'", op, "' is tagged not_thread_safe: it is not called from several threads at once"),
                       "not_thread_safe", "the op is tagged not_thread_safe");
    }
    if (ctx.op.has_tag(Tag::nondeterministic_seeded)) {
      return k.skipped(concat("'", op, "' draws random numbers (nondeterministic_seeded): concurrent calls share the "
                              "process's generator, so their results cannot be compared with sequential ones"),
                       "nondeterministic_seeded", "the op draws random numbers");
    }
    const Exactness exactness = ctx.op.has_tag(Tag::nondeterministic_bitwise) ? Exactness::tolerance : Exactness::bitwise;

    Pool& pool = Pool::of_this_process();
    const int threads = pool.threads();  // Note [As many threads as can run at once]
    std::vector<Stack> inputs;
    const bool rotate = !ctx.op.data()->sample_builder;
    for (int i = 0; i < threads; ++i) inputs.push_back(variant(ctx.sample.args, i, rotate));
    std::vector<Stack> sequential_inputs;
    for (const Stack& in : inputs) sequential_inputs.push_back(clone_args(in));

    std::vector<Run> concurrent(threads);
    pool.run([&](int i) { concurrent[i] = run_anything(ctx.op, inputs[i]); });
    for (int i = 0; i < threads; ++i) {
      Run alone = run_anything(ctx.op, sequential_inputs[i]);
      const Run& together = concurrent[i];
      if (alone.error && together.error) {
        if (i == 0) return k.threw(*alone.error, "a sequential call");
        continue;  // a rotated input the op rejects, both ways alike
      }
      std::string differs;
      std::optional<Cause> cause;
      if (alone.error || together.error) {
        differs = together.error ? concat("threw (", together.error->what(), ") where a sequential call did not")
                                 : concat("did not throw where a sequential call did (", alone.error->what(), ")");
        cause = Cause{FindingKind::race, "", "a concurrent call and a sequential one disagree on throwing"};
      } else if (Verdict v = compare_observables(ctx.op, together.seen, alone.seen, ctx.tolerance, exactness); !v.equal) {
        differs = concat("differs from a sequential call's (", exactness == Exactness::bitwise ? "bitwise" : "beyond tolerance",
                         "): ", v.what);
        cause = mismatch_cause(v, "concurrent calls differ from sequential ones", FindingKind::race);
      }
      if (cause) {
        return k.failed(*cause, concat("thread_safety of '", op, "': in ", threads, " concurrent calls, thread ", i,
                                       (i == 0 || !rotate ? " (the sample itself)" : concat(" (the sample rotated by ", i, ")")),
                                       " ", differs, ". A kernel must not share unsynchronised state between calls (a lazily "
                                       "filled table, a static buffer); tag the op not_thread_safe if it must be called from "
                                       "one thread at a time. Sample: ", k.sample(), "."));
      }
    }
    // Said in every pass: the number depends on the machine (Note [As many threads as can run at once]).
    return k.passed(concat(threads, " concurrent calls per sample (", pool.why_this_many(), ")"));
  }
};

}  // namespace

std::unique_ptr<Check> make_thread_safety() { return std::make_unique<ThreadSafety>(); }

}  // namespace opconform::conformance::detail
