// SampleDraw and SampleBuilder: how an operator builds its own sample arguments where its input
// constraints cannot say what is valid (view's sizes multiply to numel, cat's tensors agree but on
// one dim, gather's indices are in range). A builder is part of the operator's data (op_data.h);
// conformance/generate.h implements SampleDraw over RapidCheck, so a built sample shrinks and
// replays like a generated one. This header has no RapidCheck in it: whoever defines an op (the
// reference, a plugin adapter, a test) writes builders against this interface alone.
//
//   data.sample_builder = [](SampleDraw& draw) {
//     auto shape = draw.shape(0, 3);
//     Tensor self = draw.tensor(shape, draw.dtype());
//     return Stack{IValue(self), IValue(my_factorization(draw, shape))};
//   };
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "opconform/core/device.h"
#include "opconform/core/dtype.h"
#include "opconform/core/input_constraints.h"
#include "opconform/core/ivalue.h"
#include "opconform/core/tensor.h"

namespace opconform {

// The choices a SampleBuilder draws. Every draw goes through the generator, so a failing sample
// shrinks (integers toward the value closest to 0 within range, coins toward false, tensors toward
// contiguous / simple values; one draw at a time, the others kept where the builder asks the same
// again), and a sample is replayed from its recorded draws. A draw that cannot be satisfied
// (lo > hi, ...) throws Error(kInvalidArgument).
class SampleDraw {
 public:
  virtual ~SampleDraw() = default;
  virtual int64_t integer(int64_t lo, int64_t hi) = 0;  // inclusive
  virtual bool coin(int percent_true = 50) = 0;
  virtual double real(double lo, double hi) = 0;  // shrinks toward the value closest to 0
  // One of the sample dtypes (the generation spec's, else the op's declared ones, else
  // float32/float64), or of `allowed` when non-empty (intersected with the spec's when that is
  // non-empty, else allowed itself).
  virtual DType dtype(const std::vector<DType>& allowed = {}) = 0;
  // Sizes of rank in [min_rank, max_rank] (max_rank capped by the spec's, never below min_rank;
  // min_rank 1 when the spec excludes scalars and max_rank allows it), each in
  // [min_size, max(min_size, the spec's max_dim_size)]; with allow_empty and the spec's
  // include_empty, sometimes one size 0. In a large-tier sample, the first shape drawn has one
  // large size.
  virtual std::vector<int64_t> shape(int min_rank, int max_rank, int64_t min_size = 1, bool allow_empty = true) = 0;
  // One size in [1, the spec's max_dim_size]; with allow_empty and the spec's include_empty,
  // sometimes 0 (one draw in ten). Never large.
  virtual int64_t size(bool allow_empty = true) = 0;
  // A tensor with these sizes and dtype, values per `values` (ordinary / zeros / special values,
  // as the generic generator does), on the spec's device, in any layout the spec allows
  // (contiguous, offset, sliced, transposed, expanded unless `mutable_input`).
  virtual Tensor tensor(const std::vector<int64_t>& sizes, DType dtype, const ValueConstraint& values = {},
                        bool mutable_input = false) = 0;
  // A value for a Device argument: the sample's device, another of the spec's, or cpu.
  virtual Device device_value() = 0;
  // An int64 tensor of these sizes with values in [lo, hi] (indices), any layout the spec allows.
  // lo > hi is accepted only for an empty tensor.
  virtual Tensor index_tensor(const std::vector<int64_t>& sizes, int64_t lo, int64_t hi) = 0;
};

// Builds one sample's arguments (schema order, every argument present) from draws. Must be a pure
// function of the draws (it is re-run to replay a sample).
using SampleBuilder = std::function<Stack(SampleDraw& draw)>;

}  // namespace opconform
