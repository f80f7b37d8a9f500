// The one matcher of --ops and --checks (and `list --ops`): a filter as GoogleTest's
// --gtest_filter spells it. Positive patterns separated by ':' (or ','), then optionally '-' and
// negative patterns: 'aten::add*:aten::mul*-aten::add.out' selects every add and mul overload but
// add.out. Each pattern is an fnmatch glob ('*', '?', '[...]') or an exact name. A '::' belongs to
// a qualified name (aten::add), only a single ':' separates; a '-' inside [...] is a range. No
// positive pattern ('-aten::add*') means every name.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace opconform::harness {

class NameFilter {
 public:
  // Never throws: every text is a filter (an empty one selects every name).
  explicit NameFilter(std::string_view text);

  bool matches(std::string_view name) const;
  // The positive patterns that select none of `names`: a typo must not pass CI silently, so the
  // commands treat each as a usage error (exit status 2).
  std::vector<std::string> unmatched(const std::vector<std::string>& names) const;

  const std::vector<std::string>& positive() const { return positive_; }
  const std::vector<std::string>& negative() const { return negative_; }

 private:
  std::vector<std::string> positive_, negative_;
};

// Whether `pattern` has a glob character: a pattern without one names exactly one thing.
bool is_glob(std::string_view pattern);

}  // namespace opconform::harness
