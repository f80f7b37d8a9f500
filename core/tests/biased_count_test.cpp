// Note [Biased reference counts] (core/detail/biased_count.h): an object is destroyed exactly
// once, and only after its last reference is dropped, whichever threads copy, hand over and drop
// its references, and whichever thread made it.
#include "opconform/core/detail/biased_count.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <atomic>
#include <barrier>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "opconform/core/tensor.h"

namespace opconform {
namespace {

using detail::BiasedCount;

// What the test knows of one object, kept after the object is freed.
struct Record {
  std::atomic<int> handles{1};  // handles the test holds; decremented before each release
  std::atomic<int> disposals{0};
  std::atomic<bool> early{false};
};

struct Counted;
void drop(Counted* object);

// Freed when its count says so (AddressSanitizer sees any touch after that), its record kept
// apart. It may hold a handle to another object, dropped as it goes: a dispose that drops objects
// other threads own, as a tensor's does (its autograd history, a view's base).
struct Counted : BiasedCount {
  Counted(Record& r, Counted* c) : BiasedCount(&on_dispose), record(r), child(c) {}
  Record& record;
  Counted* child;
  static void on_dispose(BiasedCount* count) {
    auto* self = static_cast<Counted*>(count);
    if (self->record.handles.load() != 0) self->record.early = true;
    ++self->record.disposals;
    Counted* child = self->child;
    delete self;
    if (child != nullptr) drop(child);
  }
};

Counted* copy_of(Counted* object) {
  ++object->record.handles;
  object->retain();
  return object;
}
void drop(Counted* object) {
  --object->record.handles;
  object->release();
}

// The records of every object made in a run, by any thread.
struct Objects {
  std::mutex m;
  std::deque<Record> records;  // a deque: records stay where they are
  Counted* make(Counted* holding = nullptr) {
    Record* record;
    {
      std::lock_guard lock(m);
      record = &records.emplace_back();
    }
    return new Counted(*record, holding != nullptr ? copy_of(holding) : nullptr);
  }
};

// One step of one thread. Indices are taken modulo what the thread holds when it runs.
struct Step {
  enum Kind { make, make_holding, copy, drop, give, take };
  Step(Kind k, int i, int t) : kind(k), index(i), to(t) {}
  Kind kind;
  int index, to;
};

// Threads each follow their own steps, all released together; handles given to another thread
// go to its inbox. Every thread drops what it holds at the end, and exits.
struct Run {
  explicit Run(int threads) : inbox(threads), inbox_m(threads) {}
  Objects objects;
  std::vector<std::vector<Counted*>> inbox;
  std::vector<std::mutex> inbox_m;

  void follow(int self, const std::vector<Step>& steps, std::vector<Counted*> held) {
    auto take_inbox = [&] {
      std::lock_guard lock(inbox_m[self]);
      held.insert(held.end(), inbox[self].begin(), inbox[self].end());
      inbox[self].clear();
    };
    for (const Step& s : steps) {
      if (s.kind == Step::make) {
        held.push_back(objects.make());
        continue;
      }
      if (s.kind == Step::take) {
        take_inbox();
        continue;
      }
      if (held.empty()) continue;
      const size_t i = static_cast<size_t>(s.index) % held.size();
      if (s.kind == Step::make_holding) {
        held.push_back(objects.make(held[i]));
      } else if (s.kind == Step::copy) {
        held.push_back(copy_of(held[i]));
      } else if (s.kind == Step::drop) {
        drop(held[i]);
        held.erase(held.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        const size_t to = static_cast<size_t>(s.to) % inbox.size();
        std::lock_guard lock(inbox_m[to]);
        inbox[to].push_back(held[i]);
        held.erase(held.begin() + static_cast<std::ptrdiff_t>(i));
      }
    }
    for (Counted* object : held) drop(object);
  }
};

rc::Gen<Step> steps_gen() {
  return rc::gen::construct<Step>(rc::gen::weightedElement<Step::Kind>(
                                      {{1, Step::make}, {1, Step::make_holding}, {4, Step::copy}, {4, Step::drop}, {3, Step::give}, {2, Step::take}}),
                                  rc::gen::inRange(0, 8), rc::gen::inRange(0, 4));
}

RC_GTEST_PROP(BiasedCount, EveryObjectIsDisposedOnceAfterItsLastDrop, ()) {
  const int threads = *rc::gen::inRange(2, 5);
  Run run(threads);
  // Objects this (main) thread makes and hands out: the others' drops of them are queued here.
  const int made_here = *rc::gen::inRange(1, 4);
  std::vector<std::vector<Counted*>> start(threads);
  for (int k = 0; k < made_here; ++k) {
    Counted* object = run.objects.make();
    for (int t = 1; t < threads; ++t) start[t].push_back(copy_of(object));
    start[0].push_back(object);
  }
  std::vector<std::vector<Step>> plans;
  for (int t = 0; t < threads; ++t) plans.push_back(*rc::gen::container<std::vector<Step>>(steps_gen()));

  std::barrier together(threads);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      together.arrive_and_wait();
      run.follow(t, plans[t], start[t]);
    });
  }
  for (std::thread& w : workers) w.join();
  // What was given to a thread after it had ended is dropped here, by a thread that owns none of it.
  for (auto& left : run.inbox) {
    for (Counted* object : left) drop(object);
    left.clear();
  }
  detail::merge_queued_counts();  // the drops of this thread's objects that were queued to it

  for (const Record& record : run.objects.records) {
    RC_ASSERT(record.handles.load() == 0);
    RC_ASSERT(record.disposals.load() == 1);
    RC_ASSERT(!record.early.load());
  }
}

// The owner's own copies and drops are counted without atomics, other threads' with; the count is
// right after both, and the tensor goes when the last one goes.
TEST(BiasedCount, TensorCountsStayRightWhenOtherThreadsCopyAndDrop) {
  Tensor t = ones({3});
  std::vector<Tensor> copies(5, t);
  EXPECT_EQ(t.unsafe_impl()->use_count(), 6);
  copies.pop_back();
  EXPECT_EQ(t.unsafe_impl()->use_count(), 5);
  auto churn = [&] {
    for (int i = 0; i < 100000; ++i) {
      Tensor a = t;
      Tensor b = a;
    }
  };
  std::thread other(churn);
  churn();
  other.join();
  EXPECT_EQ(t.unsafe_impl()->use_count(), 5);
  copies.clear();
  EXPECT_EQ(t.unsafe_impl()->use_count(), 1);
}

// A tensor made by a thread that has exited is freed by whichever thread drops it last (ASan
// reports a leak or a double free otherwise).
TEST(BiasedCount, TensorsOutliveTheThreadThatMadeThem) {
  std::vector<Tensor> made;
  std::thread maker([&] {
    for (int i = 0; i < 3; ++i) made.push_back(ones({2}));
    made.push_back(made.front());  // a copy the maker counted
  });
  maker.join();
  std::vector<Tensor> copies = made;
  EXPECT_EQ(made.front().unsafe_impl()->use_count(), 4);  // two counted by the maker, two here
  made.clear();
  EXPECT_EQ(copies.front().unsafe_impl()->use_count(), 2);
  copies.clear();
}

// Tensors made on one thread and dropped on another are queued to their maker, which frees them
// at its next safe point: here, making a tensor, but not while a plugin's kernel runs.
TEST(BiasedCount, ADropQueuedToALiveOwnerIsMergedAtItsNextObject) {
  Tensor t = ones({2});
  std::weak_ptr<Storage> storage = t.storage();
  std::thread dropper([moved = std::move(t)]() mutable { moved = Tensor(); });
  dropper.join();
  EXPECT_FALSE(storage.expired()) << "the owner's count holds it until the owner merges";
  {
    const detail::DeferCountMerges plugin_kernel_runs;
    Tensor inside = ones({1});
    EXPECT_FALSE(storage.expired()) << "no merge while foreign code runs on this thread";
  }
  Tensor next = ones({1});
  EXPECT_TRUE(storage.expired()) << "making a tensor is the owner's safe point";
}

}  // namespace
}  // namespace opconform
