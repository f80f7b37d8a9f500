// Text from an untrusted side (a library, a worker), kept to a size: cut on a UTF-8 character
// boundary, and the cut said. Used where such text enters opconform (Note [A library's message has
// a size] in adapters/src/library_message.h; the results a worker sends, harness/src/worker_pool.cpp).
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace opconform::detail {

inline std::string capped_text(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  size_t cut = max_bytes;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;  // not inside a character
  return std::string(text.substr(0, cut)) + "... (cut at " + std::to_string(max_bytes) + " bytes)";
}

}  // namespace opconform::detail
