// The libtorch adapter (Debian's ATen 1.13, or PyTorch 2.11's libraries: Note [One bridge for ATen
// 1.13 and 2.x] in torch_bridge.cpp): an opconform plugin (opconform/plugin.h) that offers ATen's
// own kernels for every operator the host's reference knows, CPU and, where libtorch has them, CUDA.
//
// register_ops walks ATen's dispatcher (c10::Dispatcher::getAllOpNames) and, for every "aten::"
// overload the host knows (host_knows), registers without a definition (the host's schema and
// tags apply):
//   - OPC_KERNEL_CPU: the op through ATen's dispatcher (OperatorHandle::callBoxed), grad mode off;
//   - OPC_KERNEL_FAKE: the same call on meta tensors, when ATen has a meta (or composite) kernel;
//   - for ops with a tensor argument and a tensor return, the backward as operators (plugin ABI 2,
//     declare_backward_op): "aten_backward::<op>", ATen's autograd (torch::autograd::grad over a
//     re-run of the op), with CPU, CUDA and fake kernels like the op's, and its own backward
//     "aten_backward2::<op>" (second derivatives), so gradgradcheck runs and the backward is
//     captured.
// The few ops whose ATen 1.13 argument list cannot take the host's arguments
// (incompatible_with_host) are instead defined with ATen's own schema string: the host compares it
// with its reference's and reports the difference as a load problem, leaving the op out.
//
// The kernels, the tensor and value conversions and the error handling are the torch bridge's
// (adapters/torch_common/torch_bridge.h), shared with the TORCH_LIBRARY adapter. What is ATen's
// own here: the ops it offers (above) and how it classifies ATen's errors (classify_aten_error).
// docs/aten-differences.md lists where ATen 1.13 and the reference disagree.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/version.h>

#include <algorithm>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "opconform/plugin.h"
#include "torch_bridge.h"

namespace {

using opconform::torch_bridge::OpEntry;

// ATen's TORCH_CHECKs are argument checks (OPC_INVALID_ARGUMENT); ATen 1.13 raises its "no kernel
// for this dtype / backend" errors as plain c10::Errors, recognised here by their words: ATen's
// dtype dispatch: "\"add_stub\" not implemented for 'Half'"; missing kernels: "Could not run
// 'aten::nonzero' with arguments from the 'Meta' backend". (Kept as it was before the bridge, so
// that the results in docs/aten-differences.md do not move; the bridge's own default,
// classify_by_type, goes by type only.)
OpcStatus classify_aten_error(const c10::Error& e) {
  const std::string message = opconform::torch_bridge::first_line(e.what_without_backtrace());
  const bool unsupported = message.find("not implemented for") != std::string::npos ||
                           message.find("Could not run") != std::string::npos ||
                           message.find("is not implemented") != std::string::npos;
  return unsupported ? OPC_NOT_IMPLEMENTED : OPC_INVALID_ARGUMENT;
}

// Ops whose ATen 1.13 argument list cannot take the arguments of PyTorch's current schema (the
// one opconform's reference has): defined with ATen's schema so that the host reports the
// difference, never implemented. Every other difference between ATen 1.13's schemas and the
// reference's is SymInt spelled int (the same at a call), listed in docs/aten-differences.md;
// should the host's schema differ in another way, the call fails with OPC_NOT_IMPLEMENTED saying
// so (make_stack compares the argument count and each argument's kind).
bool incompatible_with_host(const std::string& op) {
  static const char* const kIncompatible[] = {
      // 1.13: (Tensor self, int[1]? dim, *, int? correction, bool keepdim=False); PyTorch >= 2.0:
      // Scalar? correction=None — a float correction (0.5) cannot be passed to 1.13.
      "aten::var.correction",
  };
  for (const char* name : kIncompatible)
    if (op == name) return true;
  return false;
}

OpcStatus register_ops(const OpcRegistrar* r) {
  // The 1.0 members are needed; declare_backward_op (2.0) is used where the registrar has it.
  if (r == nullptr || r->version != OPC_PLUGIN_ABI_VERSION || !OPC_HAS_FIELD(r, OpcRegistrar, host_knows)) {
    return OPC_ABI_MISMATCH;
  }
  namespace bridge = opconform::torch_bridge;
  try {
    static std::mutex registering;  // entries() is shared by every load of the library
    const std::lock_guard<std::mutex> lock(registering);
    const std::vector<c10::OperatorName> names = c10::Dispatcher::singleton().getAllOpNames();
    std::vector<std::string> qualified;
    for (const auto& name : names) {
      if (name.name.rfind("aten::", 0) == 0) qualified.push_back(bridge::qualified_name(name));
    }
    std::sort(qualified.begin(), qualified.end());
    for (const std::string& full : qualified) {
      if (r->host_knows(r->host, full.c_str()) != 1) continue;
      const size_t dot = full.find('.');
      const std::string base = full.substr(0, dot);
      const std::string overload = dot == std::string::npos ? "" : full.substr(dot + 1);
      const c10::optional<c10::OperatorHandle> handle = c10::Dispatcher::singleton().findSchema({base, overload});
      if (!handle) continue;  // a name without a schema (no op to call)
      OpEntry& entry = bridge::entries()
                           .try_emplace(full, OpEntry{full, *handle, c10::toString(handle->schema()),
                                                      handle->hasTag(at::Tag::nondeterministic_seeded),
                                                      bridge::torch_label(), "the ATen adapter", &classify_aten_error})
                           .first->second;
      if (incompatible_with_host(full)) {
        // ATen's own schema: the host compares it with its own and reports the difference as a
        // load problem (the op is left out); no kernel, its argument list cannot be passed on.
        const OpcStatus status = r->define(r->host, entry.schema_string.c_str());
        if (status != OPC_OK) return status;
        continue;
      }
      OpcStatus status = r->impl(r->host, full.c_str(), OPC_KERNEL_CPU, &bridge::call_kernel, &entry);
      if (status != OPC_OK) return status;
      // ATen's CUDA kernels, where this libtorch has them (PyTorch's CUDA builds; Debian's is
      // CPU-only): the same dispatcher call on device tensors, on the current (default) stream.
      const bool cuda = at::hasCUDA() && entry.handle.hasComputedKernelForDispatchKey(c10::DispatchKey::CUDA);
      if (cuda) {
        status = r->impl(r->host, full.c_str(), OPC_KERNEL_CUDA, &bridge::call_kernel, &entry);
        if (status != OPC_OK) return status;
      }
      const bool meta = bridge::has_meta_kernel(entry.handle);
      if (meta) {
        status = r->impl(r->host, full.c_str(), OPC_KERNEL_FAKE, &bridge::fake_kernel, &entry);
        if (status != OPC_OK) return status;
      }
      if (bridge::has_tensor_argument(entry.handle.schema()) && bridge::has_tensor_return(entry.handle.schema())) {
        // A backward the host cannot define (a schema it cannot derive one from) is that op's
        // problem, which the host records: the op is still offered without it.
        status = bridge::register_backward_ops(r, entry, cuda, meta);
        if (status == OPC_OUT_OF_MEMORY) return status;
      }
    }
    return OPC_OK;
  } catch (const std::bad_alloc&) {
    return OPC_OUT_OF_MEMORY;
  } catch (...) {
    return OPC_ERROR;
  }
}

const OpcPlugin kPlugin = {OPC_PLUGIN_ABI_VERSION, sizeof(OpcPlugin), "aten", "libtorch " TORCH_VERSION,
                           &register_ops, 0};

}  // namespace

extern "C" OPC_EXPORT const OpcPlugin* opconform_plugin(void) { return &kPlugin; }
