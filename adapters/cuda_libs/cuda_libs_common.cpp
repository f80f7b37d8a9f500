// The shared parts of the cuBLAS/cuDNN adapter (cuda_libs.h): errors, dtypes, tensors and
// layouts, the boxed call, the handle pools and cuDNN descriptors.
#include <algorithm>
#include <climits>
#include <cstring>
#include <mutex>

#include "cuda_libs.h"

namespace opc_cudalibs {

// ---- errors ----------------------------------------------------------------------------------

void check_cuda(cudaError_t status, const std::string& what) {
  if (status == cudaSuccess) return;
  const OpcStatus s = status == cudaErrorMemoryAllocation ? OPC_OUT_OF_MEMORY : OPC_ERROR;
  throw KernelError(s, what + ": " + cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")");
}

void check_cublas(cublasStatus_t status, const std::string& what) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  OpcStatus s = OPC_ERROR;
  if (status == CUBLAS_STATUS_ALLOC_FAILED) s = OPC_OUT_OF_MEMORY;
  if (status == CUBLAS_STATUS_NOT_SUPPORTED || status == CUBLAS_STATUS_ARCH_MISMATCH) s = OPC_NOT_IMPLEMENTED;
  if (status == CUBLAS_STATUS_INVALID_VALUE) s = OPC_INVALID_ARGUMENT;
  throw KernelError(s, what + ": " + cublasGetStatusName(status) + " (" + cublasGetStatusString(status) + ")");
}

OpcStatus status_of(cudnnStatus_t status) {
  switch (status) {
    case CUDNN_STATUS_SUCCESS: return OPC_OK;
    case CUDNN_STATUS_NOT_SUPPORTED: return OPC_NOT_IMPLEMENTED;
    case CUDNN_STATUS_BAD_PARAM: return OPC_INVALID_ARGUMENT;
    case CUDNN_STATUS_ALLOC_FAILED: return OPC_OUT_OF_MEMORY;
    default: break;
  }
  // cuDNN 9 refines the codes (CUDNN_STATUS_NOT_SUPPORTED_* = 3000 + n, BAD_PARAM_* = 2000 + n).
  const int code = static_cast<int>(status);
  if (code >= 3000 && code < 4000) return OPC_NOT_IMPLEMENTED;
  if (code >= 2000 && code < 3000) return OPC_INVALID_ARGUMENT;
  return OPC_ERROR;
}

void check_cudnn(cudnnStatus_t status, const std::string& what) {
  if (status == CUDNN_STATUS_SUCCESS) return;
  throw KernelError(status_of(status), what + ": " + cudnnGetErrorString(status));
}

void set_call_error(const OpcCallContext* ctx, const std::string& message) {
  const std::string full = std::string(ctx->op_name != nullptr ? ctx->op_name : "cuda_libs") + ": " + message;
  ctx->set_error(ctx->host, full.c_str());
}

int to_int(int64_t v, const std::string& what) {
  if (v < INT_MIN || v > INT_MAX) not_implemented(what + " " + std::to_string(v) + " does not fit the library's int");
  return static_cast<int>(v);
}

// ---- dtypes ----------------------------------------------------------------------------------

DType dtype_of(DLDataType t) {
  if (t.lanes != 1) return DType::other;
  if (t.code == kDLFloat && t.bits == 32) return DType::f32;
  if (t.code == kDLFloat && t.bits == 16) return DType::f16;
  if (t.code == kDLFloat && t.bits == 64) return DType::f64;
  if (t.code == kDLBfloat && t.bits == 16) return DType::bf16;
  if (t.code == kDLInt && t.bits == 64) return DType::i64;
  if (t.code == kDLUInt && t.bits == 8) return DType::u8;
  return DType::other;
}

DLDataType dl_type(DType t) {
  switch (t) {
    case DType::f32: return {kDLFloat, 32, 1};
    case DType::f16: return {kDLFloat, 16, 1};
    case DType::bf16: return {kDLBfloat, 16, 1};
    case DType::f64: return {kDLFloat, 64, 1};
    case DType::i64: return {kDLInt, 64, 1};
    case DType::u8: return {kDLUInt, 8, 1};
    default: return {kDLOpaqueHandle, 0, 0};
  }
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "float32";
    case DType::f16: return "float16";
    case DType::bf16: return "bfloat16";
    case DType::f64: return "float64";
    case DType::i64: return "int64";
    case DType::u8: return "uint8";
    default: return "an unsupported dtype";
  }
}

int64_t item_size(DType t) {
  switch (t) {
    case DType::f16:
    case DType::bf16: return 2;
    case DType::f32: return 4;
    case DType::f64:
    case DType::i64: return 8;
    default: return 1;
  }
}

bool is_float(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16 || t == DType::f64; }

cudnnDataType_t cudnn_type(DType t) {
  switch (t) {
    case DType::f16: return CUDNN_DATA_HALF;
    case DType::bf16: return CUDNN_DATA_BFLOAT16;
    case DType::f64: return CUDNN_DATA_DOUBLE;
    default: return CUDNN_DATA_FLOAT;
  }
}

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::f16: return CUDA_R_16F;
    case DType::bf16: return CUDA_R_16BF;
    case DType::f64: return CUDA_R_64F;
    default: return CUDA_R_32F;
  }
}

DType compute_type(DType t) { return t == DType::f64 ? DType::f64 : DType::f32; }

const std::vector<DLDataType>& float_dtypes() {
  static const std::vector<DLDataType> dtypes{dl_type(DType::f32), dl_type(DType::f16), dl_type(DType::bf16),
                                              dl_type(DType::f64)};
  return dtypes;
}

// ---- tensors and layouts ---------------------------------------------------------------------

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

Tensor Tensor::expanded(const Dims& to, const char* name) const {
  if (to.size() < shape.size()) invalid_argument(std::string("argument '") + name + "' of shape " + shape_string(shape) +
                                                 " does not broadcast to " + shape_string(to));
  Tensor v = *this;
  v.shape = to;
  v.strides.assign(to.size(), 0);
  const size_t lead = to.size() - shape.size();
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == to[lead + d]) {
      v.strides[lead + d] = strides[d];
    } else if (shape[d] != 1) {
      invalid_argument(std::string("argument '") + name + "' of shape " + shape_string(shape) +
                       " does not broadcast to " + shape_string(to));
    }
  }
  return v;
}

Tensor Tensor::reshaped_contiguous(const Dims& to) const {
  Tensor v = *this;
  v.shape = to;
  v.strides = contiguous_strides(to);
  return v;
}

bool same_layout(const Tensor& t, const Dims& strides) {
  for (int d = 0; d < t.ndim(); ++d)
    if (t.size(d) > 1 && t.stride(d) != strides[static_cast<size_t>(d)]) return false;
  return true;
}

bool is_contiguous(const Tensor& t) { return same_layout(t, contiguous_strides(t.shape)); }

// The reference's (TensorIterator's) rule for one input: sort the dims by stride, fastest first,
// a tie broken by the larger size moving slower; then dense strides in that order.
Dims elementwise_strides(const Tensor& t) {
  const int n = t.ndim();
  std::vector<int> perm(static_cast<size_t>(n));  // perm[0]: the fastest-moving dim
  for (int i = 0; i < n; ++i) perm[static_cast<size_t>(i)] = n - 1 - i;
  auto order = [&](int d0, int d1) {
    const int64_t s0 = t.stride(d0), s1 = t.stride(d1);
    if (s0 == 0 || s1 == 0) return 0;
    if (s0 != s1) return s0 < s1 ? -1 : 1;
    return t.size(d0) > t.size(d1) ? 1 : 0;
  };
  for (int i = 1; i < n; ++i) {  // the same insertion sort
    int d1 = i;
    for (int d0 = i - 1; d0 >= 0; --d0) {
      const int c = order(perm[static_cast<size_t>(d0)], perm[static_cast<size_t>(d1)]);
      if (c > 0) {
        std::swap(perm[static_cast<size_t>(d0)], perm[static_cast<size_t>(d1)]);
        d1 = d0;
      } else if (c < 0) {
        break;
      }
    }
  }
  Dims strides(static_cast<size_t>(n));
  int64_t next = 1;
  for (int d : perm) {
    strides[static_cast<size_t>(d)] = next;
    next *= std::max<int64_t>(t.size(d), 1);
  }
  return strides;
}

// ---- one call --------------------------------------------------------------------------------

Call::Call(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args, OpcValue* returns, int64_t num_returns)
    : opc::Args(args, num_args), ctx_(ctx), returns_(returns), num_returns_(num_returns) {
  for (int64_t i = 0; i < num_returns_; ++i) returns_[i].tag = OPC_TAG_NONE;
}

Tensor Call::tensor(int64_t i, const char* name) const {
  const OpcValue& v = arg(i, name);
  if (v.tag != OPC_TAG_TENSOR || v.u.tensor == nullptr) invalid_argument(std::string("argument '") + name + "' is not a tensor");
  const DLTensor& d = v.u.tensor->dl_tensor;
  if (d.device.device_type != kDLCUDA)
    invalid_argument(std::string("argument '") + name + "' is not in CUDA device memory (this plugin has CUDA kernels only)");
  Tensor t;
  t.dtype = dtype_of(d.dtype);
  if (t.dtype == DType::other) not_implemented(std::string("argument '") + name + "' has a dtype this plugin does not take");
  t.shape.assign(d.shape, d.shape + d.ndim);
  t.strides = d.strides != nullptr ? Dims(d.strides, d.strides + d.ndim) : contiguous_strides(t.shape);
  for (int64_t s : t.strides)
    if (s < 0) not_implemented(std::string("argument '") + name + "' has a negative stride");
  t.data = static_cast<char*>(d.data) + d.byte_offset;
  return t;
}

Tensor Call::make(DType type, const Dims& shape, const Dims& strides, OpcDLManagedTensorVersioned** managed) {
  OpcDLManagedTensorVersioned* m =
      ctx_->new_tensor(ctx_->host, dl_type(type), static_cast<int32_t>(shape.size()), shape.data(), strides.data());
  if (m == nullptr) throw KernelError(OPC_OUT_OF_MEMORY, "no device tensor of shape " + shape_string(shape) + " " + dtype_name(type));
  if (m->dl_tensor.device.device_type != kDLCUDA)
    throw KernelError(OPC_ERROR, "the host gave a tensor that is not in CUDA memory (a CUDA kernel called with host tensors?)");
  if (managed != nullptr) *managed = m;
  Tensor t;
  t.dtype = type;
  t.shape = shape;
  t.strides = strides;
  t.data = static_cast<char*>(m->dl_tensor.data) + m->dl_tensor.byte_offset;
  return t;
}

Tensor Call::output(int64_t ret, DType type, const Dims& shape, const Dims& strides) {
  if (ret < 0 || ret >= num_returns_) throw KernelError(OPC_ERROR, "return " + std::to_string(ret) + " out of range");
  OpcDLManagedTensorVersioned* m = nullptr;
  Tensor t = make(type, shape, strides, &m);
  returns_[ret].tag = OPC_TAG_TENSOR;
  returns_[ret].u.tensor = m;
  return t;
}

void Call::set_none(int64_t ret) {
  if (ret >= 0 && ret < num_returns_) returns_[ret].tag = OPC_TAG_NONE;
}

Tensor Call::scratch(DType type, const Dims& shape, const Dims& strides) { return make(type, shape, strides, nullptr); }

void* Call::workspace(size_t bytes) {
  if (bytes == 0) return nullptr;
  return scratch(DType::u8, {static_cast<int64_t>(bytes)}).data;
}

// Note [Dense copies]: cuBLAS takes a matrix whose rows or columns are contiguous, cuDNN's
// filters are packed and its convolutions, poolings and normalizations want packed tensors. An
// input in any other layout (a slice, a stride-0 expansion, an odd permutation) is copied by the
// plugin's strided-copy kernel into a row-major scratch tensor first — what PyTorch does with
// .contiguous() before calling these libraries. Outputs are allocated in the reference's layout.
Tensor contiguous(Call& call, const Tensor& t) { return in_layout(call, t, contiguous_strides(t.shape)); }

Tensor in_layout(Call& call, const Tensor& t, const Dims& strides) {
  if (same_layout(t, strides)) return t;
  Tensor copy = call.scratch(t.dtype, t.shape, strides);
  copy_scaled(t, copy);
  return copy;
}

// ---- handles ---------------------------------------------------------------------------------

// Note [Handles]: one cuBLAS and one cuDNN handle per thread that calls at the same time, from a
// pool: the thread_safety check calls an op from up to four threads at once, and a cuDNN handle must
// not be used by two threads concurrently. Handles are made at the first call that needs one,
// never while loading (the library loads, and registers its ops, on a machine without a GPU;
// the harness loads it in a probe process and in each worker after the fork, so no CUDA state
// crosses a fork). They are never destroyed: destroying them at exit races the CUDA runtime's
// own teardown. Every handle works on the default stream.
namespace {
std::mutex pool_mutex;
std::vector<cublasHandle_t> free_cublas;
std::vector<cudnnHandle_t> free_cudnn;
}  // namespace

bool tf32_enabled() {
#ifdef OPCONFORM_CUDA_LIBS_TF32
  return true;
#else
  return false;
#endif
}

CublasLease::CublasLease() {
  {
    std::lock_guard<std::mutex> lock(pool_mutex);
    if (!free_cublas.empty()) {
      handle_ = free_cublas.back();
      free_cublas.pop_back();
      return;
    }
  }
  check_cublas(cublasCreate(&handle_), "cublasCreate");
  // TF32 for float32 GEMMs only in the _tf32 variant; the default keeps IEEE float32 math.
  const cublasStatus_t st = cublasSetMathMode(handle_, tf32_enabled() ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH);
  if (st != CUBLAS_STATUS_SUCCESS) {
    cublasDestroy(handle_);
    check_cublas(st, "cublasSetMathMode");
  }
}

CublasLease::~CublasLease() {
  try {
    std::lock_guard<std::mutex> lock(pool_mutex);
    free_cublas.push_back(handle_);
  } catch (...) {
    // out of memory in push_back: the handle leaks, which is harmless
  }
}

CudnnLease::CudnnLease() {
  {
    std::lock_guard<std::mutex> lock(pool_mutex);
    if (!free_cudnn.empty()) {
      handle_ = free_cudnn.back();
      free_cudnn.pop_back();
      return;
    }
  }
  check_cudnn(cudnnCreate(&handle_), "cudnnCreate");
}

CudnnLease::~CudnnLease() {
  try {
    std::lock_guard<std::mutex> lock(pool_mutex);
    free_cudnn.push_back(handle_);
  } catch (...) {
  }
}

// ---- cuDNN descriptors -----------------------------------------------------------------------

TensorDesc::TensorDesc(DType type, const Dims& dims, const Dims& strides) {
  std::vector<int> d, s;
  for (size_t i = 0; i < dims.size(); ++i) {
    d.push_back(to_int(dims[i], "a size"));
    // A size-1 dim's stride says nothing; cuDNN wants it positive.
    s.push_back(to_int(std::max<int64_t>(strides[i], 1), "a stride"));
  }
  check_cudnn(cudnnCreateTensorDescriptor(&desc_), "cudnnCreateTensorDescriptor");
  const cudnnStatus_t st = cudnnSetTensorNdDescriptor(desc_, cudnn_type(type), static_cast<int>(d.size()), d.data(), s.data());
  if (st != CUDNN_STATUS_SUCCESS) {
    cudnnDestroyTensorDescriptor(desc_);  // the destructor does not run for a throwing constructor
    desc_ = nullptr;
    check_cudnn(st, "cudnnSetTensorNdDescriptor " + shape_string(dims));
  }
}

TensorDesc::~TensorDesc() {
  if (desc_ != nullptr) cudnnDestroyTensorDescriptor(desc_);
}

}  // namespace opc_cudalibs
