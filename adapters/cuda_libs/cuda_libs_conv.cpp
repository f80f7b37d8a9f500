// aten::convolution through cuDNN's legacy convolution API (cudnnConvolutionForward,
// ...BackwardData, ...BackwardFilter, ...BackwardBias; still in cuDNN 9, deprecated), 1-d to 3-d,
// grouped, strided, padded, dilated, plain and transposed, with its backward formula.
//
// Note [Convolution roles]: every call is phrased as one cross-correlation F of x [N, C, ...]
// with a filter w [K, C / g, ...] giving y [N, K, ...]. A plain convolution is F with x = input,
// y = output; its input gradient is F's backward data, its weight gradient F's backward filter.
// A transposed convolution is the backward data of the F whose y is its input and whose x is its
// output (its weight [C_in, C_out / g, ...] is exactly F's filter); its input gradient is then F's
// forward of the output gradient, and its weight gradient F's backward filter with x = the output
// gradient, dy = its input. A 1-d convolution is a 2-d one with a height of 1.
//
// Algorithms come from cuDNN's heuristics (cudnnGet*Algorithm_v7, no benchmarking), tried in
// order until one runs: a framework's deterministic choice without autotuning. Math types follow
// PyTorch: float32 uses CUDNN_FMA_MATH (no TF32) unless the _tf32 variant allows tensor ops,
// float16/bfloat16 use tensor ops with float32 compute, float64 the default.
#include <algorithm>
#include <functional>

#include "cuda_libs.h"

namespace opc_cudalibs {
namespace {

struct Geometry {
  DType dtype;
  Dims x, w, y;                          // F's x, filter and y sizes (4-d or 5-d)
  Dims pad, stride, dilation;            // per spatial dim
  int64_t groups;
};

class FilterDesc {
 public:
  FilterDesc(DType t, const Dims& dims) {
    std::vector<int> d;
    for (int64_t v : dims) d.push_back(to_int(v, "a filter size"));
    check_cudnn(cudnnCreateFilterDescriptor(&desc_), "cudnnCreateFilterDescriptor");
    const cudnnStatus_t st = cudnnSetFilterNdDescriptor(desc_, cudnn_type(t), CUDNN_TENSOR_NCHW, static_cast<int>(d.size()), d.data());
    if (st != CUDNN_STATUS_SUCCESS) {
      cudnnDestroyFilterDescriptor(desc_);
      desc_ = nullptr;
      check_cudnn(st, "cudnnSetFilterNdDescriptor " + shape_string(dims));
    }
  }
  ~FilterDesc() {
    if (desc_ != nullptr) cudnnDestroyFilterDescriptor(desc_);
  }
  FilterDesc(const FilterDesc&) = delete;
  FilterDesc& operator=(const FilterDesc&) = delete;
  cudnnFilterDescriptor_t get() const { return desc_; }

 private:
  cudnnFilterDescriptor_t desc_ = nullptr;
};

cudnnMathType_t math_type(DType t) {
  if (t == DType::f32) return tf32_enabled() ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH;
  if (t == DType::f16 || t == DType::bf16) return CUDNN_TENSOR_OP_MATH;
  return CUDNN_DEFAULT_MATH;
}

class ConvDesc {
 public:
  explicit ConvDesc(const Geometry& g) {
    std::vector<int> pad, stride, dil;
    for (size_t i = 0; i < g.pad.size(); ++i) {
      pad.push_back(to_int(g.pad[i], "padding"));
      stride.push_back(to_int(g.stride[i], "stride"));
      dil.push_back(to_int(g.dilation[i], "dilation"));
    }
    check_cudnn(cudnnCreateConvolutionDescriptor(&desc_), "cudnnCreateConvolutionDescriptor");
    try {
      // float16/bfloat16 accumulate in float32 (PyTorch's "pseudo half" configuration).
      check_cudnn(cudnnSetConvolutionNdDescriptor(desc_, static_cast<int>(pad.size()), pad.data(), stride.data(), dil.data(),
                                                  CUDNN_CROSS_CORRELATION, cudnn_type(compute_type(g.dtype))),
                  "cudnnSetConvolutionNdDescriptor");
      check_cudnn(cudnnSetConvolutionGroupCount(desc_, to_int(g.groups, "groups")), "cudnnSetConvolutionGroupCount");
      check_cudnn(cudnnSetConvolutionMathType(desc_, math_type(g.dtype)), "cudnnSetConvolutionMathType");
    } catch (...) {
      cudnnDestroyConvolutionDescriptor(desc_);
      throw;
    }
  }
  ~ConvDesc() { cudnnDestroyConvolutionDescriptor(desc_); }
  ConvDesc(const ConvDesc&) = delete;
  ConvDesc& operator=(const ConvDesc&) = delete;
  cudnnConvolutionDescriptor_t get() const { return desc_; }

 private:
  cudnnConvolutionDescriptor_t desc_ = nullptr;
};

// The descriptors of one F.
struct Descs {
  TensorDesc x, y;
  FilterDesc w;
  ConvDesc conv;
  explicit Descs(const Geometry& g) : x(g.dtype, g.x), y(g.dtype, g.y), w(g.dtype, g.w), conv(g) {}
};

// Tries cuDNN's candidates (best first) until one runs; the last failure when none does.
// `size` gives an algorithm's workspace size, `run` runs it.
template <class Perf, class Size, class Run>
void run_candidates(Call& call, const std::vector<Perf>& perf, int count, const char* what, Size&& size, Run&& run) {
  cudnnStatus_t last = CUDNN_STATUS_NOT_SUPPORTED;
  for (int i = 0; i < count; ++i) {
    if (perf[static_cast<size_t>(i)].status != CUDNN_STATUS_SUCCESS) continue;
    size_t bytes = 0;
    last = size(perf[static_cast<size_t>(i)].algo, &bytes);
    if (last != CUDNN_STATUS_SUCCESS) continue;
    void* ws = nullptr;
    try {
      ws = call.workspace(bytes);
    } catch (const KernelError&) {
      last = CUDNN_STATUS_ALLOC_FAILED;  // too large a workspace: the next candidate may need less
      continue;
    }
    last = run(perf[static_cast<size_t>(i)].algo, ws, bytes);
    if (last == CUDNN_STATUS_SUCCESS) {
      synchronize(what);
      return;
    }
  }
  check_cudnn(last, std::string(what) + " (no algorithm ran)");
}

constexpr int kMaxAlgos = 16;

// y = F(x, w).
void forward(Call& call, const Geometry& g, const Tensor& x, const Tensor& w, const Tensor& y) {
  CudnnLease h;
  Descs d(g);
  std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(kMaxAlgos);
  int count = 0;
  check_cudnn(cudnnGetConvolutionForwardAlgorithm_v7(h.get(), d.x.get(), d.w.get(), d.conv.get(), d.y.get(), kMaxAlgos,
                                                     &count, perf.data()),
              "cudnnGetConvolutionForwardAlgorithm_v7");
  const Blend one(1), zero(0);
  run_candidates(
      call, perf, count, "cudnnConvolutionForward",
      [&](cudnnConvolutionFwdAlgo_t a, size_t* bytes) {
        return cudnnGetConvolutionForwardWorkspaceSize(h.get(), d.x.get(), d.w.get(), d.conv.get(), d.y.get(), a, bytes);
      },
      [&](cudnnConvolutionFwdAlgo_t a, void* ws, size_t bytes) {
        return cudnnConvolutionForward(h.get(), one.for_type(g.dtype), d.x.get(), x.data, d.w.get(), w.data, d.conv.get(), a,
                                       ws, bytes, zero.for_type(g.dtype), d.y.get(), y.data);
      });
}

// dx = F's backward data of dy.
void backward_data(Call& call, const Geometry& g, const Tensor& w, const Tensor& dy, const Tensor& dx) {
  CudnnLease h;
  Descs d(g);
  std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perf(kMaxAlgos);
  int count = 0;
  check_cudnn(cudnnGetConvolutionBackwardDataAlgorithm_v7(h.get(), d.w.get(), d.y.get(), d.conv.get(), d.x.get(), kMaxAlgos,
                                                          &count, perf.data()),
              "cudnnGetConvolutionBackwardDataAlgorithm_v7");
  const Blend one(1), zero(0);
  run_candidates(
      call, perf, count, "cudnnConvolutionBackwardData",
      [&](cudnnConvolutionBwdDataAlgo_t a, size_t* bytes) {
        return cudnnGetConvolutionBackwardDataWorkspaceSize(h.get(), d.w.get(), d.y.get(), d.conv.get(), d.x.get(), a, bytes);
      },
      [&](cudnnConvolutionBwdDataAlgo_t a, void* ws, size_t bytes) {
        return cudnnConvolutionBackwardData(h.get(), one.for_type(g.dtype), d.w.get(), w.data, d.y.get(), dy.data,
                                            d.conv.get(), a, ws, bytes, zero.for_type(g.dtype), d.x.get(), dx.data);
      });
}

// dw = F's backward filter of x and dy.
void backward_filter(Call& call, const Geometry& g, const Tensor& x, const Tensor& dy, const Tensor& dw) {
  CudnnLease h;
  Descs d(g);
  std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perf(kMaxAlgos);
  int count = 0;
  check_cudnn(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h.get(), d.x.get(), d.y.get(), d.conv.get(), d.w.get(), kMaxAlgos,
                                                            &count, perf.data()),
              "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
  const Blend one(1), zero(0);
  run_candidates(
      call, perf, count, "cudnnConvolutionBackwardFilter",
      [&](cudnnConvolutionBwdFilterAlgo_t a, size_t* bytes) {
        return cudnnGetConvolutionBackwardFilterWorkspaceSize(h.get(), d.x.get(), d.y.get(), d.conv.get(), d.w.get(), a, bytes);
      },
      [&](cudnnConvolutionBwdFilterAlgo_t a, void* ws, size_t bytes) {
        return cudnnConvolutionBackwardFilter(h.get(), one.for_type(g.dtype), d.x.get(), x.data, d.y.get(), dy.data,
                                              d.conv.get(), a, ws, bytes, zero.for_type(g.dtype), d.w.get(), dw.data);
      });
}

// ---- the call's plan -------------------------------------------------------------------------

struct Plan {
  Tensor input, weight;
  bool has_bias = false;
  Tensor bias;
  bool transposed = false;
  Dims out_shape;  // the op's output
  Geometry g;      // F (Note [Convolution roles]), 1-d lifted to 2-d
};

Dims expand_list(const Dims& v, size_t n, const char* name, int64_t min) {
  Dims out = v.size() == 1 ? Dims(n, v[0]) : v;
  if (out.size() != n) invalid_argument(std::string("argument '") + name + "' must have 1 or " + std::to_string(n) +
                                        " elements, got " + shape_string(v));
  for (int64_t x : out)
    if (x < min) invalid_argument(std::string("argument '") + name + "' must be >= " + std::to_string(min) + ", got " +
                                  shape_string(v));
  return out;
}

// Inserts a height of 1 at dim 2 of a 1-d convolution's sizes (and 0 padding, 1 stride/dilation).
Dims lift(const Dims& d, int64_t value) {
  Dims out = d;
  out.insert(out.begin() + 2, value);
  return out;
}

// The checks and sizes of the reference's plan_convolution, then F.
Plan plan(Call& call) {
  Plan p;
  p.input = call.tensor(0, "input");
  p.weight = call.tensor(1, "weight");
  p.has_bias = !call.is_none(2);
  if (p.has_bias) p.bias = call.tensor(2, "bias");
  p.transposed = call.boolean(6, "transposed");
  const int64_t groups = call.integer(8, "groups");
  const Tensor &x = p.input, &w = p.weight;
  if (!is_float(x.dtype)) not_implemented(std::string("argument 'input' has dtype ") + dtype_name(x.dtype) +
                                          "; cuDNN convolutions here take float32, float16, bfloat16, float64");
  if (w.dtype != x.dtype || (p.has_bias && p.bias.dtype != x.dtype))
    invalid_argument("arguments 'weight' and 'bias' must have the dtype of 'input'");
  if (w.ndim() < 3 || x.ndim() != w.ndim())
    invalid_argument("argument 'input' " + shape_string(x.shape) + " and 'weight' " + shape_string(w.shape) +
                     " must have the same rank, at least 3");
  const size_t dims = static_cast<size_t>(x.ndim() - 2);
  if (dims > 3) not_implemented("cuDNN convolutions have at most 3 spatial dims");
  if (groups <= 0) invalid_argument("argument 'groups' must be positive");
  const Dims stride = expand_list(call.int_list(3, "stride"), dims, "stride", 1);
  const Dims padding = expand_list(call.int_list(4, "padding"), dims, "padding", 0);
  const Dims dilation = expand_list(call.int_list(5, "dilation"), dims, "dilation", 1);
  const Dims out_pad = expand_list(call.int_list(7, "output_padding"), dims, "output_padding", 0);
  const int64_t in_ch = x.size(1);
  int64_t out_ch = 0;
  if (!p.transposed) {
    if (w.size(1) * groups != in_ch || w.size(0) % groups != 0)
      invalid_argument("argument 'weight' " + shape_string(w.shape) + " with groups=" + std::to_string(groups) +
                       " does not fit 'input' " + shape_string(x.shape));
    out_ch = w.size(0);
  } else {
    if (w.size(0) != in_ch || in_ch % groups != 0)
      invalid_argument("argument 'weight' " + shape_string(w.shape) + " (transposed, groups=" + std::to_string(groups) +
                       ") does not fit 'input' " + shape_string(x.shape));
    out_ch = w.size(1) * groups;
  }
  if (p.has_bias && p.bias.shape != Dims{out_ch}) invalid_argument("argument 'bias' must have shape [" + std::to_string(out_ch) + "]");
  p.out_shape = {x.size(0), out_ch};
  for (size_t i = 0; i < dims; ++i) {
    const int64_t in = x.size(static_cast<int>(i) + 2), extent = dilation[i] * (w.size(static_cast<int>(i) + 2) - 1) + 1;
    int64_t out = 0;
    if (!p.transposed) {
      if (in + 2 * padding[i] < extent) invalid_argument("the padded input is smaller than the dilated kernel");
      out = (in + 2 * padding[i] - extent) / stride[i] + 1;
    } else {
      if (out_pad[i] >= stride[i] && out_pad[i] >= dilation[i])
        invalid_argument("argument 'output_padding' must be smaller than either stride or dilation");
      out = (in - 1) * stride[i] - 2 * padding[i] + extent + out_pad[i];
      if (out < 1) invalid_argument("the output size " + std::to_string(out) + " is too small");
      // cuDNN derives F's y from its x by the floor formula: an output_padding beyond the stride
      // (allowed when below the dilation) makes sizes it refuses.
      if ((out + 2 * padding[i] - extent) / stride[i] + 1 != in)
        not_implemented("cuDNN's backward data cannot give a transposed output_padding >= stride");
    }
    p.out_shape.push_back(out);
  }
  Geometry& g = p.g;
  g.dtype = x.dtype;
  g.groups = groups;
  g.x = p.transposed ? p.out_shape : x.shape;
  g.y = p.transposed ? x.shape : p.out_shape;
  g.w = w.shape;
  g.pad = padding;
  g.stride = stride;
  g.dilation = dilation;
  if (dims == 1) {
    g.x = lift(g.x, 1), g.y = lift(g.y, 1), g.w = lift(g.w, 1);
    g.pad.insert(g.pad.begin(), 0), g.stride.insert(g.stride.begin(), 1), g.dilation.insert(g.dilation.begin(), 1);
  }
  return p;
}

// A tensor of F's sizes over t's (contiguous) memory.
Tensor as(const Tensor& t, const Dims& sizes) { return t.reshaped_contiguous(sizes); }

// Whether F has no multiply at all (an empty batch, no channels, a zero-size kernel): cuDNN
// refuses such sizes, and every output is 0 (plus the bias).
bool no_products(const Geometry& g) {
  auto numel = [](const Dims& d) {
    int64_t n = 1;
    for (int64_t v : d) n *= v;
    return n;
  };
  return numel(g.x) == 0 || numel(g.w) == 0 || numel(g.y) == 0;
}

// bias broadcast over [N, K, ...] added to out.
void add_bias(Call& call, const Plan& p, const Tensor& out) {
  const Tensor bias = contiguous(call, p.bias);  // a strided bias (a slice) is copied
  CudnnLease h;
  Dims bias_dims(p.g.y.size(), 1);
  bias_dims[1] = p.out_shape[1];
  TensorDesc bias_desc(p.g.dtype, bias_dims);
  const Dims out_dims = p.transposed ? p.g.x : p.g.y;
  TensorDesc out_desc(p.g.dtype, out_dims);
  const Blend one(1);
  check_cudnn(cudnnAddTensor(h.get(), one.for_type(p.g.dtype), bias_desc.get(), bias.data, one.for_type(p.g.dtype),
                             out_desc.get(), out.data),
              "cudnnAddTensor (bias)");
  synchronize("cudnnAddTensor (bias)");
}

void convolution(Call& call) {
  Plan p = plan(call);
  const Tensor out = call.output(0, p.g.dtype, p.out_shape);
  if (out.numel() == 0) return;
  if (no_products(p.g)) {
    fill(out, 0);
  } else {
    const Tensor x = contiguous(call, p.input), w = contiguous(call, p.weight);
    if (!p.transposed) forward(call, p.g, as(x, p.g.x), as(w, p.g.w), as(out, p.g.y));
    else backward_data(call, p.g, as(w, p.g.w), as(x, p.g.y), as(out, p.g.x));
  }
  if (p.has_bias) add_bias(call, p, out);
  synchronize("convolution");
}

// [input, weight, bias, stride, padding, dilation, transposed, output_padding, groups, result,
//  grad_output] -> one gradient per argument (input, weight, bias; none for the rest).
void convolution_backward(Call& call) {
  Plan p = plan(call);
  const Tensor grad = contiguous(call, call.tensor(10, "grad_output"));
  if (grad.shape != p.out_shape) invalid_argument("'grad_output' must have the output's shape " + shape_string(p.out_shape));
  const Tensor gx = call.output(0, p.g.dtype, p.input.shape), gw = call.output(1, p.g.dtype, p.weight.shape);
  const bool empty = no_products(p.g);
  if (empty) {
    fill(gx, 0);
    fill(gw, 0);
  } else {
    const Tensor x = contiguous(call, p.input), w = contiguous(call, p.weight);
    if (!p.transposed) {
      backward_data(call, p.g, as(w, p.g.w), as(grad, p.g.y), as(gx, p.g.x));
      backward_filter(call, p.g, as(x, p.g.x), as(grad, p.g.y), as(gw, p.g.w));
    } else {
      forward(call, p.g, as(grad, p.g.x), as(w, p.g.w), as(gx, p.g.y));
      backward_filter(call, p.g, as(grad, p.g.x), as(x, p.g.y), as(gw, p.g.w));
    }
  }
  if (p.has_bias) {
    const Tensor gb = call.output(2, p.g.dtype, p.bias.shape);
    if (grad.numel() == 0) {
      fill(gb, 0);
    } else {
      CudnnLease h;
      Dims bias_dims(p.g.y.size(), 1);
      bias_dims[1] = p.out_shape[1];
      TensorDesc db(p.g.dtype, bias_dims), dy(p.g.dtype, p.transposed ? p.g.x : p.g.y);
      const Blend one(1), zero(0);
      check_cudnn(cudnnConvolutionBackwardBias(h.get(), one.for_type(p.g.dtype), dy.get(), grad.data, zero.for_type(p.g.dtype),
                                               db.get(), gb.data),
                  "cudnnConvolutionBackwardBias");
    }
  }
  synchronize("convolution backward");
}

}  // namespace

std::vector<OpDef> conv_ops() { return {{"aten::convolution", convolution, convolution_backward}}; }

}  // namespace opc_cudalibs
