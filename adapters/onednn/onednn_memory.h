// What every primitive family of the oneDNN adapter shares: the call's arguments as tensors and
// scalars, outputs from the host, DLPack tensors as oneDNN memory descriptors (Note [Strided
// inputs] in onednn_plugin.cpp), the dense-copy fallback, PyTorch's output layouts, and the errors
// a kernel throws (turned into a status at the ABI by `guarded`).
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "oneapi/dnnl/dnnl.hpp"
#include "opconform/plugin.h"
#include "opconform/plugin_args.hpp"

namespace opc_onednn {

using dt = dnnl::memory::data_type;
// The errors a kernel throws and the argument readers: opconform/plugin_args.hpp.
using opc::contiguous_strides;
using opc::Dims;
using opc::invalid_argument;
using opc::KernelError;
using opc::not_implemented;
using opc::shape_string;

// Runs body, turning every exception into a status and ctx->set_error("<op>: <message>"):
// KernelError keeps its status, dnnl::error maps unimplemented -> OPC_NOT_IMPLEMENTED,
// invalid_arguments -> OPC_INVALID_ARGUMENT, out_of_memory -> OPC_OUT_OF_MEMORY, other -> OPC_ERROR.
template <class Body>
OpcStatus guarded(const OpcCallContext* ctx, Body&& body);

// ---- settings (plugin options) ---------------------------------------------------------------

struct Settings {
  bool strict_layouts = false;  // layouts=strict: no dense copy, OPC_NOT_IMPLEMENTED instead
};
Settings& settings();
// Dense copies made so far, per op (Note [Strided inputs]); read by the tests.
std::unordered_map<std::string, int64_t>& dense_copies();

// One CPU engine for the library; one stream per thread (streams are not thread-safe).
const dnnl::engine& engine();
dnnl::stream& stream();
// Executes and waits.
void run(const dnnl::primitive& p, const std::unordered_map<int, dnnl::memory>& args);

// ---- dtypes ----------------------------------------------------------------------------------

std::optional<dt> dnnl_type(DLDataType t);
DLDataType dl_type(dt t);
const char* dtype_name(dt t);
int64_t dtype_size(dt t);
bool is_floating(dt t);
// PyTorch's ScalarType number (the `ScalarType?` arguments) as a oneDNN type, if it has one.
std::optional<dt> dnnl_type_of_scalar_type(int64_t scalar_type);
// One element as float (for the plugin's own passes: max pooling's indices).
float load_float(const void* p, dt t);

// ---- tensors ---------------------------------------------------------------------------------

struct Tensor {
  dt type = dt::undef;
  Dims shape, strides;   // strides in elements, as DLPack gives them
  void* data = nullptr;  // the first element (data + byte_offset)
  int ndim() const { return static_cast<int>(shape.size()); }
  int64_t numel() const;
  int64_t size(int d) const { return shape[static_cast<size_t>(d)]; }
};

Dims channels_last_strides(const Dims& shape);  // 4-d and 5-d
bool is_contiguous(const Tensor& t);
bool is_non_overlapping_and_dense(const Tensor& t);
// c10's is_channels_last_strides_2d/_3d (ambiguous N111 layouts count as contiguous).
bool strides_like_channels_last(const Tensor& t);
// TensorIterator's output strides over `shape` (the inputs' memory order, broadcast dims ignored).
Dims elementwise_strides(const Dims& shape, const std::vector<const Tensor*>& inputs);
// PyTorch's broadcast shape of a and b (numpy's rule); invalid_argument naming the arguments.
Dims broadcast_shape(const Tensor& a, const char* a_name, const Tensor& b, const char* b_name);
// Reorders dims (same count): t's view with dimension d of the result = dimension perm[d] of t.
Tensor permuted(const Tensor& t, const std::vector<int>& perm);
// t's view over `shape` (same or more dims, aligned from the right), stride 0 where it broadcasts.
Tensor expanded(const Tensor& t, const Dims& shape);

// ---- one call --------------------------------------------------------------------------------

// A kernel's view of one boxed call: typed reads of its arguments (each failure names the
// argument), its outputs and scratch tensors from the host.
// The call's arguments (numbers, lists, strings: opc::Args) and its tensors as oneDNN sees them.
class Call : public opc::Args {
 public:
  Call(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args, OpcValue* returns, int64_t num_returns);
  const char* op() const { return ctx_->op_name ? ctx_->op_name : "onednn"; }
  int64_t num_returns() const { return num_returns_; }

  Tensor tensor(int64_t i, const char* name) const;
  std::optional<Tensor> optional_tensor(int64_t i, const char* name) const;
  std::vector<Tensor> tensor_list(int64_t i, const char* name) const;

  // A new tensor, returned as return `ret` (PyTorch's layout is the caller's choice of strides).
  Tensor output(int64_t ret, dt type, const Dims& shape, const Dims& strides);
  Tensor output(int64_t ret, dt type, const Dims& shape) { return output(ret, type, shape, contiguous_strides(shape)); }
  // A row-major output of a dtype oneDNN has no type for (max pooling's int64 indices): type undef.
  Tensor output(int64_t ret, DLDataType type, const Dims& shape);
  // A host tensor not returned (freed after the call): scratch and dense copies.
  Tensor scratch(dt type, const Dims& shape, const Dims& strides);
  Tensor scratch(dt type, const Dims& shape) { return scratch(type, shape, contiguous_strides(shape)); }

 private:
  Tensor make(DLDataType type, const Dims& shape, const Dims& strides, OpcDLManagedTensorVersioned** managed);
  const OpcCallContext* ctx_;
  OpcValue* returns_;
  int64_t num_returns_;
};

// ---- oneDNN memory ---------------------------------------------------------------------------

// t's own layout as a memory descriptor (0-d as {1}); dnnl::error when oneDNN refuses it.
dnnl::memory::desc md_of(const Tensor& t);
// A descriptor of `dims` over t's memory with explicit strides (a reshaped or regrouped view).
dnnl::memory::desc md_of(dt type, const Dims& dims, const Dims& strides);
dnnl::memory memory_of(const dnnl::memory::desc& md, const Tensor& t);
dnnl::memory memory_of(const Tensor& t);
// A copy of t in row-major order, optionally converted to `type`, made by reorder when oneDNN
// takes t's layout, else by the plugin's own strided copy (same type only). Counted per op.
Tensor dense_copy(Call& call, const Tensor& t, dt type = dt::undef);
// t's descriptor; when oneDNN refuses t's layout, t becomes a dense copy (or, with
// layouts=strict, OPC_NOT_IMPLEMENTED naming the argument).
dnnl::memory::desc input_md(Call& call, Tensor& t, const char* name);
// Makes every tensor in `inputs` dense (a copy where it is not contiguous already), for a
// primitive that refused their layouts; with layouts=strict, OPC_NOT_IMPLEMENTED instead.
void densify(Call& call, const std::vector<Tensor*>& inputs, const char* why);
// Copies (and converts) src into dst with a reorder, each in its own layout.
void reorder_into(const Tensor& src, const Tensor& dst);
void reorder_into(const dnnl::memory::desc& src_md, const Tensor& src, const dnnl::memory::desc& dst_md, const Tensor& dst);

// Creates a primitive descriptor with make(); when oneDNN refuses the layouts (unimplemented),
// densifies `inputs` and tries once more. make() builds its descriptors from the tensors anew.
template <class Make>
auto with_dense_fallback(Call& call, const std::vector<Tensor*>& inputs, Make&& make) -> decltype(make()) {
  try {
    return make();
  } catch (const dnnl::error& e) {
    // unimplemented: a primitive refused a layout; invalid_arguments: a descriptor was refused.
    if (e.status != dnnl_unimplemented && e.status != dnnl_invalid_arguments) throw;
    bool all_contiguous = true;
    for (const Tensor* t : inputs) all_contiguous = all_contiguous && is_contiguous(*t);
    if (all_contiguous) throw;
  }
  densify(call, inputs, "the primitive refused the argument's layout");
  return make();
}

// ---- the entry points ------------------------------------------------------------------------

using Body = void (*)(Call&);
// Probes whether the op's primitive is implemented for a dtype on this CPU (a tiny descriptor).
using Probe = bool (*)(dt);

struct OpDef {
  const char* name;  // "aten::relu"
  Body forward;
  Body backward;  // nullptr: none
  Probe probe;
};

std::vector<OpDef> eltwise_ops();
std::vector<OpDef> binary_ops();
std::vector<OpDef> reduction_ops();
std::vector<OpDef> matmul_ops();
std::vector<OpDef> conv_ops();
std::vector<OpDef> pool_ops();
std::vector<OpDef> norm_ops();
std::vector<OpDef> softmax_ops();
std::vector<OpDef> copy_ops();

// ---- template definitions --------------------------------------------------------------------

void set_call_error(const OpcCallContext* ctx, const std::string& message);
OpcStatus status_of(const dnnl::error& e);

template <class Body>
OpcStatus guarded(const OpcCallContext* ctx, Body&& body) {
  try {
    body();
    return OPC_OK;
  } catch (const KernelError& e) {
    set_call_error(ctx, e.what());
    return e.status;
  } catch (const dnnl::error& e) {
    set_call_error(ctx, std::string("oneDNN: ") + e.what() + " (status " + std::to_string(e.status) + ")");
    return status_of(e);
  } catch (const std::bad_alloc&) {
    set_call_error(ctx, "out of memory");
    return OPC_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    set_call_error(ctx, e.what());
    return OPC_ERROR;
  } catch (...) {
    set_call_error(ctx, "unknown exception");
    return OPC_ERROR;
  }
}

}  // namespace opc_onednn
