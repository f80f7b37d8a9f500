// The oneDNN 2.6 adapter: an opconform plugin (opconform/plugin.h) that implements reference
// (Core ATen) operators with oneDNN's CPU primitives, the way a framework integration maps them
// (PyTorch's mkldnn path, ONNX Runtime's DNNL provider): eltwise, binary, reduction, matmul, convolution and
// deconvolution, pooling, layer and batch normalization, softmax, concat and reorder. Backward
// primitives serve as OPC_KERNEL_BACKWARD formulas where oneDNN has them. docs/onednn-conformance.md
// lists where the results disagree with the reference, and why.
//
// Registration: for every op of the families (onednn_<family>.cpp) that the host knows, the plugin
// probes a tiny primitive descriptor per candidate dtype (float32, bfloat16) and declares the ones
// this CPU and this oneDNN implement (bf16 needs AVX-512 in 2.6; option max_cpu_isa=avx2 shows the
// op without it). It registers no fake kernels: declare_op (ABI 1.1) says the reference's fake
// kernel is the op's, so the plugin's real layouts are judged against PyTorch's meta semantics.
//
// Note [Strided inputs]: a kernel builds each input's memory descriptor from the tensor's own
// sizes and strides (transposed, sliced, channels-last and expanded stride-0 tensors are all
// descriptors oneDNN accepts; a 0-d tensor is {1}). Where oneDNN refuses the descriptor
// (overlapping strides) or a primitive refuses the layout (dnnl_unimplemented), the input is
// copied into a dense row-major tensor first (input_md / with_dense_fallback in onednn_memory.cpp)
// and the copy is counted per op. Option layouts=strict turns the copy off: such calls are then
// OPC_NOT_IMPLEMENTED, which shows which primitives refuse which layouts. Outputs are allocated by
// the host in PyTorch's layout for the op and written through a descriptor of that layout, or by a
// reorder from the layout the primitive chose (convolution's format_tag::any).
//
// Every entry point catches everything (guarded): no exception crosses the C ABI.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "onednn_memory.h"

namespace opc_onednn {
namespace {

// The ops, in one list that lives as long as the library (user_data points into it).
const std::vector<OpDef>& all_ops() {
  static const std::vector<OpDef> ops = [] {
    std::vector<OpDef> all;
    for (auto family : {eltwise_ops, binary_ops, reduction_ops, matmul_ops, conv_ops, pool_ops, norm_ops,
                        softmax_ops, copy_ops}) {
      for (const OpDef& d : family()) all.push_back(d);
    }
    return all;
  }();
  return ops;
}

OpcStatus forward_entry(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args, OpcValue* returns,
                        int64_t num_returns, void* user_data) {
  const OpDef* def = static_cast<const OpDef*>(user_data);
  return guarded(ctx, [&] {
    Call call(ctx, args, num_args, returns, num_returns);
    def->forward(call);
  });
}

// A backward formula's returns are one per schema argument: num_returns tells a formula where the
// forward's returns and the gradients start in its arguments.
OpcStatus backward_entry(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args, OpcValue* returns,
                         int64_t num_returns, void* user_data) {
  const OpDef* def = static_cast<const OpDef*>(user_data);
  return guarded(ctx, [&] {
    Call call(ctx, args, num_args, returns, num_returns);
    def->backward(call);
  });
}

// ---- options ---------------------------------------------------------------------------------

const OpcOptionSpec kOptions[] = {
    {"max_cpu_isa", "cap oneDNN's ISA (avx2, avx512_core, avx512_core_bf16, all): bf16 is emulated on avx512_core, refused on avx2",
     "all", 0, 0},
    {"layouts", "copy: densify inputs whose layout oneDNN refuses (Note [Strided inputs]); strict: OPC_NOT_IMPLEMENTED instead",
     "copy", 0, 0},
    {"fpmath", "oneDNN's default fpmath mode: strict, or bf16 (float32 primitives may compute in bfloat16)", "strict", 0, 0},
};

char version_buffer[160];

const char* isa_name(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::sse41: return "sse41";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    default: return "all";
  }
}

// "oneDNN 2.6.3", plus the ISA in effect once register_ops has applied max_cpu_isa (reading the ISA
// earlier would fix it: set_max_cpu_isa fails after the first read).
void fill_version(bool with_isa) {
  const dnnl_version_t* v = dnnl_version();
  std::snprintf(version_buffer, sizeof version_buffer, "oneDNN %d.%d.%d%s%s", v->major, v->minor, v->patch,
                with_isa ? " " : "", with_isa ? isa_name(dnnl::get_effective_cpu_isa()) : "");
}

bool set_error(const OpcRegistrar* r, const std::string& message) {
  if (OPC_HAS_FIELD(r, OpcRegistrar, set_error) && r->set_error != nullptr) r->set_error(r->host, message.c_str());
  return false;
}

// Applies the options; false (with the registrar's error set) on a bad value.
bool apply_options(const OpcRegistrar* r) {
  if (!OPC_HAS_FIELD(r, OpcRegistrar, num_options)) return true;
  for (int64_t i = 0; i < r->num_options; ++i) {
    const std::string name = r->options[i].name, value = r->options[i].value;
    if (name == "max_cpu_isa") {
      const std::pair<const char*, dnnl::cpu_isa> isas[] = {
          {"all", dnnl::cpu_isa::all}, {"avx2", dnnl::cpu_isa::avx2}, {"avx512_core", dnnl::cpu_isa::avx512_core},
          {"avx512_core_vnni", dnnl::cpu_isa::avx512_core_vnni}, {"avx512_core_bf16", dnnl::cpu_isa::avx512_core_bf16}};
      bool found = false;
      for (const auto& [n, isa] : isas) {
        if (value != n) continue;
        found = true;
        // Must precede every primitive; it fails once the ISA has been read.
        if (dnnl::set_max_cpu_isa(isa) != dnnl::status::success) return set_error(r, "max_cpu_isa: oneDNN refused " + value);
      }
      if (!found) return set_error(r, "max_cpu_isa: unknown value '" + value + "'");
    } else if (name == "layouts") {
      if (value != "copy" && value != "strict") return set_error(r, "layouts: 'copy' or 'strict', not '" + value + "'");
      settings().strict_layouts = value == "strict";
    } else if (name == "fpmath") {
      if (value != "strict" && value != "bf16") return set_error(r, "fpmath: 'strict' or 'bf16', not '" + value + "'");
      dnnl::set_default_fpmath_mode(value == "bf16" ? dnnl::fpmath_mode::bf16 : dnnl::fpmath_mode::strict);
    }
  }
  return true;
}

// The dtypes the op's primitive is implemented for here.
std::vector<DLDataType> probe_dtypes(const OpDef& def) {
  std::vector<DLDataType> dtypes;
  for (dt t : {dt::f32, dt::bf16}) {
    try {
      if (def.probe(t)) dtypes.push_back(dl_type(t));
    } catch (const std::exception&) {
      // not implemented for t (dnnl::error) or a probe that failed otherwise: not declared
    }
  }
  return dtypes;
}

// "My fake kernel is the reference's" (ABI 1.1). The host side may not have it yet: a failing
// status is ignored, so the op is still checked (without fake-tensor checks).
void declare_reference_fake(const OpcRegistrar* r, const OpDef& def, const std::vector<DLDataType>& dtypes) {
  if (!OPC_HAS_FIELD(r, OpcRegistrar, declare_op) || r->declare_op == nullptr) return;
  OpcOpSpec spec{};
  spec.version = OPC_PLUGIN_ABI_VERSION_1;
  spec.size = sizeof(OpcOpSpec);
  spec.op_name = def.name;
  spec.dtypes = dtypes.data();
  spec.num_dtypes = static_cast<int64_t>(dtypes.size());
  spec.flags = OPC_OP_REFERENCE_FAKE;
  (void)r->declare_op(r->host, &spec);
}

OpcStatus register_one(const OpcRegistrar* r, const OpDef& def) {
  if (!r->host_knows(r->host, def.name)) return OPC_OK;
  const std::vector<DLDataType> dtypes = probe_dtypes(def);
  if (dtypes.empty()) return OPC_OK;  // nothing this CPU and oneDNN implement
  void* user_data = const_cast<OpDef*>(&def);
  OpcStatus st = r->impl(r->host, def.name, OPC_KERNEL_CPU, forward_entry, user_data);
  if (st == OPC_OK) st = r->declare_dtypes(r->host, def.name, dtypes.data(), static_cast<int64_t>(dtypes.size()));
  if (st == OPC_OK && def.backward != nullptr) st = r->impl(r->host, def.name, OPC_KERNEL_BACKWARD, backward_entry, user_data);
  if (st == OPC_OK) declare_reference_fake(r, def, dtypes);
  return st;
}

OpcStatus register_ops(const OpcRegistrar* r) {
  try {
    if (!apply_options(r)) return OPC_INVALID_ARGUMENT;
    for (const OpDef& def : all_ops()) {
      const OpcStatus st = register_one(r, def);
      if (st != OPC_OK) return st;
    }
    fill_version(true);
    return OPC_OK;
  } catch (const std::exception& e) {
    set_error(r, std::string("oneDNN adapter: ") + e.what());
    return OPC_ERROR;
  } catch (...) {
    set_error(r, "oneDNN adapter: unknown exception");
    return OPC_ERROR;
  }
}

const OpcPlugin kPlugin = {OPC_PLUGIN_ABI_VERSION_1, sizeof(OpcPlugin), "onednn", version_buffer, register_ops, 0,
                           kOptions, sizeof kOptions / sizeof kOptions[0]};

}  // namespace
}  // namespace opc_onednn

extern "C" OPC_EXPORT const OpcPlugin* opconform_plugin(void) {
  if (opc_onednn::version_buffer[0] == '\0') opc_onednn::fill_version(false);
  return &opc_onednn::kPlugin;
}
