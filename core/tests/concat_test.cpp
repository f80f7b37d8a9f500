// Note [concat without a stream] (core/error.h): concat writes every part as an ostream would,
// without constructing one.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <cstring>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>

#include "opconform/core/detail/capped_text.h"
#include "opconform/core/dtype.h"
#include "opconform/core/error.h"

namespace opconform {
namespace {

using detail::concat;

template <typename... Parts>
std::string streamed(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}

TEST(Concat, WritesEachKindOfPartAsAStreamDoes) {
  const std::string s = "str";
  const std::string_view v = "view";
  const char* p = "pointer";
  const int8_t i8 = 65;   // a character to a stream
  const uint8_t u8 = 66;  // likewise
  EXPECT_EQ(concat("a", s, v, p, 'c', i8, u8), streamed("a", s, v, p, 'c', i8, u8));
  EXPECT_EQ(concat(true, false, 0, -7, int64_t{-9'000'000'000}, uint64_t{18'000'000'000'000'000'000u}, size_t{42}),
            streamed(true, false, 0, -7, int64_t{-9'000'000'000}, uint64_t{18'000'000'000'000'000'000u}, size_t{42}));
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  for (double d : {0.0, -0.0, 1.0, 0.1, 1e-5, 1.3e-6, 123456.0, 1234567.0, 1e21, 5e-324, -2.5, inf, -inf, nan, -nan})
    EXPECT_EQ(concat(d), streamed(d)) << streamed(d);
  EXPECT_EQ(concat(2.4000001f, -0.125f), streamed(2.4000001f, -0.125f));
  EXPECT_EQ(concat(DType::Float16, " and ", 3.5L), streamed(DType::Float16, " and ", 3.5L));  // operator<< parts
  const char* null = nullptr;
  EXPECT_EQ(concat("x", null, "y"), "xy");  // a stream writes nothing for it either (and goes bad)
}

RC_GTEST_PROP(Concat, AnyDoubleIsWrittenAsAStreamWritesIt, (uint64_t bits)) {
  double d;
  static_assert(sizeof d == sizeof bits);
  std::memcpy(&d, &bits, sizeof d);
  RC_ASSERT(concat(d, ", ", static_cast<float>(d)) == streamed(d, ", ", static_cast<float>(d)));
}

// capped_text (core/detail/capped_text.h), the other text helper here: a cut text is a prefix of the
// original that ends on a character, says where it was cut, and short texts pass unchanged.
RC_GTEST_PROP(CappedText, CutsOnACharacterAndSaysSo, (const std::string& ascii, uint8_t max)) {
  const std::string text = ascii + "\xc3\xa9\xe2\x82\xac" + ascii;  // two multi-byte characters in the middle
  const std::string out = detail::capped_text(text, max);
  if (text.size() <= max) {
    RC_ASSERT(out == text);
    return;
  }
  const std::string suffix = "... (cut at " + std::to_string(max) + " bytes)";
  RC_ASSERT(out.size() >= suffix.size() && out.compare(out.size() - suffix.size(), suffix.size(), suffix) == 0);
  const std::string kept = out.substr(0, out.size() - suffix.size());
  RC_ASSERT(kept.size() <= max);
  RC_ASSERT(text.compare(0, kept.size(), kept) == 0);
  // (Arbitrary bytes may hold stray continuation bytes: a cut backs off to the start at most.)
  RC_ASSERT(kept.empty() || (static_cast<unsigned char>(text[kept.size()]) & 0xC0) != 0x80);
}

}  // namespace
}  // namespace opconform
