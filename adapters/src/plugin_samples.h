// A plugin's C sample builder (OpcSampleBuilderFn, ABI 1.1) as a SampleBuilder: the host's
// SampleDraw offered through the OpcSampleDraw vtable, the values the builder writes converted to
// the schema's argument types. Private to adapters/.
#pragma once
#include <string>

#include "opconform/core/sample_draw.h"
#include "opconform/core/schema.h"
#include "opconform/plugin.h"

namespace opconform::adapters::detail {

// Note [Plugin sample builders]: the builder is C code, so every draw crosses as a C call that
// cannot throw. An exception a draw raises (RapidCheck uses them for control flow, and a draw that
// cannot be satisfied throws kInvalidArgument) is kept, the builder gets an error status and must
// return it, and the first exception is rethrown unchanged once the builder is back — so the
// generator sees exactly what a C++ builder would have raised.
SampleBuilder make_plugin_sample_builder(OpcSampleBuilderFn fn, void* user_data, FunctionSchema schema,
                                         std::string library, uint32_t abi_version);

}  // namespace opconform::adapters::detail
