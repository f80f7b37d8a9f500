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

// What stays the same from one call of a kernel to the next: known at registration.
struct PluginCallSite {
  std::string library;  // names the plugin in errors
  std::string op_name;  // "aten::add.Tensor"
  std::string kind;     // "cpu", "fake", "backward": in errors
  std::vector<bool> writable;    // per argument: the schema lets the kernel write it (others are READ_ONLY)
  std::vector<Argument> returns; // the types results are converted to
  uint32_t abi_version = OPC_PLUGIN_ABI_VERSION_1;  // the plugin's: what the call may carry (plugin.h)
  bool fake = false;    // tensors cross without data; results become fake tensors on the call's device
};

// Calls `kernel` with `args` (one IValue per schema argument, defaults filled) and returns its
// results converted to the site's return types. `seeded`: the op draws random numbers (tagged
// nondeterministic_seeded), so a version-2 call gets a seed. Throws opconform::Error naming the operator, the
// plugin and the kernel kind on a failing status or a malformed result; never lets a resource leak.
std::vector<IValue> call_plugin_kernel(const PluginKernel& kernel, const PluginCallSite& site,
                                       const std::vector<IValue>& args, bool seeded = false);

}  // namespace opconform::adapters::detail
