// A message a library hands the host (ctx->set_error, registrar->set_error, a sample builder's
// set_error), copied with a cap. Private to adapters/.
//
// Note [A library's message has a size]: the text is the library's, and every report format
// repeats it (console, report.json, report.md, report.html, junit.xml, the findings): an 8 MiB
// message from one kernel made a gigabyte of reports. At most kMaxLibraryMessage bytes are read
// (strnlen: a message need not even end within reach), cut on a UTF-8 boundary, and the cut is said.
#pragma once
#include <cstddef>
#include <cstring>
#include <string>
#include <string_view>

#include "opconform/core/detail/capped_text.h"

namespace opconform::adapters::detail {

inline constexpr size_t kMaxLibraryMessage = 16 * 1024;

inline std::string library_message(const char* message) {
  if (message == nullptr) return "";
  return ::opconform::detail::capped_text(std::string_view(message, ::strnlen(message, kMaxLibraryMessage + 1)),
                                          kMaxLibraryMessage);
}

}  // namespace opconform::adapters::detail
