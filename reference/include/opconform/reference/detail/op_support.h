// Pieces many reference operators share: fake kernels of elementwise ops, the elementwise vmap
// rule, setup_context functions that save the inputs, dtype lists.
#pragma once

#include <string>
#include <vector>

#include "opconform/core/autograd.h"
#include "opconform/core/dtype.h"
#include "opconform/core/registry.h"
#include "opconform/core/vmap.h"

namespace opconform::reference::detail {

// dtype lists for OpBuilder::dtypes.
inline const std::vector<DType> kFloating = {DType::Float16, DType::BFloat16, DType::Float32, DType::Float64};
inline const std::vector<DType> kFloatingAndComplex = {DType::Float16,   DType::BFloat16,  DType::Float32,
                                                       DType::Float64,   DType::Complex64, DType::Complex128};
inline const std::vector<DType> kIntegral = {DType::UInt8, DType::Int8, DType::Int16, DType::Int32, DType::Int64};
inline const std::vector<DType> kIntegralAndBool = {DType::Bool,  DType::UInt8, DType::Int8,
                                                    DType::Int16, DType::Int32, DType::Int64};
inline const std::vector<DType> kReal = {DType::UInt8,   DType::Int8,     DType::Int16,   DType::Int32,  DType::Int64,
                                         DType::Float16, DType::BFloat16, DType::Float32, DType::Float64};
inline const std::vector<DType> kAll = {DType::Bool,     DType::UInt8,   DType::Int8,    DType::Int16,
                                        DType::Int32,    DType::Int64,   DType::Float16, DType::BFloat16,
                                        DType::Float32,  DType::Float64, DType::Complex64, DType::Complex128};
std::vector<DType> concat_dtypes(std::vector<DType> a, const std::vector<DType>& b);

// The vmap rule of an elementwise op over every tensor argument: batch dims go to the front,
// lower-rank batched tensors get size-1 dims after the batch so broadcasting lines up, and the op
// runs once on the physical tensors (through the dispatcher, so nested vmap works). Outputs
// carry the batch at dim 0.
VmapRule elementwise_vmap_rule(Registry& registry, std::string op);

// setup_context that saves the arguments that are tensors (in schema order; None skipped).
void save_tensor_inputs(autograd::AutogradContext& ctx, const Stack& inputs, const Stack& outputs);
// setup_context that saves the tensor inputs, then the tensor outputs.
void save_inputs_and_outputs(autograd::AutogradContext& ctx, const Stack& inputs, const Stack& outputs);

// Wraps a possibly negative dim into [0, rank) (rank 0 accepts -1 and 0), naming op and argument
// in the error.
int64_t wrap_dim(int64_t dim, int64_t rank, std::string_view op, std::string_view arg = "dim");

}  // namespace opconform::reference::detail
