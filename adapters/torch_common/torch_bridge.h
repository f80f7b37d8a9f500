// The torch bridge: what every libtorch-based adapter shares (the ATen adapter, adapters/aten; the
// TORCH_LIBRARY adapter, adapters/torch_library). It turns any c10::OperatorHandle into boxed
// opconform kernels (opconform/plugin.h):
//   - call_kernel: the op through the dispatcher (OperatorHandle::callBoxed) on the arguments' device
//     (CPU, or CUDA where libtorch has it), grad mode off;
//   - fake_kernel: the same call on meta tensors (register it only where has_meta_kernel);
//   - register_backward_ops: the op's backward as operators (plugin ABI 2, declare_backward_op):
//     "<ns>_backward::<name>" gives the gradients through libtorch's autograd (a re-run of the op
//     under autograd and torch::autograd::grad), "<ns>_backward2::<name>" its own derivative.
// Each takes its OpEntry as user_data. Tensors cross zero-copy both ways (DLPack 1.x; see
// torch_bridge.cpp for why not at::fromDLPack), arguments become c10::IValues by the entry's own
// schema, and no C++ exception crosses the ABI: guarded turns every one into a status and the first
// line of its message.
//
// A static library linked into each plugin with hidden visibility: each plugin has its own copy
// (its own entries(), its own seed records), and none of these symbols is exported.
#pragma once
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/Exception.h>

#include <exception>
#include <map>
#include <new>
#include <string>
#include <string_view>

#include "opconform/plugin.h"

namespace opconform::torch_bridge {

// How a c10::Error that is not one of c10's typed errors the bridge knows (NotImplementedError,
// OutOfMemoryError) becomes a status. Each adapter chooses: see guarded.
using ErrorClassifier = OpcStatus (*)(const c10::Error& error);

// Typed classification (the project's rule: by type, never by message): c10::NotImplementedError
// (handled before the classifier) is unsupported; every other c10::Error — TORCH_CHECK's argument
// checks, IndexError, ValueError, TypeError — is an invalid argument.
OpcStatus classify_by_type(const c10::Error& error);

// One operator: what the kernels' user_data points to (entries live as long as the library).
struct OpEntry {
  std::string name;  // "aten::add.Tensor", "torchvision::roi_align"
  c10::OperatorHandle handle;
  std::string schema_string;  // c10::toString(schema), as the library has it
  bool seeded = false;        // tagged nondeterministic_seeded: draws from the CPU generator
  // Whose schemas these are, in messages ("ATen 1.13's schema has ..."): "ATen 1.13", "the extension".
  std::string label;
  // The adapter, in messages ("unknown C++ exception in the ATen adapter").
  std::string adapter;
  ErrorClassifier classify = &classify_by_type;
  // 0: the op itself; 1: its backward op (name "<ns>_backward::..."); 2: the backward op's backward
  // ("<ns>_backward2::..."). handle and schema_string stay the forward op's: every order re-runs it.
  int derivative = 0;
};

// By name: loading a plugin again (another registry) reuses the entries (stable addresses). Each
// plugin has its own map (hidden visibility).
std::map<std::string, OpEntry>& entries();

// "ATen 1.13": the libtorch this bridge was built against, for messages about dtypes.
const std::string& torch_label();

// A failure inside a kernel: thrown in the bridge, turned into a status at the ABI boundary.
struct KernelError {
  OpcStatus status;
  std::string message;
};

[[noreturn]] void fail(OpcStatus status, std::string message);

std::string first_line(std::string_view text);

// Runs `body`, turning every exception into a status and a message (its first line), reported
// through ctx->set_error. c10::Errors other than the typed ones below go through `classify`.
template <typename Body>
OpcStatus guarded(const OpcCallContext* ctx, const OpEntry* entry, Body&& body) {
  auto report = [&](OpcStatus status, const std::string& message) {
    if (ctx != nullptr && ctx->set_error != nullptr && !message.empty()) ctx->set_error(ctx->host, message.c_str());
    return status;
  };
  try {
    body();
    return OPC_OK;
  } catch (const KernelError& e) {
    return report(e.status, e.message);
  } catch (const c10::NotImplementedError& e) {
    return report(OPC_NOT_IMPLEMENTED, first_line(e.what_without_backtrace()));
  } catch (const c10::OutOfMemoryError& e) {
    return report(OPC_OUT_OF_MEMORY, first_line(e.what_without_backtrace()));
  } catch (const c10::Error& e) {
    const ErrorClassifier classify = entry != nullptr ? entry->classify : &classify_by_type;
    return report(classify(e), first_line(e.what_without_backtrace()));
  } catch (const std::bad_alloc&) {
    return report(OPC_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return report(OPC_ERROR, first_line(e.what()));
  } catch (...) {
    return report(OPC_ERROR, "unknown C++ exception in " + (entry != nullptr ? entry->adapter : std::string("a torch adapter")));
  }
}

// The kernels (user_data: an OpEntry*).
OpcStatus call_kernel(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args, OpcValue* returns,
                     int64_t num_returns, void* user_data);
OpcStatus fake_kernel(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args, OpcValue* returns,
                      int64_t num_returns, void* user_data);

// Declares `forward`'s backward operator and the backward operator's own (registrar 2.0
// declare_backward_op; nothing when the host has none) and registers their kernels: CPU, CUDA
// where `cuda`, fake where `fake` (the forward has a meta kernel). Entries for both are added to
// entries(). Returns the first failing registrar status (the host records it as the op's problem).
OpcStatus register_backward_ops(const OpcRegistrar* r, const OpEntry& forward, bool cuda, bool fake);
// "aten::add.Tensor", 1 -> "aten_backward::add.Tensor"; 2 -> "aten_backward2::add.Tensor".
std::string backward_op_name(const std::string& op, int order);

// ---- schema and dispatcher queries

// Tensor, Tensor? or Tensor[].
bool holds_tensor(const c10::TypePtr& type);
bool has_tensor_argument(const c10::FunctionSchema& schema);
bool has_tensor_return(const c10::FunctionSchema& schema);
// Ops whose meta call works: a meta kernel, or a composite kernel in the computed table.
bool has_meta_kernel(const c10::OperatorHandle& handle);
// "aten::add.Tensor" (no dot without an overload name).
std::string qualified_name(const c10::OperatorName& name);

}  // namespace opconform::torch_bridge
