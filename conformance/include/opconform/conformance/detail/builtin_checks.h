// Factories of the built-in checks, gathered by check_named() (check_registry.cpp). One
// function per check, defined in that check's source file; no static registration objects.
#pragma once

#include <memory>
#include <mutex>

#include "opconform/conformance/check.h"
#include "opconform/core/generator.h"
#include "opconform/core/tag.h"

namespace opconform::conformance::detail {

// opcheck's tests (test_schema.cpp, test_autograd_registration.cpp, test_faketensor.cpp)
std::unique_ptr<Check> make_test_schema();
std::unique_ptr<Check> make_test_autograd_registration();
std::unique_ptr<Check> make_test_faketensor();
// gradients (gradcheck.cpp)
std::unique_ptr<Check> make_gradcheck();
std::unique_ptr<Check> make_gradgradcheck();
// properties that need no reference (properties.cpp)
std::unique_ptr<Check> make_stride_invariance();
std::unique_ptr<Check> make_determinism();
std::unique_ptr<Check> make_dtype_consistency();
std::unique_ptr<Check> make_edge_shapes();
std::unique_ptr<Check> make_vmap_consistency();
std::unique_ptr<Check> make_autocast_consistency();
std::unique_ptr<Check> make_error_inputs();
// A device's kernel against the CPU kernel of the same library (device_consistency.cpp).
std::unique_ptr<Check> make_device_consistency();
// What element-wise comparisons cannot see (memory_safety.cpp, thread_safety.cpp, rounding.cpp).
std::unique_ptr<Check> make_memory_safety();
std::unique_ptr<Check> make_thread_safety();
// Against the reference (CHECKS.md): needs CheckContext::reference.
std::unique_ptr<Check> make_reference_agreement();
// Capture into a graph (compile/): test_aot_dispatch_dynamic.cpp.
std::unique_ptr<Check> make_test_aot_dispatch_dynamic();

// Runs fn from the generator state every seeded call starts from (the fork_rng + manual_seed
// idiom; the caller's state is restored after). One such run at a time, so another thread's draws
// cannot interleave with it. A replay of a random op (a captured graph) run this way draws what
// run_boxed's call drew.
template <typename F>
decltype(auto) from_fixed_generator_state(F&& fn) {
  static std::recursive_mutex one_seeded_call_at_a_time;
  std::lock_guard lock(one_seeded_call_at_a_time);
  GeneratorStateGuard keep_callers_state;
  manual_seed(0x0bc0f0);
  return fn();
}

// How every check calls the operator: a random op (Tag::nondeterministic_seeded) from the fixed
// generator state, so runs a check compares draw the same numbers.
inline void run_boxed(const OperatorHandle& op, Stack& stack) {
  if (!op.has_tag(Tag::nondeterministic_seeded)) return op.call_boxed(stack);
  from_fixed_generator_state([&] { op.call_boxed(stack); });
}

}  // namespace opconform::conformance::detail
