// What a loaded library registered, as plain data: its name and version, each operator's schema,
// kernels and declared dtypes, and the problems of the load. The harness plans a run, lists and
// diagnoses a library from a manifest a child process sent it, so no code of the library runs
// in the harness (Note [No plugin code in the harness], harness/src/library_probe.cpp).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "opconform/adapters/loader.h"
#include "opconform/core/dtype.h"
#include "opconform/core/registry.h"

namespace opconform::adapters {

struct ManifestOp {
  std::string name;
  std::string schema;  // the schema the op is checked against ("" when it has none)
  bool cpu = false, cuda = false, fake = false, backward = false;  // the kernels it registered
  std::optional<std::vector<DType>> dtypes;  // LoadedLibrary::declared_dtypes
  LoadedLibrary::Declared declared;          // LoadedLibrary::declared (fake == true too when reference_fake)
};

struct LibraryManifest {
  std::string name, version, origin;
  std::vector<ManifestOp> ops;         // LoadedLibrary::ops(), in that order
  std::vector<LoadProblem> problems;   // LoadedLibrary::problems()
  std::vector<std::string> dangling;   // implementations without a definition (Registry::dangling_impls)
  std::vector<PluginOptionSpec> option_specs;  // LoadedLibrary::option_specs

  const ManifestOp* find(const std::string& op) const;
};

// The manifest of `library`, which registered into `registry`.
LibraryManifest describe_library(const LoadedLibrary& library, const Registry& registry);

}  // namespace opconform::adapters
