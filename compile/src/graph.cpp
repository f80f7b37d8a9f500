// Graph: values, names, and the readable form (written by export.cpp, which owns the text format).
#include "opconform/compile/graph.h"

#include "opconform/compile/export.h"

namespace opconform::compile {

ValueId Graph::add_value(std::optional<TensorMeta> tensor, std::string name) {
  ValueId id = static_cast<ValueId>(values.size());
  values.push_back(Value{id, std::move(name), std::move(tensor)});
  return id;
}

std::string Graph::to_string() const { return export_graph(*this); }

}  // namespace opconform::compile
