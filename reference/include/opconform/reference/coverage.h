// Coverage of PyTorch's Core ATen opset by the reference registry: which operators of the opset
// (reference/data/core_aten_opset.tsv, the overloads PyTorch tags 'core') are implemented, and
// with which parts. docs/reference.md is generated from it (opconform list --markdown).
#pragma once

#include <string>
#include <vector>

#include "opconform/reference/op_info.h"

namespace opconform::reference {

struct CoreAtenOp {
  std::string name;    // "aten::add.Tensor"
  std::string schema;  // as PyTorch prints it
};

// Reads the opset table (tab-separated name and schema; '#' lines are comments). Throws
// opconform::Error naming the file when it cannot be read or a line is malformed.
std::vector<CoreAtenOp> read_core_aten_opset(const std::string& path);

// The path of the table in the source tree (compiled in).
std::string default_core_aten_opset_path();

// The Markdown coverage page: a summary, then one row per Core ATen op (implemented or not yet;
// CPU, fake, autograd, vmap, CUDA), then the reference's extra overloads (in-place, out=, ...).
std::string format_coverage_markdown(const std::vector<CoreAtenOp>& opset, const std::vector<OpInfo>& infos);

// Reference ops named like a Core ATen op whose schema string differs from the opset's (should be
// none): "name: ours != theirs" lines.
std::vector<std::string> schema_mismatches(const std::vector<CoreAtenOp>& opset, const std::vector<OpInfo>& infos);

}  // namespace opconform::reference
