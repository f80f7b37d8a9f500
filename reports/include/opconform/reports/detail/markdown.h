// Markdown quoting shared by to_markdown and format_diff (not part of the public API).
#pragma once
#include <string>
#include <string_view>

namespace opconform::reports::detail {

// An inline code span holding `s` (newlines become spaces); "" for an empty `s`.
std::string md_code(std::string_view s);
// `s` with '|' escaped, for a table cell (also inside code spans, as GitHub requires).
std::string md_cell(std::string_view s);
// A fenced code block holding `s`, the fence longer than any backtick run in it.
std::string md_block(std::string_view s);

}  // namespace opconform::reports::detail
