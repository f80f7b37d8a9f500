// kernel_op and wrap_kernel: operators implemented with hand-written kernels that capture can see
// inside (torch.library.triton_op / wrap_triton, in C++).
//
//   void axpy(const std::vector<Tensor>& in, const std::vector<Tensor>& out,
//             const std::vector<int64_t>& ints, const std::vector<double>& floats) { ... }
//
//   WrappedKernel k = wrap_kernel("axpy", axpy, registry);   // operator wrap_kernel::axpy
//   KernelOp op = kernel_op("mylib::scaled_add", "(Tensor x, Tensor y, float alpha) -> Tensor",
//       [&, k](const Stack& a) {
//         Tensor out = ...;                                  // registry ops: zeros like x
//         k({a[0].to_tensor(), a[1].to_tensor()}, {out}, {numel}, {a[2].to_double()});
//         return Stack{IValue(out)};
//       }, registry);
//   Stack r = op({x, y, 2.0});                               // eager: the body runs
//
// A raw kernel (RawKernelFn) is a plain function that reads `inputs` and writes `outputs`, which
// its caller allocated: it makes no tensors and changes no metadata, so it needs no fake kernel.
// Its launch arguments are the integer and float lists. wrap_kernel makes it an operator,
//   wrap_kernel::<name>(Tensor[] inputs, Tensor(a!)[] outputs, int[] ints, float[] floats) -> ()
// and a WrappedKernel call goes through the dispatcher, so that capture records it as a node
// with its launch arguments and the buffers it writes, and functionalize makes that node
// functional (its schema says `outputs` are written).
//
// A kernel_op's body is a program of registry operators and wrapped-kernel calls (nothing else
// may touch data). Capture does not record the kernel_op itself: the tracing mode runs its body
// inline (detail::register_kernel_op_body), so the graph holds the inner operators and the
// wrap_kernel nodes, which passes can see and replay. Note [kernel_op registrations] in
// kernel_op.cpp says at which keys each part is registered and why.
//
// Lifetimes: WrappedKernel and KernelOp are cheap handles; the registrations live while any copy
// lives (a body that captures a WrappedKernel keeps it registered) and must not outlive the
// registry.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "opconform/core/device.h"
#include "opconform/core/ivalue.h"
#include "opconform/core/registry.h"
#include "opconform/core/source_location.h"
#include "opconform/core/symint.h"

namespace opconform::compile {

// A raw kernel: reads `inputs`, writes into `outputs` (already allocated, on the kernel's device),
// with launch arguments `ints` and `floats`. Errors are thrown as exceptions (opconform::Error).
// A function pointer, not a closure: wrapping the same name again in the same registry is
// recognised as the same kernel by its address (see wrap_kernel).
using RawKernelFn = void (*)(const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                             const std::vector<int64_t>& ints, const std::vector<double>& floats);

namespace detail {
struct WrappedKernelState;
struct KernelOpState;
}  // namespace detail

// A raw kernel made an operator of one registry (wrap_kernel::<name>).
class WrappedKernel {
 public:
  explicit WrappedKernel(std::shared_ptr<detail::WrappedKernelState> state) : state_(std::move(state)) {}

  // "wrap_kernel::<name>".
  const std::string& op_name() const;
  OperatorHandle handle() const;
  DeviceType device() const;

  // Launches the kernel through the dispatcher. Every tensor must be on the kernel's device.
  // `ints` are SymInts so that a launch argument computed from sizes under capture
  // (x.sym_sizes()) stays symbolic in the graph and is evaluated again on replay; a plain
  // `x.numel()` would be baked in as the captured size. The raw kernel receives them concrete.
  void operator()(const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                  const std::vector<SymInt>& ints = {}, const std::vector<double>& floats = {}) const;

  const std::shared_ptr<detail::WrappedKernelState>& state() const { return state_; }

 private:
  std::shared_ptr<detail::WrappedKernelState> state_;
};

// Defines wrap_kernel::<name> in `registry` with `fn` as its kernel at `device`'s backend key, a
// fake kernel that does nothing (the outputs exist already: no metadata changes), and an autograd
// kernel that refuses inputs which require grad (a raw kernel has no derivative; a kernel_op that
// needs one says so at its own level, see Note [kernel_op registrations]).
//
// Once per name and registry: wrapping the same name with the same function and device again
// returns a handle to the same registration (it lives while any handle does); the same name with
// another function or device is an error (kRegistration). `name` is an identifier ([A-Za-z_]
// [A-Za-z0-9_]*). `device` is CPU, or CUDA in a build with CUDA (OPCONFORM_WITH_CUDA); anything
// else is refused (kInvalidArgument; CUDA without CUDA support: kNotImplemented).
WrappedKernel wrap_kernel(std::string name, RawKernelFn fn, Registry& registry, DeviceType device = DeviceType::CPU,
                          SourceLocation loc = SourceLocation::current());

// The body of a kernel_op: its arguments in schema order (all of them) in, its returns out.
using KernelOpBody = std::function<Stack(const Stack& args)>;

// An operator implemented by a body of registry ops and wrapped kernels.
class KernelOp {
 public:
  explicit KernelOp(std::shared_ptr<detail::KernelOpState> state) : state_(std::move(state)) {}

  // "ns::name" (with ".overload" when the schema has one).
  const std::string& name() const;
  OperatorHandle handle() const;
  const FunctionSchema& schema() const;

  // Calls through the dispatcher: `args` are every argument in schema order; returns the returns.
  Stack operator()(Stack args) const;

 private:
  std::shared_ptr<detail::KernelOpState> state_;
};

// Defines `qualified_name` ("ns::name" or "ns::name.overload") with `schema`, which is either the
// part after the name ("(Tensor x, float alpha) -> Tensor") or a whole schema of that same name,
// and registers `body` as its implementation, its fake kernel, and its inline body for capture.
// Defining a name the registry has already is an error (kRegistration, from Registry::define);
// so is a second live kernel_op of the same name in another registry, because the table capture
// reads bodies from is process-wide and keyed by name (detail/tracing.h).
// A body that returns another number of values than the schema has returns fails the call
// (kSchemaMismatch, naming the op).
KernelOp kernel_op(std::string qualified_name, std::string schema, KernelOpBody body, Registry& registry,
                   SourceLocation loc = SourceLocation::current());

}  // namespace opconform::compile
