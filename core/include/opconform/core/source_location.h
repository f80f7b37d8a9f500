// SourceLocation: where a call was written, captured by a default argument
// (`SourceLocation loc = SourceLocation::current()`). It is std::source_location's job, but
// clang-14 (the fuzz preset) cannot compile libstdc++'s <source_location>; the builtins below
// work in g++ and clang alike.
#pragma once

namespace opconform {

struct SourceLocation {
  const char* file = "";
  unsigned line = 0;

  static constexpr SourceLocation current(const char* file = __builtin_FILE(), unsigned line = __builtin_LINE()) {
    return SourceLocation{file, line};
  }
};

}  // namespace opconform
