#include "opconform/core/layout.h"

namespace opconform {

std::string_view to_string(Layout l) {
  switch (l) {
    case Layout::Strided: return "strided";
    case Layout::Sparse: return "sparse_coo";
    case Layout::SparseCsr: return "sparse_csr";
    case Layout::Mkldnn: return "_mkldnn";
  }
  return "?";
}

std::string_view to_string(MemoryFormat m) {
  switch (m) {
    case MemoryFormat::Contiguous: return "contiguous_format";
    case MemoryFormat::Preserve: return "preserve_format";
    case MemoryFormat::ChannelsLast: return "channels_last";
    case MemoryFormat::ChannelsLast3d: return "channels_last_3d";
  }
  return "?";
}

std::optional<Layout> parse_layout(std::string_view s) {
  for (auto l : {Layout::Strided, Layout::Sparse, Layout::SparseCsr, Layout::Mkldnn}) {
    if (to_string(l) == s) return l;
  }
  return std::nullopt;
}

std::optional<MemoryFormat> parse_memory_format(std::string_view s) {
  for (auto m : {MemoryFormat::Contiguous, MemoryFormat::Preserve, MemoryFormat::ChannelsLast,
                 MemoryFormat::ChannelsLast3d}) {
    if (to_string(m) == s) return m;
  }
  return std::nullopt;
}

}  // namespace opconform
