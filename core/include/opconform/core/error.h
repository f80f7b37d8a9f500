// opconform::Error — the one exception hierarchy of the library.
//
// Every error carries a code (what kind of failure), a message that names the operator and the
// argument involved where there is one, and optional context lines added as the error travels up
// (e.g. "while importing DLPack tensor 'x'"). Checks never throw for a finding; they return an
// outcome. Errors are for misuse and malformed input.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace opconform {

enum class ErrorCode {
  kInvalidArgument,   // a value the caller passed is wrong (bad shape, bad dtype, bad index)
  kSchemaParse,       // a schema string does not parse
  kSchemaMismatch,    // an implementation or call does not match its schema
  kNotImplemented,    // no kernel for these arguments (dispatch failure)
  kDLPack,            // a malformed or unsupported DLPack descriptor
  kRegistration,      // a duplicate definition, a bad registration
  kReadOnly,          // a write to read-only memory (e.g. an imported read-only DLPack tensor)
  kDevice,            // a device is missing or unusable (no GPU, CUDA error)
  kInternal,          // a broken invariant inside opconform
  // The result is a value of tensor data (Tensor.item(), aten::_local_scalar_dense), which a fake
  // tensor does not have: PyTorch's DataDependentOutputException. A fake kernel throws it instead
  // of inventing a value that a captured graph would bake in; a capture breaks there.
  kDataDependentOutput,
};

std::string_view to_string(ErrorCode code);

// Note [Causes are values]: what made an error, as a closed set of facts, set where the fact is
// known (the dispatcher, a fake-tensor call, a capture's replay, the plugin boundary). Checks
// classify errors by code and reason, never by their message text (a message is for people, and
// its wording may change); a finding's cause (conformance/cause.h) is built from them.
enum class ErrorReason {
  kUnspecified,          // nothing is known beyond the code
  kNoKernel,             // the dispatcher has no kernel for the call's dispatch keys (device, backend)
  kDtypeNotImplemented,  // a kernel refused a dtype it does not implement
  kLibraryNotImplemented,  // a library's kernel said it does not implement these arguments (OPC_NOT_IMPLEMENTED)
  kNoFakeKernel,         // a call with fake (meta) tensors found no fake kernel for the op
  kFakeDataAccess,       // a kernel read the data of a fake tensor, which has none
  kDataDependentOutput,  // the result is a value of tensor data (see ErrorCode::kDataDependentOutput)
  kGuardFailed,          // a captured graph's guard does not hold for the replay's inputs
  kCapturedMetadata,     // a replayed op's output differs from the metadata its fake kernel gave at capture
  kNotFunctionalizable,  // functionalization cannot express the op's writes (a write through a view it made)
  kInvalidArgument,      // a kernel refused its arguments as violating the op's contract
  kLibraryError,         // a library's kernel reported an error of its own (any other plugin status)
};

std::string_view to_string(ErrorReason reason);
// The reason in a few words, for titles ("no fake kernel").
std::string_view describe(ErrorReason reason);

class Error : public std::runtime_error {
 public:
  // The reason defaults to what the code alone says (kInvalidArgument, kDataDependentOutput),
  // else kUnspecified.
  Error(ErrorCode code, std::string message);
  Error(ErrorCode code, ErrorReason reason, std::string message);

  ErrorCode code() const noexcept { return code_; }
  ErrorReason reason() const noexcept { return reason_; }
  // The message without context lines.
  const std::string& message() const noexcept { return message_; }
  const std::vector<std::string>& context() const noexcept { return context_; }
  // Adds a line of context ("while ..."); what() then shows it under the message.
  Error& add_context(std::string line);

  const char* what() const noexcept override { return what_.c_str(); }

 private:
  void rebuild_what();
  ErrorCode code_;
  ErrorReason reason_;
  std::string message_;
  std::vector<std::string> context_;
  std::string what_;
};

// Throws Error(code, message) when cond is false. The message is only built on failure.
#define OPCONFORM_CHECK(cond, code, ...)                                  \
  do {                                                                   \
    if (!(cond)) [[unlikely]] {                                          \
      throw ::opconform::Error(code, ::opconform::detail::concat(__VA_ARGS__)); \
    }                                                                    \
  } while (0)

// As OPCONFORM_CHECK, with a reason (Note [Causes are values]).
#define OPCONFORM_CHECK_BECAUSE(cond, code, reason, ...)                  \
  do {                                                                   \
    if (!(cond)) [[unlikely]] {                                          \
      throw ::opconform::Error(code, reason, ::opconform::detail::concat(__VA_ARGS__)); \
    }                                                                    \
  } while (0)

namespace detail {
template <typename... Parts>
std::string concat(const Parts&... parts);
}  // namespace detail

}  // namespace opconform

#include <charconv>
#include <sstream>
#include <string_view>
#include <type_traits>

namespace opconform::detail {

// Note [concat without a stream]: messages and keys are built on hot paths (a sample builder's
// draw keys, every check's texts, the errors of kernels that refuse a dtype), and an
// ostringstream costs a locale copy to construct: 3.6% of the ATen check's CPU time in a profile.
// So strings, characters, booleans, integers and floating-point numbers are appended directly,
// formatted exactly as an ostream formats them by default (%g with 6 digits, bools as 1/0,
// int8_t as a character); any other part goes through its operator<<.
template <typename T>
void append_part(std::string& out, const T& part) {
  if constexpr (std::is_same_v<T, char> || std::is_same_v<T, signed char> || std::is_same_v<T, unsigned char>) {
    out.push_back(static_cast<char>(part));
  } else if constexpr (std::is_array_v<T> && std::is_same_v<std::remove_cv_t<std::remove_extent_t<T>>, char>) {
    out.append(part);  // a literal: up to its NUL, as an ostream writes it
  } else if constexpr (std::is_same_v<T, const char*> || std::is_same_v<T, char*>) {
    if (part != nullptr) out.append(part);
  } else if constexpr (std::is_convertible_v<const T&, std::string_view>) {
    out.append(std::string_view(part));
  } else if constexpr (std::is_same_v<T, bool>) {
    out.push_back(part ? '1' : '0');
  } else if constexpr (std::is_integral_v<T>) {
    char buffer[24];
    out.append(buffer, std::to_chars(buffer, buffer + sizeof buffer, part).ptr);
  } else if constexpr (std::is_same_v<T, double> || std::is_same_v<T, float>) {
    char buffer[32];
    out.append(buffer, std::to_chars(buffer, buffer + sizeof buffer, static_cast<double>(part),
                                     std::chars_format::general, 6).ptr);
  } else {
    std::ostringstream stream;
    stream << part;
    out.append(stream.str());
  }
}

template <typename... Parts>
std::string concat(const Parts&... parts) {
  std::string out;
  (append_part(out, parts), ...);
  return out;
}

}  // namespace opconform::detail
