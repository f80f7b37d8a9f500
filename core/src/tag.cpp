#include "opconform/core/tag.h"

namespace opconform {

std::string_view to_string(Tag t) {
  switch (t) {
    case Tag::core: return "core";
    case Tag::pointwise: return "pointwise";
    case Tag::inplace: return "inplace";
    case Tag::out: return "out";
    case Tag::view_copy: return "view_copy";
    case Tag::inplace_view: return "inplace_view";
    case Tag::data_dependent_output: return "data_dependent_output";
    case Tag::dynamic_output_shape: return "dynamic_output_shape";
    case Tag::nondeterministic_seeded: return "nondeterministic_seeded";
    case Tag::nondeterministic_bitwise: return "nondeterministic_bitwise";
    case Tag::needs_fixed_stride_order: return "needs_fixed_stride_order";
    case Tag::flexible_layout: return "flexible_layout";
    case Tag::generated: return "generated";
    case Tag::maybe_aliasing_or_mutating: return "maybe_aliasing_or_mutating";
    case Tag::pt2_compliant_tag: return "pt2_compliant_tag";
    case Tag::not_thread_safe: return "not_thread_safe";
  }
  return "?";
}

std::optional<Tag> parse_tag(std::string_view s) {
  for (int i = 0; i <= static_cast<int>(Tag::not_thread_safe); ++i) {
    if (to_string(static_cast<Tag>(i)) == s) return static_cast<Tag>(i);
  }
  return std::nullopt;
}

}  // namespace opconform
