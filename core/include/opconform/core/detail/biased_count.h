#pragma once
// A reference count biased towards the thread that made the object.
//
// Note [Biased reference counts]: a tensor's count changes at every copy of its handle: twice per
// boxed call (the argument pushed on the stack and dropped), and an atomic read-modify-write
// costs ~5 ns on the CI kind of machine, more than the dispatcher's own work (bench/README.md).
// Nearly every copy is made and dropped by the thread that made the tensor, so the count is kept
// in two parts (Choi, Shull, Torrellas, "Biased reference counting", PACT 2018; CPython's
// free-threaded build counts every object so):
//  - `local`: changed only by the owning thread, with plain loads and stores;
//  - `shared`: changed atomically by every other thread; it may go below zero (another thread
//    drops a reference the owner counted). Its two low bits are flags.
// The object lives while local + shared > 0. When the owner's `local` reaches zero it *merges*:
// the object is unowned from then on (owner 0, flag `merged`) and every thread counts on `shared`;
// whoever brings it to zero destroys. A non-owner whose drop would take an unmerged `shared` to
// zero or below cannot know whether `local` is zero too: it leaves its reference to the owner's
// queue instead (flag `queued`, the count unchanged), and the owner merges queued objects at its
// next safe point: when it makes an object (not while a plugin's kernel runs: DeferCountMerges),
// when it calls merge_queued_counts() (a thread pool before each job), when it exits.
// A thread that has exited merges nothing: a drop that would queue to it merges on the spot
// (nothing writes `local` any more). Thread ids are serial numbers, never reused.
#include <atomic>
#include <cstdint>

namespace opconform::detail {

// This thread's id as an owner of objects; 0 until it makes its first one, and again once it is
// exiting. Read on every count change: constinit, so no initialisation check guards it, and
// initial-exec, so code in a shared library (the modules of the sanitizer build) reads it at a
// fixed offset from the thread pointer instead of calling __tls_get_addr (which AddressSanitizer
// intercepts). Eight bytes of the static TLS block, which also a dlopen()ed copy finds room in.
extern constinit thread_local uint64_t this_thread_owner_id __attribute__((tls_model("initial-exec")));

class BiasedCount {
 public:
  // Destroys the object whose count this is (the count is a base of it).
  using Dispose = void (*)(BiasedCount*);

  // A new object with one reference, owned by this thread.
  explicit BiasedCount(Dispose dispose) noexcept;
  BiasedCount(const BiasedCount&) = delete;
  BiasedCount& operator=(const BiasedCount&) = delete;

  void retain() noexcept {
    if (owned_here()) {
      local_.store(local_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    } else {
      shared_.fetch_add(kOne, std::memory_order_relaxed);
    }
  }
  // Drops one reference; destroys the object (dispose) when it was the last.
  void release() noexcept {
    if (owned_here()) {
      const int64_t local = local_.load(std::memory_order_relaxed) - 1;
      local_.store(local, std::memory_order_relaxed);
      if (local == 0) merge_zero_local();
    } else {
      release_shared();
    }
  }
  // The number of references: exact while no other thread copies or drops one and none is queued
  // (a queued drop is counted until its owner merges it).
  int64_t use_count() const noexcept;

 private:
  friend struct CountQueues;
  static constexpr int64_t kMerged = 1, kQueued = 2, kFlags = 3, kOne = 4;

  bool owned_here() const noexcept {
    const uint64_t self = this_thread_owner_id;
    return self != 0 && owner_.load(std::memory_order_relaxed) == self;
  }
  [[gnu::noinline]] void merge_zero_local() noexcept;
  [[gnu::noinline]] void release_shared() noexcept;
  // Folds `local` into `shared` plus `extra`, marks the object merged and returns the count.
  int64_t merge(int64_t extra) noexcept;

  Dispose dispose_;
  std::atomic<uint64_t> owner_;
  std::atomic<int64_t> local_;
  std::atomic<int64_t> shared_;
};

// Merges the objects other threads queued to this one (Note [Biased reference counts]); those
// whose count is then zero are destroyed here. Threads that own objects and wait for long
// stretches (a thread pool's) call it at their own safe points.
void merge_queued_counts() noexcept;

// While one lives, making an object is no safe point on this thread: foreign code runs on it (a
// plugin's kernel, which may hold its own locks while it asks for an output tensor, and whose
// deleter a queued tensor's destruction could call).
class DeferCountMerges {
 public:
  DeferCountMerges() noexcept;
  ~DeferCountMerges();
  DeferCountMerges(const DeferCountMerges&) = delete;
  DeferCountMerges& operator=(const DeferCountMerges&) = delete;
};

}  // namespace opconform::detail
