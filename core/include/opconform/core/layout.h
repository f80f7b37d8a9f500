// Layout and MemoryFormat: the two small enums of the schema language besides ScalarType.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace opconform {

// opconform tensors are strided; the other layouts exist so schemas that mention them parse
// and boxed values carry them.
enum class Layout : uint8_t { Strided = 0, Sparse = 1, SparseCsr = 2, Mkldnn = 3 };

enum class MemoryFormat : uint8_t { Contiguous = 0, Preserve = 1, ChannelsLast = 2, ChannelsLast3d = 3 };

// PyTorch's spellings: "strided", "sparse_coo", "contiguous_format", "preserve_format", ...
std::string_view to_string(Layout l);
std::string_view to_string(MemoryFormat m);
std::optional<Layout> parse_layout(std::string_view s);
std::optional<MemoryFormat> parse_memory_format(std::string_view s);

}  // namespace opconform
