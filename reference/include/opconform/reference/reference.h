// The bundled reference registry: PyTorch's Core ATen operators (namespace "aten", the same
// names, overloads and schema strings; reference/data/core_aten_opset.tsv) with reference CPU
// kernels written for clarity, fake kernels, autograd formulas, vmap rules and sample specs.
//
//   Registry registry;
//   auto reference = register_reference_ops(registry);   // keep it: its death undoes it all
//   OperatorHandle add = registry.get("aten::add.Tensor");
//
// Each family is one source file with one explicit registration function; register_reference_ops
// calls them all on one Library. What is registered is listed by reference_op_infos(registry)
// (op_info.h), read from the ops' data in that registry.
#pragma once

#include <memory>

#include "opconform/core/library.h"
#include "opconform/core/registry.h"
#include "opconform/reference/op_info.h"

namespace opconform::reference {

void register_elementwise_unary(Library& lib);   // abs, exp, sin, ... (one input, one output)
void register_elementwise_binary(Library& lib);  // add, mul, div, pow, comparisons, logical, bitwise
void register_activation(Library& lib);          // relu, gelu, clamp, softmax, ...
void register_normalization(Library& lib);       // layer, group and batch norm, dropout
void register_reduction(Library& lib);           // sum, mean, prod, amax, var, any, cumsum, ...
void register_linear_algebra(Library& lib);      // mm, bmm, addmm
void register_convolution_pooling(Library& lib); // convolution, max/avg pooling
void register_resampling(Library& lib);          // reflection and replication padding, nearest upsampling
void register_indexing(Library& lib);            // gather, scatter, index, embedding, ...
void register_shape(Library& lib);               // views, cat, flip, repeat, pad, copies
void register_creation(Library& lib);            // full, arange, empty, random
void register_sorting(Library& lib);             // sort, topk, nonzero
void register_distance(Library& lib);            // _cdist_forward, _pdist_forward
void register_grid_sampling(Library& lib);       // grid_sampler_2d
void register_embedding_bag(Library& lib);       // _embedding_bag
void register_fft(Library& lib);                 // _fft_r2c, _fft_c2r
// PyTorch's autocast lists (CPU and CUDA) on the ops above that they name (autocast_rules.cpp).
void register_autocast_rules(Library& lib);

// The Library ("aten", DEF) with every family, plus the builtin fallbacks (autograd, fake, vmap,
// dispatch modes) the registry needs. Dropping it undoes every registration.
struct ReferenceRegistration {
  std::unique_ptr<Library> library;
  RegistrationHandle fallbacks;
};
ReferenceRegistration register_reference_ops(Registry& registry, bool install_fallbacks = true);

}  // namespace opconform::reference
