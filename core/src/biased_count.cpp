// Note [Biased reference counts] (detail/biased_count.h): the slow paths, the threads' queues.
#include "opconform/core/detail/biased_count.h"

#include <pthread.h>

#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

namespace opconform::detail {

constinit thread_local uint64_t this_thread_owner_id __attribute__((tls_model("initial-exec"))) = 0;

namespace {

// What other threads left to one owner: references to merge (each one the queue holds).
struct ThreadQueue {
  uint64_t id = 0;
  std::vector<BiasedCount*> queued;  // guarded by CountQueues::mutex
  std::atomic<bool> pending{false};  // queued is not empty; read without the lock
};

// Not initial-exec as this_thread_owner_id is: with that model for these internal-linkage
// variables, the sanitizer build's shared core lost queued objects (core_biased_count_test
// failed under ASan; not yet understood). They are read only when a tensor is made.
constinit thread_local ThreadQueue* this_thread_queue = nullptr;
constinit thread_local bool this_thread_exited = false;

}  // namespace

// The live owners and their queues. Leaked: threads exit (and queue) during static destruction.
struct CountQueues {
  static CountQueues& get() {
    static CountQueues* queues = [] {
      auto* q = new CountQueues();
      ::pthread_atfork([] { get().mutex.lock(); }, [] { get().mutex.unlock(); }, [] { get().after_fork_in_child(); });
      return q;
    }();
    return *queues;
  }

  uint64_t add(ThreadQueue& queue) {
    std::lock_guard lock(mutex);
    queue.id = next_id++;
    live.emplace(queue.id, &queue);
    return queue.id;
  }

  // The thread of `queue` is exiting: nothing is queued to it from now on; what was, is merged.
  void remove(ThreadQueue& queue) {
    std::vector<BiasedCount*> left;
    {
      std::lock_guard lock(mutex);
      live.erase(queue.id);
      left.swap(queue.queued);
    }
    merge_all(left);
  }

  // A non-owner's drop that would take an unmerged count to zero: the reference goes to the owner.
  void enqueue(BiasedCount* object) {
    const uint64_t owner = object->owner_.load(std::memory_order_acquire);
    if (owner == 0) {
      // The owner merged after this drop marked the object queued: it is an ordinary drop now
      // (`shared` has a flag set, so it cannot be queued twice).
      object->release_shared();
      return;
    }
    {
      std::lock_guard lock(mutex);
      if (auto it = live.find(owner); it != live.end()) {
        it->second->queued.push_back(object);
        it->second->pending.store(true, std::memory_order_release);
        return;
      }
    }
    // The owner has exited (its last write to `local` happened before it left `live`, under the
    // mutex): merge here, less the reference this drop gives up.
    if (object->merge(-1) == 0) object->dispose_(object);
  }

  static void merge_all(std::vector<BiasedCount*>& objects) {
    for (BiasedCount* object : objects) {
      if (object->merge(-1) == 0) object->dispose_(object);
    }
    objects.clear();
  }

  // A forked child has one thread, the one that forked: the others are gone, as if they had
  // exited (their `local` counts are final), so what was queued to them is merged here, after the
  // lock is released (a dispose may queue). A reference a vanished thread held, or was handing
  // over, is lost with it, as any memory it owned.
  void after_fork_in_child() {
    std::vector<BiasedCount*> orphans;
    for (auto it = live.begin(); it != live.end();) {
      if (it->first == this_thread_owner_id) {
        ++it;
        continue;
      }
      for (BiasedCount* object : it->second->queued) orphans.push_back(object);
      it = live.erase(it);
    }
    mutex.unlock();
    merge_all(orphans);
  }

  std::mutex mutex;
  std::unordered_map<uint64_t, ThreadQueue*> live;
  uint64_t next_id = 1;  // guarded by mutex
};

namespace {

// Lives as long as its thread: registered on the thread's first object, merged on its exit.
struct ThreadRegistration {
  ThreadQueue queue;
  ThreadRegistration() {
    this_thread_owner_id = CountQueues::get().add(queue);
    this_thread_queue = &queue;
  }
  ~ThreadRegistration() {
    // From here on this thread counts on `shared` like any other: its objects may be merged by
    // whoever drops them (they find the owner gone).
    this_thread_owner_id = 0;
    this_thread_queue = nullptr;
    this_thread_exited = true;
    CountQueues::get().remove(queue);
  }
};

// Made at load time: a fork while another thread was inside get()'s first call would leave the
// child waiting on its initialisation for ever.
[[maybe_unused]] CountQueues& queues_at_load = CountQueues::get();

constinit thread_local int this_thread_merges_deferred = 0;

// This thread's owner id, registering it on first use; 0 (objects made unowned) when it is
// exiting or cannot be registered.
uint64_t owner_id_for_new_object() noexcept {
  if (this_thread_owner_id != 0) {
    // A safe point, as a garbage collector's allocation is one: a thread that makes tensors keeps
    // its queue short (a producer whose tensors a consumer thread drops), unless foreign code is
    // running on it (DeferCountMerges).
    if (this_thread_merges_deferred == 0) merge_queued_counts();
    return this_thread_owner_id;
  }
  if (this_thread_exited) return 0;
  try {
    thread_local ThreadRegistration registration;
    return this_thread_owner_id;
  } catch (...) {
    return 0;
  }
}

}  // namespace

BiasedCount::BiasedCount(Dispose dispose) noexcept : dispose_(dispose) {
  const uint64_t owner = owner_id_for_new_object();
  owner_.store(owner, std::memory_order_relaxed);
  local_.store(owner != 0 ? 1 : 0, std::memory_order_relaxed);
  shared_.store(owner != 0 ? 0 : kOne | kMerged, std::memory_order_relaxed);
}

int64_t BiasedCount::use_count() const noexcept {
  return local_.load(std::memory_order_relaxed) + (shared_.load(std::memory_order_acquire) >> 2);
}

void BiasedCount::merge_zero_local() noexcept {
  int64_t shared = shared_.load(std::memory_order_acquire);
  if (shared == 0) return dispose_(this);  // no other thread counted a reference
  owner_.store(0, std::memory_order_relaxed);
  int64_t merged = 0;
  do {
    merged = (shared & ~kFlags) | kMerged;
  } while (!shared_.compare_exchange_weak(shared, merged, std::memory_order_acq_rel, std::memory_order_acquire));
  if (merged == kMerged) dispose_(this);
}

void BiasedCount::release_shared() noexcept {
  int64_t shared = shared_.load(std::memory_order_relaxed);
  int64_t next = 0;
  bool queue = false;
  do {
    // Unmerged, not queued, nothing counted here: the reference dropped is one the owner counted.
    queue = shared == 0;
    next = queue ? kQueued : shared - kOne;
  } while (!shared_.compare_exchange_weak(shared, next, std::memory_order_acq_rel, std::memory_order_relaxed));
  if (queue) {
    CountQueues::get().enqueue(this);
  } else if (next == kMerged) {
    dispose_(this);
  }
}

int64_t BiasedCount::merge(int64_t extra) noexcept {
  // Who reads `shared` as merged must see `local` and `owner` cleared: written before the CAS.
  const int64_t local = local_.load(std::memory_order_relaxed);
  local_.store(0, std::memory_order_relaxed);
  owner_.store(0, std::memory_order_relaxed);
  int64_t shared = shared_.load(std::memory_order_relaxed);
  int64_t count = 0;
  do {
    count = (shared >> 2) + local + extra;  // >> rounds down: the flags drop out
  } while (!shared_.compare_exchange_weak(shared, count * kOne | kMerged, std::memory_order_acq_rel,
                                          std::memory_order_relaxed));
  return count;
}

DeferCountMerges::DeferCountMerges() noexcept { ++this_thread_merges_deferred; }
DeferCountMerges::~DeferCountMerges() { --this_thread_merges_deferred; }

void merge_queued_counts() noexcept {
  ThreadQueue* queue = this_thread_queue;
  if (queue == nullptr || !queue->pending.load(std::memory_order_acquire)) return;
  for (;;) {
    std::vector<BiasedCount*> batch;
    {
      std::lock_guard lock(CountQueues::get().mutex);
      batch.swap(queue->queued);
      queue->pending.store(false, std::memory_order_relaxed);
    }
    if (batch.empty()) return;
    CountQueues::merge_all(batch);  // a dispose may queue more to this thread
  }
}

}  // namespace opconform::detail
