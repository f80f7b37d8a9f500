// Coverage of PyTorch's Core ATen opset by the reference registry: which operators of the opset
// (reference/data/core_aten_opset.tsv, the overloads PyTorch tags 'core') are implemented, and
// with which parts. docs/reference.md is generated from it (opconform list --markdown).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "opconform/reference/op_info.h"

namespace opconform::reference {

struct CoreAtenOp {
  std::string name;    // "aten::add.Tensor"
  std::string schema;  // as PyTorch prints it
};

// Parses an opset table (tab-separated name and schema; '#' lines are comments). Throws
// opconform::Error naming `origin` and the line when a line is malformed.
std::vector<CoreAtenOp> parse_core_aten_opset(std::string_view text, const std::string& origin);
// Reads and parses a table file; an unreadable file is an Error naming it.
std::vector<CoreAtenOp> read_core_aten_opset(const std::string& path);
// The table this opconform was built with (reference/data/core_aten_opset.tsv, compiled in).
const std::vector<CoreAtenOp>& core_aten_opset();

// The Markdown coverage page: a summary, then one row per Core ATen op (implemented or not yet;
// CPU, fake, autograd, vmap, CUDA), then the reference's extra overloads (in-place, out=, ...).
std::string format_coverage_markdown(const std::vector<CoreAtenOp>& opset, const std::vector<OpInfo>& infos);

// Reference ops named like a Core ATen op whose schema string differs from the opset's (should be
// none): "name: ours != theirs" lines.
std::vector<std::string> schema_mismatches(const std::vector<CoreAtenOp>& opset, const std::vector<OpInfo>& infos);

}  // namespace opconform::reference
