// OpInfo: a summary of one reference operator, read from the registry it was registered into —
// its data (OpData: family, doc, dtypes, constraints, sample builder, tolerances), and which parts
// exist (CPU, CUDA and fake kernels, autograd formula, vmap rule), as the registry's dispatch
// entries say. `opconform list` and docs/reference.md are printed from it.
//
// Nothing is recorded elsewhere (Note [Per-op data belongs to the registry] in core/op_data.h):
// two registries into which the reference was registered give the same infos, a registry without
// it gives none.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "opconform/core/dtype.h"
#include "opconform/core/op_data.h"
#include "opconform/core/registry.h"
#include "opconform/core/schema.h"

namespace opconform::reference {

struct OpInfo {
  std::string name;    // "aten::add.Tensor"
  std::string schema;  // as PyTorch prints it
  std::string family;  // "elementwise_unary", "reduction", ...
  std::string doc;     // one line
  std::vector<DType> dtypes;  // the dtypes the CPU kernel accepts; samples cover these
  bool cpu = false, fake = false, autograd = false, vmap = false, cuda = false;
  // A formula whose backward is itself differentiable (written with registry ops).
  bool double_backward = false;
  // Random ops (tagged nondeterministic_seeded): determinism is not expected of them.
  bool nondeterministic = false;
  std::shared_ptr<const OpData> data;  // all of it
};

// The reference operators of `registry` (those with a family in their data: every op a
// register_<family> call defined), sorted by name.
std::vector<OpInfo> reference_op_infos(const Registry& registry);
// One of them (nullopt when `registry` has no such reference op).
std::optional<OpInfo> reference_op_info(const Registry& registry, std::string_view name);

// Kind of schema, as the list prints it: functional, inplace, out, mutable, view.
std::string_view schema_kind_name(const FunctionSchema& schema);

// The registry as text, one line per op: name, kind, dtypes, devices, autograd, vmap, schema.
std::string format_reference_table(const std::vector<OpInfo>& infos);

}  // namespace opconform::reference
