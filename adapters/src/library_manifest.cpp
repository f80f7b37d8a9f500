#include "opconform/adapters/library_manifest.h"

namespace opconform::adapters {

const ManifestOp* LibraryManifest::find(const std::string& op) const {
  for (const auto& o : ops)
    if (o.name == op) return &o;
  return nullptr;
}

LibraryManifest describe_library(const LoadedLibrary& library, const Registry& registry) {
  LibraryManifest m;
  m.name = library.name(), m.version = library.version(), m.origin = library.origin();
  for (const auto& op : library.ops()) {
    ManifestOp o;
    o.name = op;
    if (auto handle = registry.find(op); handle && handle->has_schema()) o.schema = handle->schema().to_string();
    o.cpu = library.has_kernel(op, OPC_KERNEL_CPU), o.cuda = library.has_kernel(op, OPC_KERNEL_CUDA);
    o.fake = library.has_kernel(op, OPC_KERNEL_FAKE), o.backward = library.has_kernel(op, OPC_KERNEL_BACKWARD);
    o.dtypes = library.declared_dtypes(op);
    o.declared = library.declared(op);
    m.ops.push_back(std::move(o));
  }
  m.problems = library.problems();
  m.dangling = registry.dangling_impls();
  m.option_specs = library.option_specs();
  return m;
}

}  // namespace opconform::adapters
