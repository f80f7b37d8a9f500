// The built-in checks: the one list of them (README.md, "Adding a check"). Each name `n` here has
// a factory make_<n>() defined in its own file, src/checks/<n>.cpp; check_named() builds its table
// from this list (check_registry.cpp), so a new check is one line here. No static registration
// objects.
#pragma once

#include <memory>

#include "opconform/conformance/check.h"

// X(name) for every built-in check. Order does not matter: check_names() sorts them
// (in_run_order), and each check's name() is its key.
#define OPCONFORM_BUILTIN_CHECKS(X)                                                                  \
  /* opcheck's tests */                                                                              \
  X(test_schema) X(test_autograd_registration) X(test_faketensor) X(test_aot_dispatch_dynamic)      \
  /* gradients (gradcheck.cpp holds both: they share the Jacobian checker) */                        \
  X(gradcheck) X(gradgradcheck)                                                                      \
  /* properties that need no reference */                                                            \
  X(stride_invariance) X(determinism) X(dtype_consistency) X(edge_shapes) X(vmap_consistency)        \
  X(autocast_consistency) X(error_inputs)                                                            \
  /* what element-wise comparisons cannot see */                                                     \
  X(memory_safety) X(thread_safety)                                                                  \
  /* against another kernel: the reference (needs CheckContext::reference), the CPU kernel */        \
  X(reference_agreement) X(device_consistency)

namespace opconform::conformance::detail {

#define OPCONFORM_DECLARE_CHECK_FACTORY(name) std::unique_ptr<Check> make_##name();
OPCONFORM_BUILTIN_CHECKS(OPCONFORM_DECLARE_CHECK_FACTORY)
#undef OPCONFORM_DECLARE_CHECK_FACTORY

}  // namespace opconform::conformance::detail
