// Fake tensors, FakeTensorMode and fake kernels (torch._subclasses.FakeTensorMode and the
// register_fake / get_ctx side of torch.library).
//
// A fake tensor has metadata (sizes, strides, dtype, device) and no data; it carries the
// DispatchKey::Fake key, so operators called on it run their Fake kernel, which computes the
// output metadata only. Sizes may be symbolic (SymInt, symint.h): sym_sizes() holds them and the
// concrete impl sizes hold stand-ins (Note [Concrete sizes of symbolic fakes]).
//
//   FakeTensorMode mode;
//   FakeTensorModeGuard guard(mode);
//   Tensor fx = mode.from_tensor(x, /*dynamic=*/true);   // sizes s0, s1
//   Tensor fy = op.call(fx);                              // runs op's fake kernel
//   Tensor fz = empty({3});                               // factories make fakes too
//
// Fake kernels are registered at DispatchKey::Fake through wrap_fake_kernel (custom_op's
// register_fake does that); install_fake_fallback covers ops without one.
//
// Note [Concrete sizes of symbolic fakes]: impl sizes/strides (Tensor::sizes()) of a fake with
// symbolic sizes hold each symbol's hint when it is backed, and for an unbacked symbol (range
// [min, max]) the placeholder clamp(2, min, max): 2 when the range allows it, so that code
// reading the concrete sizes does not take the special paths of empty or size-1 dimensions.
// Placeholders are stand-ins, not hints: SymInt::hint() stays empty and comparisons on the
// symbol are still decided by its range or fail. Read sym_sizes() in fake kernels.
//
// Note [Nested dispatch in fake kernels]: while a fake kernel runs, the FakeTensorMode stays
// active and DispatchKey::Fake is NOT excluded. Its inputs are fake tensors, so any operator it
// calls on them runs that operator's fake kernel (or the fallback), never a real kernel that
// would touch data; factories it calls (empty, zeros, ...) make fake tensors. This is what a
// fake kernel composed of other operators needs. The Meta fallback is the exception: it runs a
// Meta kernel on meta tensors with the mode suspended, so that kernel sees a plain meta world.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "opconform/core/kernel.h"
#include "opconform/core/library.h"
#include "opconform/core/registry.h"
#include "opconform/core/shape_env.h"
#include "opconform/core/symint.h"
#include "opconform/core/tensor.h"

namespace opconform {

// The symbolic sizes and strides of a fake tensor (TensorImpl::sym_shape).
struct SymShape {
  std::vector<SymInt> sizes, strides;
};

// A data-less fake tensor with (possibly symbolic) sizes; strides default to contiguous ones
// (symbolic when the sizes are). Concrete metadata: Note [Concrete sizes of symbolic fakes].
Tensor make_fake_tensor(std::vector<SymInt> sizes, DType dtype, Device device,
                        std::optional<std::vector<SymInt>> strides = {});
// The value a fake tensor's concrete metadata holds for s: its hint, or with unbacked symbols
// at their placeholders (Note [Concrete sizes of symbolic fakes]).
int64_t concrete_stand_in(const SymInt& s);

class FakeTensorMode {
 public:
  // Symbols live in `shape_env` (a new one when null).
  explicit FakeTensorMode(std::shared_ptr<ShapeEnv> shape_env = nullptr);
  ~FakeTensorMode();
  FakeTensorMode(const FakeTensorMode&) = delete;
  FakeTensorMode& operator=(const FakeTensorMode&) = delete;

  ShapeEnv& shape_env() const { return *shape_env_; }
  const std::shared_ptr<ShapeEnv>& shared_shape_env() const { return shape_env_; }

  // A fake tensor with real's metadata on real's device. Memoised: the same real tensor (and
  // the same `dynamic`) gives the same fake tensor, and fakes of real tensors that share a
  // storage share a fake storage (so aliasing survives). With dynamic, every dimension of size
  // >= 2 gets its own backed symbol, named after `name` in its source ("x.size(0)"; "t<N>" when
  // empty); strides become symbolic where they are products of those sizes. A tensor that is
  // already fake is returned as is. The memo keeps the real tensors alive while the mode lives.
  Tensor from_tensor(const Tensor& real, bool dynamic = false, std::string name = "");

  // The innermost mode active on this thread (FakeTensorModeGuard), or null.
  static FakeTensorMode* current();

 private:
  struct Memo;
  std::shared_ptr<ShapeEnv> shape_env_;
  std::unique_ptr<Memo> memo_;
  std::mutex mutex_;
};

// Activates a mode on this thread for a scope: DispatchKey::Fake is included in every dispatch
// (so every operator reaches its Fake kernel, real tensor arguments included), factories make
// fake tensors, and the mode's ShapeEnv is the current one. Guards nest.
class FakeTensorModeGuard {
 public:
  explicit FakeTensorModeGuard(FakeTensorMode& mode);
  ~FakeTensorModeGuard();
  FakeTensorModeGuard(const FakeTensorModeGuard&) = delete;
  FakeTensorModeGuard& operator=(const FakeTensorModeGuard&) = delete;

 private:
  FakeTensorMode* previous_;
  IncludeDispatchKeyGuard include_fake_;
  ShapeEnvGuard shape_env_;
};

// What a fake kernel may ask while it runs (torch.library.get_ctx()).
class FakeKernelContext {
 public:
  FakeKernelContext(std::string op_name, FakeTensorMode& mode) : op_name_(std::move(op_name)), mode_(&mode) {}
  // A size that depends on the data (nonzero's row count): a new unbacked symbol u<N> with the
  // range [min, max] in the mode's ShapeEnv.
  SymInt new_dynamic_size(int64_t min = 0, int64_t max = INT64_MAX);
  const std::string& op_name() const { return op_name_; }
  FakeTensorMode& mode() const { return *mode_; }

 private:
  std::string op_name_;
  FakeTensorMode* mode_;
};

// The context of the innermost fake kernel running on this thread; throws outside one.
FakeKernelContext& get_ctx();

// The kernel to register at DispatchKey::Fake for an operator whose fake kernel is
// `user_fake_fn` (typed or boxed). It converts real tensor arguments to fake ones (through the
// active mode, or a temporary one when none is active), runs the user function with the mode
// active and get_ctx() set (Note [Nested dispatch in fake kernels]), converts any real tensor
// it returns, and a data access inside it fails with "fake kernel of '<op>' accessed tensor
// data: ...".
KernelFunction wrap_fake_kernel(KernelFunction user_fake_fn);
template <typename F>
  requires(!std::is_same_v<std::decay_t<F>, KernelFunction>)
KernelFunction wrap_fake_kernel(F&& user_fake_fn) {
  return wrap_fake_kernel(Library::make_kernel(std::forward<F>(user_fake_fn), false));
}

// Registers, at DispatchKey::Fake of `registry`, the fallback for operators without a fake
// kernel: one with a kernel registered directly at DispatchKey::Meta runs it on meta copies of
// its tensor arguments and returns fake tensors on the device of the first tensor argument (or
// of the first Device argument; CPU when neither); any other fails with kNotImplemented
// "operator '<op>' has no fake kernel; register one with register_fake". Symbolic sizes are not
// propagated through a Meta kernel: it sees the concrete stand-ins.
RegistrationHandle install_fake_fallback(Registry& registry);

namespace detail {
// Trivially initialised: read by every empty_strided call.
inline thread_local FakeTensorMode* tls_fake_tensor_mode = nullptr;
std::optional<Tensor> make_fake_for_factory(IntArrayRef sizes, IntArrayRef strides, const TensorOptions& options);
// Called by empty_strided: a fake tensor instead of an allocation while a mode is active.
inline std::optional<Tensor> fake_factory_hook(IntArrayRef sizes, IntArrayRef strides, const TensorOptions& options) {
  if (tls_fake_tensor_mode == nullptr) [[likely]] return std::nullopt;
  return make_fake_for_factory(sizes, strides, options);
}
// Called by Tensor::const_data_ptr on a fake tensor: the error, worded for where it happens
// (inside a fake kernel it names the operator and points to get_ctx().new_dynamic_size()).
[[noreturn]] void throw_fake_data_access(const Tensor& t);
}  // namespace detail

}  // namespace opconform
