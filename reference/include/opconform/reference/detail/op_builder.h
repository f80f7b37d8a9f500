// OpBuilder: how a family file defines one reference operator — the schema, then its parts, each
// registered at once into the family's Library; the family, doc and sample spec go into the op's
// data in the registry (core/op_data.h), from which op_info.h reads its summary:
//
//   OpBuilder(lib, "aten::sin(Tensor self) -> Tensor", "elementwise_unary", "sine, elementwise")
//       .dtypes(kFloatingAndComplex)
//       .cpu(sin_kernel)
//       .fake(fake_unary_float)
//       .autograd(sin_backward, save_inputs)
//       .vmap(elementwise_vmap_rule(1));
//
// The sample spec (constraints, sample builder, tolerance overrides, rounding) is data like the
// doc: opcheck over generated samples reads it from the op it is given.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "opconform/core/autograd.h"
#include "opconform/core/fake_tensor.h"
#include "opconform/core/library.h"
#include "opconform/core/op_data.h"
#include "opconform/core/source_location.h"
#include "opconform/core/vmap.h"
#include "opconform/reference/detail/op_support.h"

namespace opconform::reference::detail {

class OpBuilder {
 public:
  // schema: "aten::name.overload(...) -> ..." exactly as PyTorch prints it.
  // tags: PyTorch's (Tag::nondeterministic_seeded for random ops, Tag::inplace, Tag::out...). A
  // Tag::out op refuses autograd as PyTorch's out= ops do (autograd::refuse_autograd_kernel), and
  // takes no formula.
  OpBuilder(Library& lib, std::string_view schema, std::string family, std::string doc, std::vector<Tag> tags = {},
            SourceLocation loc = SourceLocation::current());

  const std::string& name() const { return name_; }
  Registry& registry() const { return lib_->registry(); }

  // The CPU kernel (typed or boxed).
  template <typename F>
  OpBuilder& cpu(F&& kernel) {
    lib_->impl(name_, std::forward<F>(kernel), DispatchKey::CPU, {}, loc_);
    return *this;
  }
  // One kernel for every backend (views and other metadata-only ops; factories that dispatch on
  // their Device argument). It serves fake tensors too unless a fake kernel is registered.
  template <typename F>
  OpBuilder& composite_explicit(F&& kernel) {
    lib_->impl(name_, std::forward<F>(kernel), DispatchKey::CompositeExplicitAutograd, {}, loc_);
    return *this;
  }
  // The fake kernel: metadata only (typed or boxed); data-dependent sizes through get_ctx().
  template <typename F>
  OpBuilder& fake(F&& kernel) {
    lib_->impl(name_, wrap_fake_kernel(std::forward<F>(kernel)), DispatchKey::Fake, {}, loc_);
    return *this;
  }
  // The autograd formula. double_backward: the backward is written with registry ops.
  OpBuilder& autograd(autograd::BackwardFn backward, autograd::SetupContextFn setup = nullptr,
                      bool double_backward = true);
  // The formula of an op that is a composite of registry ops (Note [Backward ops as composites]).
  OpBuilder& autograd(CompositeFormula formula) {
    return autograd(std::move(formula.backward), std::move(formula.setup), /*double_backward=*/true);
  }
  // A kernel of the op's own at DispatchKey::Autograd, for gradients a formula cannot give (cat:
  // core's autograd has none for Tensor[] arguments) or formulas that need more than
  // setup_context sees (in-place ops reading self from before the write: op_support.h).
  OpBuilder& autograd_kernel(KernelFunction kernel, bool double_backward = true);
  OpBuilder& vmap(VmapRule rule);

  OpBuilder& dtypes(std::vector<DType> dtypes);
  OpBuilder& constraints(InputConstraints constraints);
  OpBuilder& samples(SampleBuilder builder);
  OpBuilder& tolerance(DType dtype, Tolerance tolerance, std::string reason);
  // The op's float16/bfloat16 results are its float64 result rounded once (Note [Low-precision
  // rounding]); the elementwise families declare it for all their ops.
  OpBuilder& rounding(RoundingContract contract = {});
  // The op's result is its input's layout (Note [Layout queries] in core/op_data.h).
  OpBuilder& layout_query();
  // The op reads its input's storage through strides of its own (Note [Ops that address storage]).
  OpBuilder& addresses_storage();

 private:
  // Stores data_ as the op's data (validated against its schema).
  OpBuilder& commit();

  Library* lib_;
  SourceLocation loc_;
  std::string name_;
  OpData data_;
  bool out_ = false;  // Tag::out
};

}  // namespace opconform::reference::detail
