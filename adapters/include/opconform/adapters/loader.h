// Loading an operator library into a Registry through the C ABI (opconform/plugin.h).
//
//   Registry lib_registry;
//   auto lib = load_plugin("build/libvendor_ops.so", lib_registry, {.schemas = &reference_registry});
//   lib->ops();       // the operators it implements
//   lib->problems();  // per-op problems that did not stop the load (a schema that differs, ...)
//
// Every failure that stops the load — file missing, not a shared library, no entry point,
// another ABI version, a schema that does not parse, a duplicate definition, register_ops
// failing — throws PluginError naming the library (and the operator where there is one).
// Registrations are undone and the library closed when the LoadedLibrary is destroyed.
#pragma once
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "opconform/core/dtype.h"
#include "opconform/core/error.h"
#include "opconform/core/registry.h"
#include "opconform/plugin.h"

namespace opconform::adapters {

class PluginError : public Error {
 public:
  PluginError(std::string library, std::string message)
      : Error(ErrorCode::kRegistration, "plugin '" + library + "': " + message), library_(std::move(library)) {}
  const std::string& library() const { return library_; }

 private:
  std::string library_;
};

// Options given to a plugin on the command line (`--plugin-option NAME=VALUE`), in their order.
using PluginOptions = std::vector<std::pair<std::string, std::string>>;

// "NAME=VALUE" as a pair; throws Error(kInvalidArgument) when there is no '=' or no name.
std::pair<std::string, std::string> parse_plugin_option(std::string_view text);

// An option as the command line spells it ("extension=/x/_C.so"), for repro lines and reports.
std::string format_plugin_option(const std::pair<std::string, std::string>& option);

struct LoadOptions {
  // Where an operator the plugin implements without defining it takes its schema, tags and data
  // (the reference registry: its constraints, sample builder and tolerances; Note [Per-op data
  // belongs to the registry]); a definition of one of its ops must match it. Null: every op must
  // be defined. A plugin's declare_dtypes replaces the dtypes of that data.
  const Registry* schemas = nullptr;
  // Checked against the options the plugin declares (OpcPlugin.options, ABI 1.1) before
  // register_ops, which reads them from the registrar.
  PluginOptions plugin_options;
};

// An option a plugin declares it takes (OpcOptionSpec).
struct PluginOptionSpec {
  std::string name, help, default_value;
  bool required = false, repeatable = false;
};

// A per-op problem found while loading that does not stop the load: the op is left out.
struct LoadProblem {
  std::string op;
  std::string message;
};

class LoadedLibrary {
 public:
  virtual ~LoadedLibrary() = default;
  virtual const std::string& name() const = 0;     // OpcPlugin.name
  virtual const std::string& version() const = 0;  // OpcPlugin.version
  virtual const std::string& origin() const = 0;   // the path, or "in-process"
  // Operators with at least one kernel (real, fake or backward), sorted.
  virtual std::vector<std::string> ops() const = 0;
  virtual bool has_kernel(const std::string& op, OpcKernelKind kind) const = 0;
  // The dtypes the plugin declared for `op` (nullopt when it declared none).
  virtual std::optional<std::vector<DType>> declared_dtypes(const std::string& op) const = 0;
  virtual const std::vector<LoadProblem>& problems() const = 0;
  // The options the plugin takes (empty for an ABI 1.0 plugin).
  virtual const std::vector<PluginOptionSpec>& option_specs() const = 0;
  // What the plugin declared about `op` beyond its kernels (declare_op, ABI 1.1).
  struct Declared {
    bool reference_fake = false;   // its fake kernel is the reference's (OPC_OP_REFERENCE_FAKE)
    bool sample_builder = false;   // it builds its own samples
    bool constraints = false;      // it declared input constraints
  };
  virtual Declared declared(const std::string& op) const = 0;
};

// dlopen + entry point + ABI check + register_ops into `registry`.
std::unique_ptr<LoadedLibrary> load_plugin(const std::filesystem::path& path, Registry& registry,
                                           const LoadOptions& options = {});
// The same for a plugin linked into this process (OPCONFORM_IN_PROCESS_PLUGIN); `origin` names it.
std::unique_ptr<LoadedLibrary> load_plugin(const OpcPlugin* plugin, Registry& registry, const LoadOptions& options = {},
                                           std::string origin = "in-process");

}  // namespace opconform::adapters
