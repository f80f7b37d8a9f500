// The cuBLAS + cuDNN adapter: an opconform plugin (opconform/plugin.h) that implements reference
// (Core ATen) operators on CUDA the way a framework integration calls these libraries: GEMMs
// through cuBLAS (cuda_libs_blas.cpp), convolutions (cuda_libs_conv.cpp), softmax, activations,
// pooling and batch norm inference through cuDNN's legacy API (cuda_libs_dnn.cpp). README.md
// says what maps to what and what is OPC_NOT_IMPLEMENTED.
//
// Built twice from these sources: libopconform_cuda_libs_plugin.so (IEEE float32) and
// libopconform_cuda_libs_tf32_plugin.so (OPCONFORM_CUDA_LIBS_TF32: float32 GEMMs and convolutions
// may use TF32 tensor ops, as PyTorch's allow_tf32 flags do).
//
// Registration touches no CUDA API: the ops are registered whether or not a GPU is present (the
// harness plans CUDA cases only where one is), and handles are made at the first call (Note
// [Handles]). Only OPC_KERNEL_CUDA kernels and backward formulas are registered; declare_op's
// OPC_OP_REFERENCE_FAKE makes the reference's fake kernel the op's, so the outputs' sizes, strides
// and dtypes are held to PyTorch's meta semantics. Every entry point catches everything.
#include <cstdio>
#include <string>

#include "cuda_libs.h"

namespace opc_cudalibs {
namespace {

const std::vector<OpDef>& all_ops() {
  static const std::vector<OpDef> ops = [] {
    std::vector<OpDef> all;
    for (auto family : {blas_ops, conv_ops, dnn_ops})
      for (const OpDef& d : family()) all.push_back(d);
    return all;
  }();
  return ops;
}

OpcStatus forward_entry(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args, OpcValue* returns,
                        int64_t num_returns, void* user_data) {
  const OpDef* def = static_cast<const OpDef*>(user_data);
  return guarded(ctx, [&] {
    if (ctx->is_fake) throw KernelError(OPC_ERROR, "called as a fake kernel (the reference's answers fake calls)");
    Call call(ctx, args, num_args, returns, num_returns);
    def->forward(call);
  });
}

// A backward formula returns one value per schema argument (num_returns of them).
OpcStatus backward_entry(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args, OpcValue* returns,
                         int64_t num_returns, void* user_data) {
  const OpDef* def = static_cast<const OpDef*>(user_data);
  return guarded(ctx, [&] {
    Call call(ctx, args, num_args, returns, num_returns);
    def->backward(call);
  });
}

void set_error(const OpcRegistrar* r, const std::string& message) {
  if (OPC_HAS_FIELD(r, OpcRegistrar, set_error) && r->set_error != nullptr) r->set_error(r->host, message.c_str());
}

OpcStatus register_one(const OpcRegistrar* r, const OpDef& def) {
  if (!r->host_knows(r->host, def.name)) return OPC_OK;  // a reference without the op: nothing to check it with
  const std::vector<DLDataType>& dtypes = float_dtypes();
  void* user_data = const_cast<OpDef*>(&def);
  OpcStatus st = r->impl(r->host, def.name, OPC_KERNEL_CUDA, forward_entry, user_data);
  if (st == OPC_OK) st = r->declare_dtypes(r->host, def.name, dtypes.data(), static_cast<int64_t>(dtypes.size()));
  if (st == OPC_OK && def.backward != nullptr) st = r->impl(r->host, def.name, OPC_KERNEL_BACKWARD, backward_entry, user_data);
  if (st != OPC_OK) return st;
  if (!OPC_HAS_FIELD(r, OpcRegistrar, declare_op) || r->declare_op == nullptr) {
    set_error(r, "cuda_libs needs a host with ABI 1.1's declare_op (the reference's fake kernels)");
    return OPC_ABI_MISMATCH;
  }
  OpcOpSpec spec{};
  spec.version = OPC_PLUGIN_ABI_VERSION_1;
  spec.size = sizeof(OpcOpSpec);
  spec.op_name = def.name;
  spec.dtypes = dtypes.data();
  spec.num_dtypes = static_cast<int64_t>(dtypes.size());
  spec.flags = OPC_OP_REFERENCE_FAKE;
  return r->declare_op(r->host, &spec);
}

OpcStatus register_ops(const OpcRegistrar* r) {
  try {
    for (const OpDef& def : all_ops()) {
      const OpcStatus st = register_one(r, def);
      if (st != OPC_OK) return st;
    }
    return OPC_OK;
  } catch (const std::exception& e) {
    set_error(r, std::string("cuda_libs: ") + e.what());
    return OPC_ERROR;
  } catch (...) {
    set_error(r, "cuda_libs: unknown exception");
    return OPC_ERROR;
  }
}

char version_buffer[128];

// "cuBLAS 13.0.0, cuDNN 9.19.0, IEEE float32": the libraries actually loaded (neither query needs
// a GPU) and the variant.
void fill_version() {
  int major = 0, minor = 0, patch = 0;
  cublasGetProperty(MAJOR_VERSION, &major);
  cublasGetProperty(MINOR_VERSION, &minor);
  cublasGetProperty(PATCH_LEVEL, &patch);
  const size_t dnn = cudnnGetVersion();  // major * 10000 + minor * 100 + patch in cuDNN 9
  std::snprintf(version_buffer, sizeof version_buffer, "cuBLAS %d.%d.%d, cuDNN %zu.%zu.%zu, %s", major, minor, patch,
                dnn / 10000, dnn / 100 % 100, dnn % 100, tf32_enabled() ? "TF32 float32 math" : "IEEE float32 math");
}

#ifdef OPCONFORM_CUDA_LIBS_TF32
constexpr const char* kName = "cuda-libs-tf32";
#else
constexpr const char* kName = "cuda-libs";
#endif

const OpcPlugin kPlugin = {OPC_PLUGIN_ABI_VERSION_1, sizeof(OpcPlugin), kName, version_buffer, register_ops, 0, nullptr, 0};

}  // namespace
}  // namespace opc_cudalibs

extern "C" OPC_EXPORT const OpcPlugin* opconform_plugin(void) {
  if (opc_cudalibs::version_buffer[0] == '\0') opc_cudalibs::fill_version();
  return &opc_cudalibs::kPlugin;
}
