// memory_safety on seeded bugs that every element-wise comparison accepts (writes and reads just
// outside a buffer) and on their correct twins. Only the check under test calls the buggy ops: it
// gives them guarded memory, where the stray accesses land in the guards instead of the heap.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

#include "opconform/conformance/check.h"
#include "opconform/conformance/detail/builtin_checks.h"
#include "opconform/core/custom_op.h"
#include "opconform/core/cuda.h"
#include "opconform/core/memory_guard.h"

namespace opconform::conformance {
namespace {

using ::testing::HasSubstr;
using ::opconform::conformance::FindingKind;

Tensor floats(int64_t n) {
  Tensor t = empty({n}, TensorOptions(DType::Float32));
  float* p = t.mutable_data_ptr<float>();
  for (int64_t i = 0; i < n; ++i) p[i] = 0.5f + static_cast<float>(i);
  return t;
}

// Reads one float at p through a volatile, so the compiler keeps a read the result never needs.
float touch(const float* p) { return *static_cast<const volatile float*>(p); }

class MemorySafetyTest : public ::testing::Test {
 protected:
  CustomOpOptions opts() {
    CustomOpOptions o;
    o.registry = &registry;
    return o;
  }
  template <typename F>
  CustomOpDef unary(const std::string& name, F fn) {
    return custom_op(name, std::function<Tensor(const Tensor&)>(fn), opts(), {"x"});
  }
  CheckResult run(const CustomOpDef& op, Stack args) {
    Sample sample(std::move(args));
    return detail::make_memory_safety()->run({op.handle(), sample, tolerance, registry});
  }

  Registry registry;
  ToleranceSpec tolerance;
};

// 2x, into a new tensor; `bug` may write or read around the buffers.
Tensor twice_into(const Tensor& x, const std::function<void(const float* in, float* out, int64_t n)>& bug = {}) {
  Tensor out = empty(x.sizes(), x.options());
  const float* in = x.const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) o[i] = 2 * in[i];
  if (bug) bug(in, o, x.numel());
  return out;
}

TEST_F(MemorySafetyTest, TheCorrectKernelPasses) {
  auto op = unary("t::twice", [](const Tensor& x) { return twice_into(x); });
  for (int64_t n : {1, 5, 16, 1023}) {
    CheckResult r = run(op, {IValue(floats(n))});
    EXPECT_EQ(r.outcome, Outcome::passed) << n << ": " << r.message;
  }
}

TEST_F(MemorySafetyTest, FourBytesWrittenBeforeTheOutputAreNamed) {
  auto op = unary("t::twice_underwrite", [](const Tensor& x) {
    return twice_into(x, [](const float*, float* out, int64_t) { std::memset(reinterpret_cast<char*>(out) - 4, 0, 4); });
  });
  CheckResult r = run(op, {IValue(floats(5))});
  EXPECT_EQ(r.outcome, Outcome::failed);
  EXPECT_THAT(r.message, HasSubstr("wrote before the start of output 0 (4 guard bytes changed, up to 4 bytes before it)"));
  ASSERT_TRUE(r.cause.has_value());
  EXPECT_EQ(r.cause->kind, FindingKind::out_of_bounds);
}

TEST_F(MemorySafetyTest, AnEightByteOverreadOfAnInputIsNamed) {
  // The values are right: the two floats past the end only enter as 0 * v.
  auto op = unary("t::twice_overread", [](const Tensor& x) {
    return twice_into(x, [](const float* in, float* out, int64_t n) { out[0] += 0.0f * (touch(in + n) + touch(in + n + 1)); });
  });
  for (int64_t n : {5, 1024}) {
    CheckResult r = run(op, {IValue(floats(n))});
    EXPECT_EQ(r.outcome, Outcome::failed) << n;
    EXPECT_THAT(r.message, HasSubstr("read past the end of argument 'x' (" + std::to_string(4 * n) +
                                     " bytes; the first fault at byte 1 after its end)"));
  }
}

// Beyond the list in the issue: the class, not the example.
TEST_F(MemorySafetyTest, AnOverflowOfTheKernelsOwnTemporaryIsNamed) {
  auto op = unary("t::twice_scratch", [](const Tensor& x) {
    Tensor scratch = empty({x.numel()}, x.options());
    std::memset(scratch.mutable_data_ptr<float>() + x.numel(), 0, 8);  // two floats past it
    return twice_into(x);
  });
  CheckResult r = run(op, {IValue(floats(6))});
  EXPECT_EQ(r.outcome, Outcome::failed);
  EXPECT_THAT(r.message, HasSubstr("past the end of a 24-byte buffer the kernel allocated and freed"));
}

TEST_F(MemorySafetyTest, AWriteBeyondTheRoundingIsSeenByBothPlacements) {
  // 100 bytes past a 12-byte output: past the 64-byte rounding every allocator would hide it in.
  auto op = unary("t::twice_far", [](const Tensor& x) {
    return twice_into(x, [](const float*, float* out, int64_t n) { out[n + 25] = 1.0f; });
  });
  CheckResult r = run(op, {IValue(floats(3))});
  EXPECT_EQ(r.outcome, Outcome::failed);
  EXPECT_THAT(r.message, HasSubstr("wrote past the end of output 0 (12 bytes; 4 guard bytes changed, up to byte 104 after its end)"));
  EXPECT_THAT(r.message, HasSubstr("wrote past the end of output 0 (12 bytes; the first fault at byte 101 after its end)"));
}

TEST_F(MemorySafetyTest, AnOverreadOfAListElementNamesTheElement) {
  auto op = custom_op(
      "t::sum_first",
      std::function<Tensor(const std::vector<Tensor>&)>([](const std::vector<Tensor>& xs) {
        Tensor out = empty({1}, xs.at(0).options());
        const float* second = xs.at(1).const_data_ptr<float>();
        out.mutable_data_ptr<float>()[0] = xs.at(0).const_data_ptr<float>()[0] + 0.0f * touch(second + xs.at(1).numel());
        return out;
      }),
      opts(), {"xs"});
  CheckResult r = run(op, {IValue(std::vector<Tensor>{floats(3), floats(4)})});
  EXPECT_EQ(r.outcome, Outcome::failed);
  EXPECT_THAT(r.message, HasSubstr("read past the end of argument 'xs'[1]"));
}

TEST_F(MemorySafetyTest, AWriteIntoAWrittenArgumentsNeighbourIsNamed) {
  CustomOpOptions o = opts();
  o.mutates_args = MutatesArgs({"x"});
  auto op = custom_op("t::double_", std::function<void(const Tensor&)>([](const Tensor& x) {
                        float* p = x.mutable_data_ptr<float>();
                        for (int64_t i = 0; i <= x.numel(); ++i) p[i] *= 2;  // one past the end
                      }),
                      o, {"x"});
  CheckResult r = run(op, {IValue(floats(7))});
  EXPECT_EQ(r.outcome, Outcome::failed);
  EXPECT_THAT(r.message, HasSubstr("past the end of argument 'x'"));
}

TEST_F(MemorySafetyTest, ASampleWithoutMemoryIsNotAPass) {
  auto op = unary("t::twice_empty", [](const Tensor& x) { return twice_into(x); });
  CheckResult r = run(op, {IValue(floats(0))});
  EXPECT_EQ(r.outcome, Outcome::skipped);
}

// The guards themselves: a fault outside any guard page is not swallowed (the previous handler
// gets it), and guarded buffers freed after the scope go back to where they came from.
TEST(MemoryGuardTest, BuffersOutliveTheirScopeAndFindingsAreCounted) {
  Tensor kept;
  {
    memory_guard::GuardScope scope(memory_guard::Placement::guard_bytes);
    kept = floats(9);
    EXPECT_EQ(scope.buffers(), 1u);
    EXPECT_TRUE(scope.findings().empty());
    reinterpret_cast<unsigned char*>(kept.mutable_data_ptr<float>())[36 + 2] = 0;  // byte 3 after the end
    auto findings = scope.findings();
    ASSERT_EQ(findings.size(), 1u);
    EXPECT_EQ(findings[0].kind, memory_guard::Finding::Kind::wrote_after);
    EXPECT_EQ(findings[0].reach, 3u);
    EXPECT_EQ(findings[0].bytes_changed, 1u);
  }
  EXPECT_FLOAT_EQ(kept.const_data_ptr<float>()[8], 8.5f);
  EXPECT_THROW(
      {
        memory_guard::GuardScope a(memory_guard::Placement::guard_bytes);
        memory_guard::GuardScope b(memory_guard::Placement::guard_pages);
      },
      Error);
}

// Note [Reused guard mappings]: a freed guard_pages mapping is given to the next buffer of its
// length zeroed, as a fresh one; one whose guard page a fault opened is not given again.
TEST(MemoryGuardTest, AReusedMappingIsZeroedAndKeepsItsGuards) {
  memory_guard::GuardScope scope(memory_guard::Placement::guard_pages);
  const void* first = nullptr;
  {
    Tensor t = floats(9);  // 0.5, 1.5, ...: nonzero bytes
    first = t.const_data_ptr();
  }
  Tensor again = empty({9}, TensorOptions(DType::Float32));
  ASSERT_EQ(again.const_data_ptr(), first) << "a mapping of this length was kept: it is the one given";
  for (int64_t i = 0; i < 9; ++i) EXPECT_EQ(again.const_data_ptr<float>()[i], 0.0f) << i;
  // Its guard pages are closed still: a read past the end is seen.
  touch(again.const_data_ptr<float>() + 9);
  auto findings = scope.findings();
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].kind, memory_guard::Finding::Kind::touched_after);
}

TEST(MemoryGuardTest, AMappingWhoseGuardAFaultOpenedIsNotReused) {
  memory_guard::GuardScope scope(memory_guard::Placement::guard_pages);
  {
    Tensor t = floats(7);
    touch(t.const_data_ptr<float>() + 7);  // opens the page after
  }
  Tensor again = floats(7);  // the kernel may map it at the same address, with closed guards
  touch(again.const_data_ptr<float>() + 7);  // seen again
  EXPECT_EQ(scope.findings().size(), 2u);
}

// CUDA buffers get the guard bytes, written and read back through the device allocator. The
// overrun is made by a device copy one element past the end, as a kernel's store would.
TEST(MemoryGuardCuda, AWritePastADeviceBufferIsSeen) {
  if (!cuda::is_available()) GTEST_SKIP() << cuda::unavailable_reason();
  memory_guard::GuardScope scope(memory_guard::Placement::guard_pages);  // CUDA: guard bytes still
  Tensor t = empty({5}, TensorOptions(DType::Float32, Device::cuda(0)));
  EXPECT_TRUE(scope.findings().empty());
  const float junk = 1.0f;
  allocator_for(DeviceType::CUDA)
      .copy_from_host(static_cast<char*>(t.mutable_data_ptr()) + 20, &junk, sizeof junk, t.device());
  auto findings = scope.findings();
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].kind, memory_guard::Finding::Kind::wrote_after);
  EXPECT_EQ(findings[0].device, t.device());
  EXPECT_LE(findings[0].reach, 4u);
  EXPECT_GE(findings[0].bytes_changed, 1u);
}

TEST(MemoryGuardDeathTest, AFaultOutsideTheGuardsStillCrashes) {
  EXPECT_DEATH(
      {
        memory_guard::GuardScope scope(memory_guard::Placement::guard_pages);
        touch(reinterpret_cast<const float*>(uintptr_t{16}));
      },
      "");
}

}  // namespace
}  // namespace opconform::conformance
