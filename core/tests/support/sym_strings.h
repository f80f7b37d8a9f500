// SymInts as strings ("s0", "3"), for tests that compare symbolic sizes and strides with
// ElementsAre.
#pragma once

#include <string>
#include <vector>

#include "opconform/core/symint.h"

namespace opconform::testing {

inline std::vector<std::string> strs(const std::vector<SymInt>& v) {
  std::vector<std::string> out;
  for (const auto& s : v) out.push_back(s.to_string());
  return out;
}

}  // namespace opconform::testing
