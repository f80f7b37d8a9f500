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

std::string_view to_string(ErrorReason reason) {
  switch (reason) {
    case ErrorReason::kUnspecified: return "unspecified";
    case ErrorReason::kNoKernel: return "no_kernel";
    case ErrorReason::kDtypeNotImplemented: return "dtype_not_implemented";
    case ErrorReason::kLibraryNotImplemented: return "library_not_implemented";
    case ErrorReason::kNoFakeKernel: return "no_fake_kernel";
    case ErrorReason::kFakeDataAccess: return "fake_data_access";
    case ErrorReason::kDataDependentOutput: return "data_dependent_output";
    case ErrorReason::kGuardFailed: return "guard_failed";
    case ErrorReason::kCapturedMetadata: return "captured_metadata";
    case ErrorReason::kNotFunctionalizable: return "not_functionalizable";
    case ErrorReason::kInvalidArgument: return "invalid_argument";
    case ErrorReason::kLibraryError: return "library_error";
  }
  return "unspecified";
}

std::string_view describe(ErrorReason reason) {
  switch (reason) {
    case ErrorReason::kUnspecified: return "an error";
    case ErrorReason::kNoKernel: return "no kernel for this backend";
    case ErrorReason::kDtypeNotImplemented: return "a dtype it does not implement";
    case ErrorReason::kLibraryNotImplemented: return "the library does not implement these arguments";
    case ErrorReason::kNoFakeKernel: return "no fake kernel";
    case ErrorReason::kFakeDataAccess: return "a fake kernel read tensor data";
    case ErrorReason::kDataDependentOutput: return "a data-dependent output";
    case ErrorReason::kGuardFailed: return "a guard failed";
    case ErrorReason::kCapturedMetadata: return "an output unlike its captured metadata";
    case ErrorReason::kNotFunctionalizable: return "a write functionalization cannot express";
    case ErrorReason::kInvalidArgument: return "an argument refused as invalid";
    case ErrorReason::kLibraryError: return "the library's own error";
  }
  return "an error";
}

namespace {
ErrorReason reason_of_code(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument: return ErrorReason::kInvalidArgument;
    case ErrorCode::kDataDependentOutput: return ErrorReason::kDataDependentOutput;
    default: return ErrorReason::kUnspecified;
  }
}
}  // namespace

Error::Error(ErrorCode code, std::string message) : Error(code, reason_of_code(code), std::move(message)) {}

Error::Error(ErrorCode code, ErrorReason reason, std::string message)
    : std::runtime_error(message), code_(code), reason_(reason), message_(std::move(message)) {
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
