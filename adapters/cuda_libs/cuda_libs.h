// What the cuBLAS/cuDNN adapter's op families share: one boxed call's arguments as device tensors
// and scalars, outputs and device scratch from the host, layouts (PyTorch's output strides, dense
// copies), the handles, the few CUDA kernels of the plugin's own (strided copy, fill, max pooling's
// indices, batch norm's statistics), cuDNN descriptors, and errors that become a status at the ABI.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "opconform/plugin.h"
#include "opconform/plugin_args.hpp"

namespace opc_cudalibs {

// ---- errors ----------------------------------------------------------------------------------

// What a kernel throws (`guarded` turns it into the status and "<op>: <message>") and the
// argument readers: opconform/plugin_args.hpp.
using opc::contiguous_strides;
using opc::Dims;
using opc::invalid_argument;
using opc::KernelError;
using opc::not_implemented;
using opc::shape_string;
// A failing library call: its status string, and the status a host understands (cuDNN's
// NOT_SUPPORTED is OPC_NOT_IMPLEMENTED, BAD_PARAM OPC_INVALID_ARGUMENT, allocation failures
// OPC_OUT_OF_MEMORY, the rest OPC_ERROR).
void check_cuda(cudaError_t status, const std::string& what);
void check_cublas(cublasStatus_t status, const std::string& what);
void check_cudnn(cudnnStatus_t status, const std::string& what);
OpcStatus status_of(cudnnStatus_t status);

void set_call_error(const OpcCallContext* ctx, const std::string& message);

template <class Body>
OpcStatus guarded(const OpcCallContext* ctx, Body&& body) {
  try {
    body();
    return OPC_OK;
  } catch (const KernelError& e) {
    set_call_error(ctx, e.what());
    return e.status;
  } catch (const std::bad_alloc&) {
    set_call_error(ctx, "out of host memory");
    return OPC_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    set_call_error(ctx, e.what());
    return OPC_ERROR;
  } catch (...) {
    set_call_error(ctx, "unknown exception");
    return OPC_ERROR;
  }
}

// ---- dtypes ----------------------------------------------------------------------------------

enum class DType { f32, f16, bf16, f64, i64, u8, other };
DType dtype_of(DLDataType t);
DLDataType dl_type(DType t);
const char* dtype_name(DType t);
int64_t item_size(DType t);
bool is_float(DType t);  // the four the libraries compute on
cudnnDataType_t cudnn_type(DType t);
cudaDataType_t cuda_type(DType t);
// cuDNN's and cuBLAS's alpha/beta and per-channel parameters: double for double data, else float.
DType compute_type(DType t);

// Declared dtypes: float32, float16, bfloat16, float64.
const std::vector<DLDataType>& float_dtypes();

// ---- tensors ---------------------------------------------------------------------------------

struct Tensor {
  DType dtype = DType::other;
  Dims shape, strides;   // strides in elements
  void* data = nullptr;  // the first element (data + byte_offset), device memory
  int ndim() const { return static_cast<int>(shape.size()); }
  int64_t size(int d) const { return shape[static_cast<size_t>(d)]; }
  int64_t stride(int d) const { return strides[static_cast<size_t>(d)]; }
  int64_t numel() const;
  // The view over `to`, stride 0 where it broadcasts (numpy's rule); invalid_argument naming
  // `name` when it does not broadcast.
  Tensor expanded(const Dims& to, const char* name) const;
  Tensor reshaped_contiguous(const Dims& to) const;  // a contiguous tensor seen with other sizes
};

bool is_contiguous(const Tensor& t);
// Strides equal where they matter (dims of size > 1): the same element order in memory.
bool same_layout(const Tensor& t, const Dims& strides);
// TensorIterator's output strides for one input: dense, in the input's memory order.
Dims elementwise_strides(const Tensor& t);

// ---- one call --------------------------------------------------------------------------------

// A kernel's view of one boxed call: typed reads of its arguments (each failure names the
// argument) and device tensors from the host (outputs, scratch freed after the call).
class Call : public opc::Args {
 public:
  Call(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args, OpcValue* returns, int64_t num_returns);
  const char* op() const { return ctx_->op_name != nullptr ? ctx_->op_name : "cuda_libs"; }
  int64_t num_returns() const { return num_returns_; }

  Tensor tensor(int64_t i, const char* name) const;  // on the GPU, of a dtype this plugin knows

  Tensor output(int64_t ret, DType type, const Dims& shape, const Dims& strides);
  Tensor output(int64_t ret, DType type, const Dims& shape) { return output(ret, type, shape, contiguous_strides(shape)); }
  void set_none(int64_t ret);
  Tensor scratch(DType type, const Dims& shape, const Dims& strides);
  Tensor scratch(DType type, const Dims& shape) { return scratch(type, shape, contiguous_strides(shape)); }
  // Device bytes for a library's workspace (nullptr for 0; throws OPC_OUT_OF_MEMORY).
  void* workspace(size_t bytes);

 private:
  Tensor make(DType type, const Dims& shape, const Dims& strides, OpcDLManagedTensorVersioned** managed);
  const OpcCallContext* ctx_;
  OpcValue* returns_;
  int64_t num_returns_;
};

// t itself when it is row-major contiguous, else a contiguous copy (Note [Dense copies]).
Tensor contiguous(Call& call, const Tensor& t);
// t itself when its layout is `strides` (same_layout), else a copy in that layout.
Tensor in_layout(Call& call, const Tensor& t, const Dims& strides);

// ---- the plugin's own kernels (cuda_libs_kernels.cu); launched on the default stream ---------

// dst = scale * src, element by element over dst's shape (src's strides may be 0), converting
// dtypes; computes in double when either side is double, else in float.
void copy_scaled(const Tensor& src, const Tensor& dst, double scale = 1.0);
void fill(const Tensor& dst, double value);
// PyTorch's max pooling indices (h * W + w per plane; the last NaN, else the first largest) of
// contiguous x [planes, H, W] into contiguous indices [planes, OH, OW] (int64); no dilation.
void max_pool_indices(const Tensor& x, const Tensor& indices, int kh, int kw, int sh, int sw, int ph, int pw);
// invstd[c] = 1 / sqrt(var[c] + eps) in var's dtype (float or double), var contiguous.
void inverse_std(const Tensor& var, const Tensor& invstd, double eps);
// Waits for the default stream; a failed launch or kernel is an OPC_ERROR naming `what`.
void synchronize(const std::string& what);

// ---- the libraries ---------------------------------------------------------------------------

// Whether this build computes float32 GEMMs and convolutions with TF32 tensor ops (the
// _tf32 variant, OPCONFORM_CUDA_LIBS_TF32).
bool tf32_enabled();

// A handle for the calling thread's use during one call, taken from a pool (Note [Handles]).
class CublasLease {
 public:
  CublasLease();
  ~CublasLease();
  CublasLease(const CublasLease&) = delete;
  CublasLease& operator=(const CublasLease&) = delete;
  cublasHandle_t get() const { return handle_; }

 private:
  cublasHandle_t handle_;
};
class CudnnLease {
 public:
  CudnnLease();
  ~CudnnLease();
  CudnnLease(const CudnnLease&) = delete;
  CudnnLease& operator=(const CudnnLease&) = delete;
  cudnnHandle_t get() const { return handle_; }

 private:
  cudnnHandle_t handle_;
};

// cuDNN descriptors that destroy themselves.
class TensorDesc {
 public:
  // dims and strides of 3 to 8 entries (cuDNN's); each must fit int.
  TensorDesc(DType type, const Dims& dims, const Dims& strides);
  TensorDesc(DType type, const Dims& dims) : TensorDesc(type, dims, contiguous_strides(dims)) {}
  ~TensorDesc();
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;
  cudnnTensorDescriptor_t get() const { return desc_; }

 private:
  cudnnTensorDescriptor_t desc_ = nullptr;
};

// A value of the compute type (float, or double for double data) for alpha/beta pointers.
struct Blend {
  float f;
  double d;
  explicit Blend(double v) : f(static_cast<float>(v)), d(v) {}
  const void* for_type(DType t) const { return compute_type(t) == DType::f64 ? static_cast<const void*>(&d) : &f; }
};

int to_int(int64_t v, const std::string& what);  // OPC_NOT_IMPLEMENTED beyond int

// ---- the op families -------------------------------------------------------------------------

using Body = void (*)(Call&);

struct OpDef {
  const char* name;  // "aten::mm"
  Body forward;
  Body backward;  // nullptr: none
};

std::vector<OpDef> blas_ops();
std::vector<OpDef> conv_ops();
std::vector<OpDef> dnn_ops();  // softmax, activations, pooling, batch norm

}  // namespace opc_cudalibs
