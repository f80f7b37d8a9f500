#include "opconform/reference/detail/op_builder.h"

#include <algorithm>

#include "opconform/core/error.h"

namespace opconform::reference::detail {

OpBuilder::OpBuilder(Library& lib, std::string_view schema, std::string family, std::string doc, std::vector<Tag> tags,
                     SourceLocation loc)
    : lib_(&lib), loc_(loc) {
  out_ = std::find(tags.begin(), tags.end(), Tag::out) != tags.end();
  name_ = lib.define(schema, std::move(tags), "", loc);
  data_.family = std::move(family);
  data_.doc = std::move(doc);
  if (out_) {
    lib_->impl(name_, autograd::refuse_autograd_kernel(std::string(autograd::kOutOperatorReason)),
               DispatchKey::Autograd, {}, loc_);
  }
  commit();
}

OpBuilder& OpBuilder::autograd(autograd::BackwardFn backward, autograd::SetupContextFn setup, bool double_backward) {
  return autograd_kernel(autograd::make_autograd_kernel(std::move(backward), std::move(setup)), double_backward);
}

OpBuilder& OpBuilder::autograd_kernel(KernelFunction kernel, bool double_backward) {
  OPCONFORM_CHECK(!out_, ErrorCode::kRegistration, name_, ": out= operators do not support autograd");
  lib_->impl(name_, std::move(kernel), DispatchKey::Autograd, {}, loc_);
  data_.double_backward = double_backward;
  return commit();
}

OpBuilder& OpBuilder::vmap(VmapRule rule) {
  lib_->impl(name_, make_vmap_kernel(std::move(rule)), DispatchKey::Batched, {}, loc_);
  return *this;
}

// The op's dtypes are part of its constraints, so that generated samples cover each of them
// (GenerateSpec::dtypes empty) and ScalarType arguments take them.
OpBuilder& OpBuilder::dtypes(std::vector<DType> dtypes) {
  data_.constraints.dtypes = std::move(dtypes);
  return commit();
}

OpBuilder& OpBuilder::constraints(InputConstraints constraints) {
  if (constraints.dtypes.empty()) constraints.dtypes = data_.constraints.dtypes;
  data_.constraints = std::move(constraints);
  return commit();
}

OpBuilder& OpBuilder::samples(SampleBuilder builder) {
  data_.sample_builder = std::move(builder);
  return commit();
}

OpBuilder& OpBuilder::tolerance(DType dtype, Tolerance tolerance, std::string reason) {
  data_.tolerances.push_back({dtype, tolerance, std::move(reason)});
  return commit();
}

OpBuilder& OpBuilder::rounding(RoundingContract contract) {
  data_.rounding = contract;
  return commit();
}

OpBuilder& OpBuilder::layout_query() {
  data_.layout_query = true;
  return commit();
}

OpBuilder& OpBuilder::addresses_storage() {
  data_.addresses_storage = true;
  return commit();
}

OpBuilder& OpBuilder::commit() {
  lib_->registry().set_op_data(name_, data_);
  return *this;
}

}  // namespace opconform::reference::detail
