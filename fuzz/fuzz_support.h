// What the fuzz targets share: a finding that libFuzzer reports as a crash, and readers that
// turn fuzz bytes into values that are usually plausible and sometimes anything at all (a
// boundary must survive both).
#pragma once

#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "opconform/core/error.h"

namespace opconform::fuzz {

// A property broke: say which and abort, so libFuzzer saves the input as a crash reproducer.
[[noreturn]] inline void fail(const std::string& what) {
  std::fprintf(stderr, "\n==opconform fuzz finding== %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

// FUZZ_CHECK(cond, parts...): a finding unless cond holds; the parts make the message.
#define FUZZ_CHECK(cond, ...)                                                       \
  do {                                                                              \
    if (!(cond)) ::opconform::fuzz::fail(::opconform::detail::concat(__VA_ARGS__)); \
  } while (0)

// Mostly a value in [lo, hi], where the interesting cases live; one time in four any value of
// the type, so that overflow and sign checks are reached too.
template <typename T>
T plausible(FuzzedDataProvider& in, T lo, T hi) {
  return in.ConsumeIntegralInRange<uint8_t>(0, 3) == 0 ? in.ConsumeIntegral<T>() : in.ConsumeIntegralInRange<T>(lo, hi);
}

// Printable bytes for messages (a fuzz input may hold anything).
inline std::string printable(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    }
  }
  return out;
}

}  // namespace opconform::fuzz
