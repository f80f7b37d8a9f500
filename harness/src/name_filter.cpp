#include "opconform/harness/name_filter.h"

#include <fnmatch.h>

namespace opconform::harness {
namespace {

bool pattern_matches(const std::string& pattern, std::string_view name) {
  const std::string n(name);
  // An exact name matches itself even when it holds glob characters (a library's own op names).
  return pattern == n || fnmatch(pattern.c_str(), n.c_str(), 0) == 0;
}

}  // namespace

NameFilter::NameFilter(std::string_view text) {
  std::vector<std::string>* list = &positive_;
  std::string current;
  bool in_bracket = false;
  const auto flush = [&] {
    if (!current.empty()) list->push_back(current);
    current.clear();
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_bracket) {
      in_bracket = c != ']';
      current += c;
    } else if (c == '[') {
      in_bracket = true;
      current += c;
    } else if (c == ':' && i + 1 < text.size() && text[i + 1] == ':') {
      current += "::";  // a namespace separator, part of the name
      ++i;
    } else if (c == ':' || c == ',') {
      flush();
    } else if (c == '-' && list == &positive_) {
      flush();
      list = &negative_;  // as gtest: everything after the first '-' is negative
    } else {
      current += c;
    }
  }
  flush();
  if (positive_.empty()) positive_.push_back("*");
}

bool NameFilter::matches(std::string_view name) const {
  bool selected = false;
  for (const auto& p : positive_) selected = selected || pattern_matches(p, name);
  if (!selected) return false;
  for (const auto& p : negative_)
    if (pattern_matches(p, name)) return false;
  return true;
}

std::vector<std::string> NameFilter::unmatched(const std::vector<std::string>& names) const {
  std::vector<std::string> out;
  for (const auto& p : positive_) {
    bool any = false;
    for (const auto& n : names) any = any || pattern_matches(p, n);
    if (!any) out.push_back(p);
  }
  return out;
}

bool is_glob(std::string_view pattern) { return pattern.find_first_of("*?[") != std::string_view::npos; }

}  // namespace opconform::harness
