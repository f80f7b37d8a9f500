// The reference's autocast rules: PyTorch 2.11's own lists (aten/src/ATen/autocast_mode.cpp for
// AutocastCPU, the AT_FORALL_* lists of autocast_mode.h for AutocastCUDA), restricted to the
// overloads the reference defines. PyTorch registers most of its entries on composite ops
// (conv2d, linear, layer_norm, softmax.int, upsample_nearest2d without .vec, ...) that
// decompose before Core ATen; those have no counterpart here. A KERNEL(op) entry names the
// default overload only, so `pow` counts with its three overloads and `sum` with two.
#include "opconform/core/autocast.h"
#include "opconform/core/error.h"
#include "opconform/reference/reference.h"

namespace opconform::reference {
namespace {

struct AutocastRule {
  const char* op;
  DeviceType device;
  CastPolicy policy;
};

constexpr DeviceType kCpu = DeviceType::CPU, kCuda = DeviceType::CUDA;
constexpr CastPolicy kLower = CastPolicy::LowerPrecisionFp, kFp32 = CastPolicy::Fp32,
                     kSetDtype = CastPolicy::Fp32SetOptDtype, kPromote = CastPolicy::Promote;

const AutocastRule kRules[] = {
    // AutocastCPU: lower_precision_fp, fp32, promote.
    {"aten::mm", kCpu, kLower}, {"aten::bmm", kCpu, kLower}, {"aten::addmm", kCpu, kLower},
    {"aten::prod", kCpu, kFp32}, {"aten::prod.dim_int", kCpu, kFp32},
    {"aten::reflection_pad1d", kCpu, kFp32}, {"aten::reflection_pad2d", kCpu, kFp32},
    {"aten::replication_pad2d", kCpu, kFp32}, {"aten::replication_pad3d", kCpu, kFp32},
    {"aten::cat", kCpu, kPromote},
    // AutocastCUDA: AT_FORALL_LOWER_PRECISION_FP, AT_FORALL_FP32, AT_FORALL_FP32_SET_OPT_DTYPE,
    // AT_FORALL_PROMOTE.
    {"aten::convolution", kCuda, kLower}, {"aten::mm", kCuda, kLower}, {"aten::bmm", kCuda, kLower},
    {"aten::addmm", kCuda, kLower},
    {"aten::acos", kCuda, kFp32}, {"aten::asin", kCuda, kFp32}, {"aten::cosh", kCuda, kFp32},
    {"aten::exp", kCuda, kFp32}, {"aten::expm1", kCuda, kFp32}, {"aten::log", kCuda, kFp32},
    {"aten::log10", kCuda, kFp32}, {"aten::log2", kCuda, kFp32}, {"aten::log1p", kCuda, kFp32},
    {"aten::reciprocal", kCuda, kFp32}, {"aten::rsqrt", kCuda, kFp32}, {"aten::sinh", kCuda, kFp32},
    {"aten::tan", kCuda, kFp32}, {"aten::pow.Tensor_Scalar", kCuda, kFp32}, {"aten::pow.Tensor_Tensor", kCuda, kFp32},
    {"aten::pow.Scalar", kCuda, kFp32}, {"aten::native_layer_norm", kCuda, kFp32},
    {"aten::prod", kCuda, kSetDtype}, {"aten::prod.dim_int", kCuda, kSetDtype}, {"aten::cumsum", kCuda, kSetDtype},
    {"aten::sum", kCuda, kSetDtype}, {"aten::sum.dim_IntList", kCuda, kSetDtype},
    {"aten::atan2", kCuda, kPromote}, {"aten::index_put", kCuda, kPromote}, {"aten::scatter_add", kCuda, kPromote},
};

}  // namespace

void register_autocast_rules(Library& lib) {
  for (const AutocastRule& rule : kRules) {
    const auto op = lib.registry().find(rule.op);
    OPCONFORM_CHECK(op && op->has_schema(), ErrorCode::kRegistration, "autocast rule for '", rule.op,
                    "': the reference does not define it");
    lib.impl(rule.op, make_autocast_kernel(rule.device, rule.policy), autocast_key(rule.device));
  }
}

}  // namespace opconform::reference
