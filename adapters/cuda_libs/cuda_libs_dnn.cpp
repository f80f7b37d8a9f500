// The rest of the cuDNN ops, through its legacy API (cuDNN 9 keeps it, deprecated):
//   aten::_softmax, aten::_log_softmax   cudnnSoftmaxForward (ACCURATE / LOG, CHANNEL mode over
//                                        [outer, dim, inner, 1]); backward: cudnnSoftmaxBackward
//   aten::relu, sigmoid, tanh, elu       cudnnActivationForward / ...Backward (NaN propagated)
//   aten::avg_pool2d                     cudnnPoolingForward / ...Backward, AVERAGE_COUNT_{IN,EX}CLUDE_PADDING
//   aten::max_pool2d_with_indices        cudnnPoolingForward (MAX_DETERMINISTIC) for the values, the
//                                        plugin's own kernel for the indices (cuDNN returns none);
//                                        backward: cudnnPoolingBackward
//   aten::_native_batch_norm_legit_no_training
//                                        cudnnBatchNormalizationForwardInference (SPATIAL); the
//                                        running statistics returned as PyTorch's CUDA kernel does
#include <algorithm>

#include "cuda_libs.h"

namespace opc_cudalibs {
namespace {

void check_float(const Tensor& t, const char* name) {
  if (!is_float(t.dtype)) not_implemented(std::string("argument '") + name + "' has dtype " + dtype_name(t.dtype) +
                                          "; cuDNN here takes float32, float16, bfloat16, float64");
}

// ---- softmax ---------------------------------------------------------------------------------

// [outer, size of dim, inner, 1]: cuDNN's CHANNEL mode normalizes over dim 1 (a 0-d tensor is one
// element).
Dims softmax_dims(const Tensor& t, int64_t dim) {
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < t.ndim(); ++d) {
    if (d < dim) outer *= t.size(d);
    if (d > dim) inner *= t.size(d);
  }
  return {outer, t.ndim() == 0 ? 1 : t.size(static_cast<int>(dim)), inner, 1};
}

int64_t softmax_dim(Call& call, const Tensor& x) {
  check_float(x, "self");
  if (call.boolean(2, "half_to_float")) not_implemented("argument 'half_to_float': cuDNN's softmax keeps the input's dtype");
  const int64_t dim = call.integer(1, "dim"), rank = std::max(x.ndim(), 1);
  if (dim < -rank || dim >= rank)
    invalid_argument("argument 'dim' " + std::to_string(dim) + " is out of range for a " + std::to_string(x.ndim()) + "-d tensor");
  return dim < 0 ? dim + rank : dim;
}

cudnnSoftmaxAlgorithm_t softmax_algorithm(bool log) { return log ? CUDNN_SOFTMAX_LOG : CUDNN_SOFTMAX_ACCURATE; }

void softmax_forward(Call& call, bool log) {
  const Tensor x = call.tensor(0, "self");
  const int64_t dim = softmax_dim(call, x);
  const Tensor out = call.output(0, x.dtype, x.shape);  // the reference's empty_like: contiguous
  if (out.numel() == 0) return;
  const Tensor in = contiguous(call, x);
  CudnnLease h;
  TensorDesc desc(x.dtype, softmax_dims(x, dim));
  const Blend one(1), zero(0);
  check_cudnn(cudnnSoftmaxForward(h.get(), softmax_algorithm(log), CUDNN_SOFTMAX_MODE_CHANNEL, one.for_type(x.dtype), desc.get(),
                                  in.data, zero.for_type(x.dtype), desc.get(), out.data),
              "cudnnSoftmaxForward");
  synchronize("cudnnSoftmaxForward");
}

// [self, dim, half_to_float, result, grad] -> [grad of self, none, none]
void softmax_backward(Call& call, bool log) {
  const Tensor x = call.tensor(0, "self");
  const int64_t dim = softmax_dim(call, x);
  const Tensor y = contiguous(call, call.tensor(3, "result")), dy = contiguous(call, call.tensor(4, "grad_output"));
  if (y.shape != x.shape || dy.shape != x.shape) invalid_argument("'result' and 'grad_output' must have the shape of 'self'");
  const Tensor dx = call.output(0, x.dtype, x.shape);
  if (dx.numel() == 0) return;
  CudnnLease h;
  TensorDesc desc(x.dtype, softmax_dims(x, dim));
  const Blend one(1), zero(0);
  check_cudnn(cudnnSoftmaxBackward(h.get(), softmax_algorithm(log), CUDNN_SOFTMAX_MODE_CHANNEL, one.for_type(x.dtype),
                                   desc.get(), y.data, desc.get(), dy.data, zero.for_type(x.dtype), desc.get(), dx.data),
              "cudnnSoftmaxBackward");
  synchronize("cudnnSoftmaxBackward");
}

void softmax(Call& c) { softmax_forward(c, false); }
void log_softmax(Call& c) { softmax_forward(c, true); }
void softmax_bw(Call& c) { softmax_backward(c, false); }
void log_softmax_bw(Call& c) { softmax_backward(c, true); }

// ---- activations -----------------------------------------------------------------------------

struct Activation {
  cudnnActivationMode_t mode;
  double coef = 0;   // ELU's alpha
  double scale = 1;  // ELU's scale, as cuDNN's output blend factor
};

class ActivationDesc {
 public:
  explicit ActivationDesc(const Activation& a) {
    check_cudnn(cudnnCreateActivationDescriptor(&desc_), "cudnnCreateActivationDescriptor");
    const cudnnStatus_t st = cudnnSetActivationDescriptor(desc_, a.mode, CUDNN_PROPAGATE_NAN, a.coef);
    if (st != CUDNN_STATUS_SUCCESS) {
      cudnnDestroyActivationDescriptor(desc_);
      check_cudnn(st, "cudnnSetActivationDescriptor");
    }
  }
  ~ActivationDesc() { cudnnDestroyActivationDescriptor(desc_); }
  ActivationDesc(const ActivationDesc&) = delete;
  ActivationDesc& operator=(const ActivationDesc&) = delete;
  cudnnActivationDescriptor_t get() const { return desc_; }

 private:
  cudnnActivationDescriptor_t desc_ = nullptr;
};

// Note [Flat elementwise calls]: an activation's tensors all share one dense layout (the
// reference's output layout; inputs in another are copied into it), so element i of each lies
// at the same offset and cuDNN sees every tensor as one row [1, 1, 1, n], in chunks that fit int.
constexpr int64_t kChunk = int64_t{1} << 30;

template <class F>
void for_each_chunk(DType t, int64_t n, F&& f) {
  for (int64_t at = 0; at < n; at += kChunk) {
    const int64_t len = std::min(kChunk, n - at);
    TensorDesc desc(t, {1, 1, 1, len});
    f(desc.get(), at * item_size(t));
  }
}

char* at(const Tensor& t, int64_t bytes) { return static_cast<char*>(t.data) + bytes; }

void activation_run(const Activation& a, const Tensor& x, const Tensor& y) {
  CudnnLease h;
  ActivationDesc desc(a);
  const Blend alpha(a.scale), zero(0);
  for_each_chunk(x.dtype, x.numel(), [&](cudnnTensorDescriptor_t d, int64_t off) {
    check_cudnn(cudnnActivationForward(h.get(), desc.get(), alpha.for_type(x.dtype), d, at(x, off), zero.for_type(x.dtype), d,
                                       at(y, off)),
                "cudnnActivationForward");
  });
  synchronize("cudnnActivationForward");
}

// ELU's extra arguments (alpha, scale, input_scale) at 1..3.
Activation activation_of(Call& call, cudnnActivationMode_t mode) {
  Activation a{mode};
  if (mode != CUDNN_ACTIVATION_ELU) return a;
  a.coef = call.scalar(1, "alpha");
  a.scale = call.scalar(2, "scale");
  if (call.scalar(3, "input_scale") != 1) not_implemented("argument 'input_scale' != 1: cuDNN's ELU has no input scale");
  return a;
}

void activation_forward(Call& call, cudnnActivationMode_t mode) {
  const Tensor x = call.tensor(0, "self");
  check_float(x, "self");
  const Activation a = activation_of(call, mode);
  const Dims layout = elementwise_strides(x);
  const Tensor y = call.output(0, x.dtype, x.shape, layout);
  if (y.numel() == 0) return;
  activation_run(a, in_layout(call, x, layout), y);
}

// [self, (alpha, scale, input_scale,) result, grad] -> [grad of self, none...]
void activation_backward(Call& call, cudnnActivationMode_t mode) {
  const Tensor x = call.tensor(0, "self");
  check_float(x, "self");
  const Activation a = activation_of(call, mode);
  const int64_t result = mode == CUDNN_ACTIVATION_ELU ? 4 : 1;
  const Dims layout = elementwise_strides(x);
  const Tensor dx = call.output(0, x.dtype, x.shape, layout);
  if (dx.numel() == 0) return;
  const Tensor xin = in_layout(call, x, layout);
  const Tensor dy = in_layout(call, call.tensor(result + 1, "grad_output"), layout);
  Tensor y = in_layout(call, call.tensor(result, "result"), layout);
  if (a.scale != 1) {
    // cuDNN's ELU backward may read y as its own (unscaled) output: recompute that one.
    y = call.scratch(x.dtype, x.shape, layout);
    activation_run({a.mode, a.coef, 1}, xin, y);
  }
  CudnnLease h;
  ActivationDesc desc(a);
  const Blend alpha(a.scale), zero(0);
  for_each_chunk(x.dtype, x.numel(), [&](cudnnTensorDescriptor_t d, int64_t off) {
    check_cudnn(cudnnActivationBackward(h.get(), desc.get(), alpha.for_type(x.dtype), d, at(y, off), d, at(dy, off), d,
                                        at(xin, off), zero.for_type(x.dtype), d, at(dx, off)),
                "cudnnActivationBackward");
  });
  synchronize("cudnnActivationBackward");
}

void relu(Call& c) { activation_forward(c, CUDNN_ACTIVATION_RELU); }
void sigmoid(Call& c) { activation_forward(c, CUDNN_ACTIVATION_SIGMOID); }
void tanh_(Call& c) { activation_forward(c, CUDNN_ACTIVATION_TANH); }
void elu(Call& c) { activation_forward(c, CUDNN_ACTIVATION_ELU); }
void relu_bw(Call& c) { activation_backward(c, CUDNN_ACTIVATION_RELU); }
void sigmoid_bw(Call& c) { activation_backward(c, CUDNN_ACTIVATION_SIGMOID); }
void tanh_bw(Call& c) { activation_backward(c, CUDNN_ACTIVATION_TANH); }
void elu_bw(Call& c) { activation_backward(c, CUDNN_ACTIVATION_ELU); }

// ---- pooling ---------------------------------------------------------------------------------

struct Pool {
  Dims out_shape;          // the op's output ([N,] C, OH, OW)
  Dims x4, y4;             // [N, C, H, W] and [N, C, OH, OW]
  int k[2], s[2], p[2];
};

Dims pool_list(const Dims& v, const char* name, int64_t min) {
  Dims out = v.size() == 1 ? Dims{v[0], v[0]} : v;
  if (out.size() != 2) invalid_argument(std::string("argument '") + name + "' must have 1 or 2 elements, got " + shape_string(v));
  for (int64_t x : out)
    if (x < min) invalid_argument(std::string("argument '") + name + "' must be >= " + std::to_string(min));
  return out;
}

// PyTorch's pooling_output_shape.
int64_t pooled(int64_t in, int64_t k, int64_t pad, int64_t stride, bool ceil_mode) {
  const int64_t num = in + 2 * pad - (k - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  int64_t out = (num >= 0 ? num / stride : -((-num + stride - 1) / stride)) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

// The reference's plan_pool checks; then what cuDNN cannot do is OPC_NOT_IMPLEMENTED.
Pool plan_pool(Call& call, const Tensor& x, const Dims* dilation, bool ceil_mode) {
  check_float(x, "self");
  bool ok = x.ndim() == 3 || x.ndim() == 4;
  for (int d = x.ndim() - 3; ok && d < x.ndim(); ++d) ok = x.size(d) > 0;
  if (!ok) invalid_argument("argument 'self' must be 3-d or 4-d with non-zero C, H, W, got " + shape_string(x.shape));
  const Dims k = pool_list(call.int_list(1, "kernel_size"), "kernel_size", 1);
  const Dims given = call.int_list(2, "stride");
  const Dims s = given.empty() ? k : pool_list(given, "stride", 1);
  const Dims p = pool_list(call.int_list(3, "padding"), "padding", 0);
  if (dilation != nullptr && ((*dilation)[0] != 1 || (*dilation)[1] != 1))
    not_implemented("argument 'dilation' != 1: cuDNN's pooling has no dilation");
  Pool pool;
  const int64_t n = x.ndim() == 4 ? x.size(0) : 1, c = x.size(x.ndim() - 3);
  pool.x4 = {n, c, x.size(x.ndim() - 2), x.size(x.ndim() - 1)};
  pool.y4 = {n, c};
  for (int i = 0; i < 2; ++i) {
    if (p[i] > k[i] / 2) invalid_argument("argument 'padding' must be at most half of 'kernel_size'");
    const int64_t out = pooled(pool.x4[i + 2], k[i], p[i], s[i], ceil_mode);
    if (out < 1) invalid_argument("the output size " + std::to_string(out) + " is too small");
    // cuDNN sizes windows by the floor rule only.
    if (ceil_mode && out != pooled(pool.x4[i + 2], k[i], p[i], s[i], false))
      not_implemented("argument 'ceil_mode': cuDNN's pooling has no ceil mode (and it changes the output size here)");
    pool.y4.push_back(out);
    pool.k[i] = to_int(k[i], "kernel_size");
    pool.s[i] = to_int(s[i], "stride");
    pool.p[i] = to_int(p[i], "padding");
  }
  pool.out_shape = x.shape;
  pool.out_shape[static_cast<size_t>(x.ndim() - 2)] = pool.y4[2];
  pool.out_shape[static_cast<size_t>(x.ndim() - 1)] = pool.y4[3];
  return pool;
}

class PoolingDesc {
 public:
  PoolingDesc(const Pool& p, cudnnPoolingMode_t mode) {
    check_cudnn(cudnnCreatePoolingDescriptor(&desc_), "cudnnCreatePoolingDescriptor");
    const cudnnStatus_t st = cudnnSetPooling2dDescriptor(desc_, mode, CUDNN_PROPAGATE_NAN, p.k[0], p.k[1], p.p[0], p.p[1],
                                                         p.s[0], p.s[1]);
    if (st != CUDNN_STATUS_SUCCESS) {
      cudnnDestroyPoolingDescriptor(desc_);
      check_cudnn(st, "cudnnSetPooling2dDescriptor");
    }
  }
  ~PoolingDesc() { cudnnDestroyPoolingDescriptor(desc_); }
  PoolingDesc(const PoolingDesc&) = delete;
  PoolingDesc& operator=(const PoolingDesc&) = delete;
  cudnnPoolingDescriptor_t get() const { return desc_; }

 private:
  cudnnPoolingDescriptor_t desc_ = nullptr;
};

void pool_forward(const Pool& p, cudnnPoolingMode_t mode, const Tensor& x, const Tensor& y) {
  CudnnLease h;
  PoolingDesc desc(p, mode);
  TensorDesc xd(x.dtype, p.x4), yd(x.dtype, p.y4);
  const Blend one(1), zero(0);
  check_cudnn(cudnnPoolingForward(h.get(), desc.get(), one.for_type(x.dtype), xd.get(), x.data, zero.for_type(x.dtype), yd.get(),
                                  y.data),
              "cudnnPoolingForward");
  synchronize("cudnnPoolingForward");
}

// dx from y, dy and x (all contiguous).
void pool_backward(const Pool& p, cudnnPoolingMode_t mode, const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor& dx) {
  CudnnLease h;
  PoolingDesc desc(p, mode);
  TensorDesc xd(x.dtype, p.x4), yd(x.dtype, p.y4);
  const Blend one(1), zero(0);
  check_cudnn(cudnnPoolingBackward(h.get(), desc.get(), one.for_type(x.dtype), yd.get(), y.data, yd.get(), dy.data, xd.get(),
                                   x.data, zero.for_type(x.dtype), xd.get(), dx.data),
              "cudnnPoolingBackward");
  synchronize("cudnnPoolingBackward");
}

// avg_pool2d's arguments: self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override.
cudnnPoolingMode_t avg_mode(Call& call) {
  if (!call.is_none(6)) not_implemented("argument 'divisor_override': cuDNN's average pooling has no divisor of its own");
  return call.boolean(5, "count_include_pad") ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                              : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
}

void avg_pool2d(Call& call) {
  const Tensor x = call.tensor(0, "self");
  const Pool p = plan_pool(call, x, nullptr, call.boolean(4, "ceil_mode"));
  const cudnnPoolingMode_t mode = avg_mode(call);
  const Tensor y = call.output(0, x.dtype, p.out_shape);
  if (y.numel() == 0) return;
  pool_forward(p, mode, contiguous(call, x), y);
}

// [self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, result, grad]
void avg_pool2d_bw(Call& call) {
  const Tensor x = call.tensor(0, "self");
  const Pool p = plan_pool(call, x, nullptr, call.boolean(4, "ceil_mode"));
  const cudnnPoolingMode_t mode = avg_mode(call);
  const Tensor dx = call.output(0, x.dtype, x.shape);
  if (dx.numel() == 0) return;
  pool_backward(p, mode, contiguous(call, x), contiguous(call, call.tensor(7, "result")),
                contiguous(call, call.tensor(8, "grad_output")), dx);
}

void max_pool2d(Call& call) {
  const Tensor x = call.tensor(0, "self");
  const Dims dilation = pool_list(call.int_list(4, "dilation"), "dilation", 1);
  const Pool p = plan_pool(call, x, &dilation, call.boolean(5, "ceil_mode"));
  const Tensor y = call.output(0, x.dtype, p.out_shape);
  const Tensor indices = call.output(1, DType::i64, p.out_shape);
  if (y.numel() == 0) return;
  const Tensor in = contiguous(call, x);
  pool_forward(p, CUDNN_POOLING_MAX_DETERMINISTIC, in, y);
  const int64_t planes = p.x4[0] * p.x4[1];
  max_pool_indices(in.reshaped_contiguous({planes, p.x4[2], p.x4[3]}), indices.reshaped_contiguous({planes, p.y4[2], p.y4[3]}),
                   p.k[0], p.k[1], p.s[0], p.s[1], p.p[0], p.p[1]);
  synchronize("max pooling indices");
}

// [self, kernel_size, stride, padding, dilation, ceil_mode, values, indices, grad_values, grad_indices]
// cuDNN routes each window's gradient to its maximum from x and y (not through the indices).
void max_pool2d_bw(Call& call) {
  const Tensor x = call.tensor(0, "self");
  const Dims dilation = pool_list(call.int_list(4, "dilation"), "dilation", 1);
  const Pool p = plan_pool(call, x, &dilation, call.boolean(5, "ceil_mode"));
  const Tensor dx = call.output(0, x.dtype, x.shape);
  if (dx.numel() == 0) return;
  pool_backward(p, CUDNN_POOLING_MAX_DETERMINISTIC, contiguous(call, x), contiguous(call, call.tensor(6, "result")),
                contiguous(call, call.tensor(8, "grad_output")), dx);
}

// ---- batch norm (inference) ------------------------------------------------------------------

// A per-channel parameter as a contiguous [C] tensor of the statistics dtype (`fill_value` when
// None), checked as the reference's parameter_dtype does.
Tensor channel_param(Call& call, int64_t i, const char* name, const Tensor& input, DType stat, double fill_value) {
  const int64_t c = input.size(1);
  Tensor out = call.scratch(stat, {c});
  if (call.is_none(i)) {
    fill(out, fill_value);
    return out;
  }
  const Tensor p = call.tensor(i, name);
  const bool reduced = input.dtype == DType::f16 || input.dtype == DType::bf16;
  if (p.dtype != input.dtype && !(reduced && p.dtype == DType::f32))
    invalid_argument(std::string("argument '") + name + "' has dtype " + dtype_name(p.dtype) + " but 'input' has " +
                     dtype_name(input.dtype));
  if (p.shape != Dims{c}) invalid_argument(std::string("argument '") + name + "' must have shape [" + std::to_string(c) + "]");
  copy_scaled(p, out);
  return out;
}

// [input, weight, bias, running_mean, running_var, momentum, eps] -> (out, mean, invstd): on CUDA
// the 2nd and 3rd results are the running mean and 1 / sqrt(running_var + eps), in float32 for a
// float16/bfloat16 input (Note [Device-dependent semantics] of the reference).
void batch_norm_inference(Call& call) {
  const Tensor x = call.tensor(0, "input");
  check_float(x, "input");
  if (x.ndim() < 2) invalid_argument("argument 'input' must have at least 2 dims (N, C, ...), got " + shape_string(x.shape));
  (void)call.scalar(5, "momentum");  // unused in inference, still a float (error_inputs on an H200)
  const double eps = call.scalar(6, "eps");
  const DType stat = compute_type(x.dtype);
  const Tensor weight = channel_param(call, 1, "weight", x, stat, 1), bias = channel_param(call, 2, "bias", x, stat, 0);
  const Tensor mean_in = channel_param(call, 3, "running_mean", x, stat, 0);
  const Tensor var = channel_param(call, 4, "running_var", x, stat, 1);
  const int64_t c = x.size(1);
  const Tensor y = call.output(0, x.dtype, x.shape);
  const Tensor mean = call.output(1, stat, {c}), invstd = call.output(2, stat, {c});
  copy_scaled(mean_in, mean);
  inverse_std(var, invstd, eps);
  if (y.numel() > 0) {
    int64_t spatial = 1;
    for (int d = 2; d < x.ndim(); ++d) spatial *= x.size(d);
    const Dims dims{x.size(0), c, spatial, 1};  // every layout folds to [N, C, S, 1] when contiguous
    const Tensor in = contiguous(call, x);
    CudnnLease h;
    TensorDesc xd(x.dtype, dims), pd(stat, {1, c, 1, 1});
    const Blend one(1), zero(0);
    check_cudnn(cudnnBatchNormalizationForwardInference(h.get(), CUDNN_BATCHNORM_SPATIAL, one.for_type(x.dtype),
                                                        zero.for_type(x.dtype), xd.get(), in.data, xd.get(), y.data, pd.get(),
                                                        weight.data, bias.data, mean.data, var.data, eps),
                "cudnnBatchNormalizationForwardInference");
  }
  synchronize("batch norm");
}

}  // namespace

std::vector<OpDef> dnn_ops() {
  return {
      {"aten::_softmax", softmax, softmax_bw},
      {"aten::_log_softmax", log_softmax, log_softmax_bw},
      {"aten::relu", relu, relu_bw},
      {"aten::sigmoid", sigmoid, sigmoid_bw},
      {"aten::tanh", tanh_, tanh_bw},
      {"aten::elu", elu, elu_bw},
      {"aten::avg_pool2d", avg_pool2d, avg_pool2d_bw},
      {"aten::max_pool2d_with_indices", max_pool2d, max_pool2d_bw},
      {"aten::_native_batch_norm_legit_no_training", batch_norm_inference, nullptr},
  };
}

}  // namespace opc_cudalibs
