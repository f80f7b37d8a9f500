// Tag: PyTorch's operator tags (torch.Tag). A tag changes how subsystems treat an operator:
// `inplace` and `out` give standard aliasing and an automatic fake kernel, `pointwise` and
// `core` classify, `data_dependent_output` and `dynamic_output_shape` warn graph capture,
// `nondeterministic_seeded` relaxes the determinism check. `not_thread_safe` is opconform's own
// (torch.Tag has none): the op must not be called from several threads at once, and the
// thread_safety check says so instead of running.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace opconform {

enum class Tag : uint8_t {
  core,
  pointwise,
  inplace,
  out,
  view_copy,
  inplace_view,
  data_dependent_output,
  dynamic_output_shape,
  nondeterministic_seeded,
  nondeterministic_bitwise,
  needs_fixed_stride_order,
  flexible_layout,
  generated,
  maybe_aliasing_or_mutating,
  pt2_compliant_tag,
  not_thread_safe,  // opconform's own, last
};

std::string_view to_string(Tag t);
std::optional<Tag> parse_tag(std::string_view s);

}  // namespace opconform
