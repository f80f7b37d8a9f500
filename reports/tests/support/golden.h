// Golden-file comparison for the writers' tests. The goldens live in reports/tests/golden/;
// with OPCONFORM_UPDATE_GOLDEN=1 in the environment a test rewrites its golden and passes
// (then review the change with git diff). On a mismatch the actual text is left next to the
// test's working directory as <name>.actual, for a diff.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

namespace opconform::reports::testing {

inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

inline void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

inline void expect_golden(const std::string& name, const std::string& actual) {
  const std::filesystem::path golden = std::filesystem::path(OPCONFORM_SOURCE_DIR) / "reports/tests/golden" / name;
  const char* update = std::getenv("OPCONFORM_UPDATE_GOLDEN");
  if (update != nullptr && std::string(update) == "1") {
    write_file(golden, actual);
    std::cout << "updated " << golden << "\n";
    return;
  }
  ASSERT_TRUE(std::filesystem::exists(golden))
      << golden << " is missing: run the test with OPCONFORM_UPDATE_GOLDEN=1 to write it";
  const std::string expected = read_file(golden);
  if (expected == actual) return;
  // Name the first line that differs; the whole text goes to <name>.actual.
  std::istringstream e(expected), a(actual);
  std::string expected_line, actual_line;
  int line = 1;
  while (true) {
    const bool more_e = static_cast<bool>(std::getline(e, expected_line));
    const bool more_a = static_cast<bool>(std::getline(a, actual_line));
    if (!more_e && !more_a) break;
    if (!more_e) expected_line = "<end of file>";
    if (!more_a) actual_line = "<end of file>";
    if (expected_line != actual_line || !more_e || !more_a) break;
    ++line;
  }
  const auto actual_path = std::filesystem::current_path() / (name + ".actual");
  write_file(actual_path, actual);
  ADD_FAILURE() << name << " differs from its golden at line " << line << ":\n  expected: " << expected_line
                << "\n  actual:   " << actual_line << "\nactual text in " << actual_path
                << "; if the change is intended, rerun with OPCONFORM_UPDATE_GOLDEN=1";
}

}  // namespace opconform::reports::testing
