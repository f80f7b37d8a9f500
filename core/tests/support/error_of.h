// The opconform::Error a callable throws, for tests of error paths. A callable that throws
// nothing, or something else, is a failed expectation (and a placeholder Error is returned).
#pragma once

#include <gtest/gtest.h>

#include <exception>
#include <string>

#include "opconform/core/error.h"

namespace opconform::testing {

template <typename F>
Error error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw a non-opconform exception: " << e.what();
    return Error(ErrorCode::kInternal, "wrong exception");
  }
  ADD_FAILURE() << "did not throw";
  return Error(ErrorCode::kInternal, "no exception");
}

// The full message (what()) of the Error a callable throws.
template <typename F>
std::string error_message(F&& f) {
  return error_of(std::forward<F>(f)).what();
}

}  // namespace opconform::testing
