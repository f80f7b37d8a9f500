// The host side of one boxed call across the C ABI: IValues out to OpcValues, the kernel called,
// OpcValues back to IValues. Private to adapters/.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "opconform/core/ivalue.h"
#include "opconform/core/schema.h"
#include "opconform/plugin.h"

namespace opconform::adapters::detail {

// A kernel as the plugin registered it.
struct PluginKernel {
  OpcKernelFn fn = nullptr;
  void* user_data = nullptr;
};

// Calls `kernel` for `op_name` with `args` (one IValue per schema argument, defaults filled) and
// returns its results converted to the types of `returns`. `fake`: tensors cross without data and
// results become fake tensors on the device of the call. `library` names the plugin in errors.
// Writable tensor arguments are those `writable[i]` says (others are marked READ_ONLY).
// Throws opconform::Error naming the operator, the plugin and the kernel kind on a failing status
// or a malformed result; never lets a resource leak.
std::vector<IValue> call_plugin_kernel(const PluginKernel& kernel, const std::string& library, const std::string& op_name,
                                       std::string_view kind, const std::vector<IValue>& args,
                                       const std::vector<bool>& writable, const std::vector<Argument>& returns,
                                       bool fake);

}  // namespace opconform::adapters::detail
