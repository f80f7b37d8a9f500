#include "opconform/core/error.h"

#include <algorithm>

#include "opconform/core/detail/call_context.h"

namespace opconform {

std::string_view to_string(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument: return "invalid argument";
    case ErrorCode::kSchemaParse: return "schema parse error";
    case ErrorCode::kSchemaMismatch: return "schema mismatch";
    case ErrorCode::kNotImplemented: return "not implemented";
    case ErrorCode::kDLPack: return "DLPack error";
    case ErrorCode::kRegistration: return "registration error";
    case ErrorCode::kReadOnly: return "read-only";
    case ErrorCode::kDevice: return "device error";
    case ErrorCode::kInternal: return "internal error";
    case ErrorCode::kDataDependentOutput: return "data-dependent output";
  }
  return "error";
}

Error::Error(ErrorCode code, std::string message)
    : std::runtime_error(message), code_(code), message_(std::move(message)) {
  // Note [Call context without a rethrow] (core/detail/call_context.h): the operators being
  // called, innermost first, each once.
  for (const detail::CallFrame* f = detail::innermost_call; f != nullptr; f = f->outer) {
    std::string line = "while calling '" + *f->op + "'";
    if (std::find(context_.begin(), context_.end(), line) == context_.end()) context_.push_back(std::move(line));
  }
  rebuild_what();
}

Error& Error::add_context(std::string line) {
  context_.push_back(std::move(line));
  rebuild_what();
  return *this;
}

void Error::rebuild_what() {
  what_ = message_;
  for (const auto& line : context_) what_ += "\n  " + line;
}

}  // namespace opconform
