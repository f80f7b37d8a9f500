// Factories of the built-in checks, gathered by check_named() (check_registry.cpp). One
// function per check, defined in that check's source file; no static registration objects.
#pragma once

#include <memory>

#include "opconform/conformance/check.h"

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

}  // namespace opconform::conformance::detail
