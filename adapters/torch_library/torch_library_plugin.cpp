// The TORCH_LIBRARY adapter: an opconform plugin (opconform/plugin.h, ABI 2) that offers the ops
// a libtorch extension registers (TORCH_LIBRARY / TORCH_LIBRARY_IMPL: torchvision's _C.so, a
// user's own library), defined with their own schemas.
//
//   opconform check --library libopconform_torch_library.so --plugin-option extension=/x/_C.so
//
// register_ops dlopens each `extension` (its static initializers register its ops with libtorch's
// dispatcher), takes the ops that appeared (the dispatcher's op names before and after), defines
// each with its exact schema (c10::toString) and registers the kernels the extension has:
//   - OPC_KERNEL_CPU: when the dispatcher has a CPU kernel (a composite one counts);
//   - OPC_KERNEL_FAKE: from the op's Meta kernel, when it has one; otherwise none, and
//     test_faketensor reports the missing fake kernel (Note [No fake kernel without a meta kernel]);
//   - the backward as operators "<ns>_backward::<op>" and "<ns>_backward2::<op>" (declare_backward_op,
//     the torch bridge's), when an autograd kernel is registered (Note [Which ops are differentiable]).
// Then it loads the profiles: libraries exporting opconform_profile(registrar), which declare what
// the schemas cannot say (dtypes, sample builders; see README.md). The kernels and conversions are
// the torch bridge's (adapters/torch_common), shared with the ATen adapter.
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ATen/Context.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/Backtrace.h>
#include <torch/version.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "opconform/plugin.h"
#include "torch_bridge.h"

namespace {

namespace bridge = opconform::torch_bridge;

// What a profile exports (README.md).
using ProfileFn = OpcStatus (*)(const OpcRegistrar*);
constexpr const char* kProfileEntryPoint = "opconform_profile";

const OpcOptionSpec kOptions[] = {
    {"extension", "a shared library registering ops with TORCH_LIBRARY (dlopened; built against this libtorch)",
     nullptr, OPC_OPTION_REQUIRED | OPC_OPTION_REPEATABLE, 0},
    {"namespace", "check the ops of this namespace", "every namespace that gained ops while loading the extensions",
     OPC_OPTION_REPEATABLE, 0},
    {"profile", "a profile library (exports opconform_profile: dtypes, sample builders)",
     "libopconform_profile_<namespace>.so next to this plugin, when it exists", OPC_OPTION_REPEATABLE, 0},
};

struct Options {
  std::vector<std::string> extensions, namespaces, profiles;
};

// A failure of register_ops as a whole: its status and the message for r->set_error.
struct LoadFailure {
  OpcStatus status;
  std::string message;
};

Options read_options(const OpcRegistrar* r) {
  Options o;
  for (int64_t i = 0; i < r->num_options; ++i) {
    const OpcOption& option = r->options[i];
    if (option.name == nullptr || option.value == nullptr) continue;
    const std::string name = option.name;
    if (name == "extension") o.extensions.emplace_back(option.value);
    if (name == "namespace") o.namespaces.emplace_back(option.value);
    if (name == "profile") o.profiles.emplace_back(option.value);
  }
  if (o.extensions.empty()) throw LoadFailure{OPC_INVALID_ARGUMENT, "no extension given (--plugin-option extension=PATH)"};
  return o;
}

// ---------------------------------------------------------------- loading an extension

// Whether the ELF file at `path` needs a Python interpreter: it links libpython or libtorch_python,
// or leaves a Py* / _Py* symbol undefined (pybind11 modules leave libpython's symbols to the
// interpreter that imports them). Read from the file's dynamic symbol table and DT_NEEDED entries,
// so that a failing dlopen can say why without parsing dlerror's text.
bool needs_python(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  const bool sized = ::fstat(fd, &st) == 0 && st.st_size >= static_cast<off_t>(sizeof(Elf64_Ehdr));
  void* map = sized ? ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
  ::close(fd);
  if (map == MAP_FAILED) return false;
  const size_t size = static_cast<size_t>(st.st_size);
  const auto* base = static_cast<const unsigned char*>(map);
  const auto* eh = reinterpret_cast<const Elf64_Ehdr*>(base);
  auto inside = [&](uint64_t offset, uint64_t bytes) { return offset <= size && bytes <= size - offset; };
  bool python = false;
  if (std::memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0 && eh->e_ident[EI_CLASS] == ELFCLASS64 &&
      inside(eh->e_shoff, uint64_t{eh->e_shnum} * sizeof(Elf64_Shdr))) {
    const auto* sections = reinterpret_cast<const Elf64_Shdr*>(base + eh->e_shoff);
    for (int i = 0; i < eh->e_shnum && !python; ++i) {
      const Elf64_Shdr& s = sections[i];
      if ((s.sh_type != SHT_DYNSYM && s.sh_type != SHT_DYNAMIC) || s.sh_link >= eh->e_shnum) continue;
      const Elf64_Shdr& strtab = sections[s.sh_link];
      if (!inside(s.sh_offset, s.sh_size) || !inside(strtab.sh_offset, strtab.sh_size)) continue;
      auto name_at = [&](uint64_t index) -> std::string {
        if (index >= strtab.sh_size) return {};
        const char* p = reinterpret_cast<const char*>(base + strtab.sh_offset + index);
        return std::string(p, strnlen(p, strtab.sh_size - index));
      };
      if (s.sh_type == SHT_DYNSYM) {
        const auto* syms = reinterpret_cast<const Elf64_Sym*>(base + s.sh_offset);
        for (size_t k = 0; k < s.sh_size / sizeof(Elf64_Sym) && !python; ++k) {
          if (syms[k].st_shndx != SHN_UNDEF) continue;
          const std::string name = name_at(syms[k].st_name);
          python = name.rfind("Py", 0) == 0 || name.rfind("_Py", 0) == 0;
        }
      } else {
        const auto* dyn = reinterpret_cast<const Elf64_Dyn*>(base + s.sh_offset);
        for (size_t k = 0; k < s.sh_size / sizeof(Elf64_Dyn) && !python; ++k) {
          if (dyn[k].d_tag != DT_NEEDED) continue;
          const std::string needed = name_at(dyn[k].d_un.d_val);
          python = needed.rfind("libpython", 0) == 0 || needed.rfind("libtorch_python", 0) == 0;
        }
      }
    }
  }
  ::munmap(map, size);
  return python;
}

std::string real_path(const std::string& path) {
  char resolved[PATH_MAX];
  return ::realpath(path.c_str(), resolved) != nullptr ? std::string(resolved) : path;
}

// The file this plugin's copy of `symbol` comes from.
std::string own_library_of(void* symbol) {
  Dl_info info{};
  if (::dladdr(symbol, &info) == 0 || info.dli_fname == nullptr) return {};
  return real_path(info.dli_fname);
}

// An extension built against another libtorch (a pip wheel's) loads its own libc10 and
// libtorch_cpu and registers with that copy's dispatcher, where this plugin cannot see its ops:
// find a second copy of either among the loaded objects and say so.
void check_same_libtorch(void* handle, const std::string& extension) {
  struct Library {
    const char* prefix;
    std::string ours;
  };
  const Library ours[] = {
      {"libc10.so", own_library_of(reinterpret_cast<void*>(&c10::get_backtrace))},
      {"libtorch_cpu.so", own_library_of(reinterpret_cast<void*>(&c10::Dispatcher::realSingleton))},
  };
  struct link_map* map = nullptr;
  if (::dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || map == nullptr) return;
  while (map->l_prev != nullptr) map = map->l_prev;
  for (; map != nullptr; map = map->l_next) {
    if (map->l_name == nullptr || map->l_name[0] == '\0') continue;
    const std::string name = map->l_name;
    const std::string file = name.substr(name.find_last_of('/') + 1);
    for (const Library& library : ours) {
      if (file.rfind(library.prefix, 0) != 0 || library.ours.empty() || real_path(name) == library.ours) continue;
      throw LoadFailure{OPC_ERROR, "extension '" + extension + "' brought a second libtorch (" + name +
                                       ", this plugin uses " + library.ours +
                                       "): its ops register with that copy's dispatcher; build it against this libtorch"};
    }
  }
}

// c10::OperatorName has no order of its own; sorted by name, then overload (the order ops are offered in).
struct ByName {
  bool operator()(const c10::OperatorName& a, const c10::OperatorName& b) const {
    return std::tie(a.name, a.overload_name) < std::tie(b.name, b.overload_name);
  }
};
using OpNames = std::set<c10::OperatorName, ByName>;

OpNames all_op_names() {
  const std::vector<c10::OperatorName> names = c10::Dispatcher::singleton().getAllOpNames();
  return {names.begin(), names.end()};
}

// By real path: the ops each extension registered when it was first loaded in this process. A
// second load of this plugin (another registry in one process) dlopens the same library again,
// which runs no initializer and adds no names; it finds the ops here.
std::map<std::string, std::vector<c10::OperatorName>>& discovered() {
  static std::map<std::string, std::vector<c10::OperatorName>> by_path;
  return by_path;
}

// dlopens the extension (never closed: closing would deregister its ops) and returns the ops it
// registered.
const std::vector<c10::OperatorName>& load_extension(const std::string& path) {
  const std::string key = real_path(path);
  auto known = discovered().find(key);
  if (known != discovered().end()) return known->second;
  const OpNames before = all_op_names();
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* error = ::dlerror();
    std::string message = "extension '" + path + "': dlopen: " + (error != nullptr ? error : "failed");
    if (needs_python(path)) {
      message += " (the extension needs Python: it links libpython/libtorch_python or uses Py* symbols; build it "
                 "without Python bindings, e.g. with CMake's find_package(Torch))";
    }
    throw LoadFailure{OPC_ERROR, message};
  }
  check_same_libtorch(handle, path);
  std::vector<c10::OperatorName> added;
  for (const c10::OperatorName& name : all_op_names())
    if (before.count(name) == 0) added.push_back(name);
  return discovered().emplace(key, std::move(added)).first->second;
}

std::string namespace_of(const c10::OperatorName& name) { return name.name.substr(0, name.name.find("::")); }

std::string file_name(const std::string& path) { return path.substr(path.find_last_of('/') + 1); }

// ---------------------------------------------------------------- selecting and registering ops

// The ops to offer, each with the extension that registered it ("" when none of them did: an op of
// a namespace given by name).
std::map<c10::OperatorName, std::string, ByName> select_ops(const Options& o) {
  std::map<c10::OperatorName, std::string, ByName> from_extension;
  for (const std::string& path : o.extensions)
    for (const c10::OperatorName& name : load_extension(path)) from_extension.emplace(name, path);
  if (o.namespaces.empty()) return from_extension;
  std::map<c10::OperatorName, std::string, ByName> selected;
  const std::set<std::string> wanted(o.namespaces.begin(), o.namespaces.end());
  for (const c10::OperatorName& name : all_op_names()) {
    if (wanted.count(namespace_of(name)) == 0) continue;
    auto it = from_extension.find(name);
    selected.emplace(name, it != from_extension.end() ? it->second : std::string());
  }
  return selected;
}

bool mentions_tensor(const c10::FunctionSchema& schema) {
  if (bridge::has_tensor_argument(schema)) return true;
  for (const auto& a : schema.returns())
    if (bridge::holds_tensor(a.type())) return true;
  return false;
}

// Note [Which ops are differentiable]: an op is differentiable when a kernel is registered for
// autograd: at the Autograd alias key, at AutogradCPU, or as a CompositeImplicitAutograd kernel
// (which autograd differentiates through the ops it calls; a plain m.def(name, fn) lands there).
// hasKernelForDispatchKey reads the registrations themselves (alias keys included), not the
// computed table: in libtorch 1.13 every op's computed AutogradCPU entry is valid, because the
// AutogradCPU backend fallback is a fallthrough (VariableFallbackKernel.cpp), so the table would
// call every op differentiable.
bool has_autograd_kernel(const c10::OperatorHandle& handle) {
  return handle.hasKernelForDispatchKey(c10::DispatchKey::Autograd) ||
         handle.hasKernelForDispatchKey(c10::DispatchKey::AutogradCPU) ||
         handle.hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd);
}

// Note [No fake kernel without a meta kernel]: the fake kernel is the op's Meta kernel (or a
// composite one) run on meta tensors. An extension without one (torchvision 0.14 registers none;
// later versions add theirs in Python, which a C++ host never sees) gets no fake kernel, and
// test_faketensor reports it: that is a finding about the extension, not a gap to paper over.
void register_op(const OpcRegistrar* r, const c10::OperatorHandle& handle, const std::string& extension) {
  const std::string name = bridge::qualified_name(handle.operator_name());
  const std::string label = extension.empty() ? "libtorch" : file_name(extension);
  bridge::OpEntry& entry =
      bridge::entries()
          .try_emplace(name, bridge::OpEntry{name, handle, c10::toString(handle.schema()),
                                             handle.hasTag(at::Tag::nondeterministic_seeded), label,
                                             "the TORCH_LIBRARY adapter", &bridge::classify_by_type})
          .first->second;
  // A failing registrar call is the op's load problem, recorded by the host: go on with the others.
  if (r->define(r->host, entry.schema_string.c_str()) != OPC_OK) return;
  if (handle.hasComputedKernelForDispatchKey(c10::DispatchKey::CPU) &&
      r->impl(r->host, name.c_str(), OPC_KERNEL_CPU, &bridge::call_kernel, &entry) != OPC_OK)
    return;
  // The extension's CUDA kernels, where this libtorch runs CUDA (PyTorch's CUDA builds).
  const bool cuda = at::hasCUDA() && handle.hasComputedKernelForDispatchKey(c10::DispatchKey::CUDA);
  if (cuda && r->impl(r->host, name.c_str(), OPC_KERNEL_CUDA, &bridge::call_kernel, &entry) != OPC_OK) return;
  const bool meta = bridge::has_meta_kernel(handle);
  if (meta && r->impl(r->host, name.c_str(), OPC_KERNEL_FAKE, &bridge::fake_kernel, &entry) != OPC_OK) return;
  if (bridge::has_tensor_argument(handle.schema()) && bridge::has_tensor_return(handle.schema()) &&
      has_autograd_kernel(handle))
    bridge::register_backward_ops(r, entry, cuda, meta);
}

// The namespaces of the ops offered, for the default profiles.
std::set<std::string> register_selected(const OpcRegistrar* r, const std::map<c10::OperatorName, std::string, ByName>& ops) {
  std::set<std::string> namespaces;
  for (const auto& [name, extension] : ops) {
    const c10::optional<c10::OperatorHandle> handle = c10::Dispatcher::singleton().findSchema(name);
    if (!handle) continue;  // kernels registered for an op defined elsewhere: not this extension's op
    if (!mentions_tensor(handle->schema())) {
      // Nothing to dispatch on (torchvision::_cuda_version() -> int): opconform calls ops through
      // their tensors. Said on stderr, which the probe keeps; docs/torchvision-conformance.md lists it.
      std::fprintf(stderr, "opconform torch_library: skipping %s: no Tensor in its schema (%s)\n",
                   bridge::qualified_name(name).c_str(), c10::toString(handle->schema()).c_str());
      continue;
    }
    register_op(r, *handle, extension);
    namespaces.insert(namespace_of(name));
  }
  return namespaces;
}

// ---------------------------------------------------------------- profiles

std::string plugin_directory() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&read_options), &info) == 0 || info.dli_fname == nullptr) return ".";
  const std::string path = real_path(info.dli_fname);
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

std::vector<std::string> profiles_to_load(const Options& o, const std::set<std::string>& namespaces) {
  if (!o.profiles.empty()) return o.profiles;
  std::vector<std::string> found;
  const std::string dir = plugin_directory();
  for (const std::string& ns : namespaces) {
    const std::string candidate = dir + "/libopconform_profile_" + ns + ".so";
    if (::access(candidate.c_str(), R_OK) == 0) found.push_back(candidate);
  }
  return found;
}

// dlopens a profile (never closed: its sample builders are called as long as the ops live) and
// runs its entry point with this registrar.
void load_profile(const OpcRegistrar* r, const std::string& path) {
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* error = ::dlerror();
    throw LoadFailure{OPC_ERROR, "profile '" + path + "': dlopen: " + (error != nullptr ? error : "failed")};
  }
  auto entry = reinterpret_cast<ProfileFn>(::dlsym(handle, kProfileEntryPoint));
  if (entry == nullptr) {
    throw LoadFailure{OPC_ERROR, "profile '" + path + "' does not export " + std::string(kProfileEntryPoint)};
  }
  const OpcStatus status = entry(r);
  if (status != OPC_OK) {
    throw LoadFailure{status, "profile '" + path + "': " + kProfileEntryPoint + " returned status " +
                                  std::to_string(status)};
  }
}

OpcStatus register_ops(const OpcRegistrar* r) {
  if (r == nullptr || r->version != OPC_PLUGIN_ABI_VERSION) return OPC_ABI_MISMATCH;
  if (!OPC_HAS_FIELD(r, OpcRegistrar, declare_op)) {
    if (OPC_HAS_FIELD(r, OpcRegistrar, set_error)) {
      r->set_error(r->host, "the TORCH_LIBRARY adapter needs a host of plugin ABI 1.1 (options, declare_op)");
    }
    return OPC_ABI_MISMATCH;
  }
  try {
    static std::mutex loading;  // discovered() and entries() are shared by every load
    const std::lock_guard<std::mutex> lock(loading);
    const Options options = read_options(r);
    const std::set<std::string> namespaces = register_selected(r, select_ops(options));
    for (const std::string& profile : profiles_to_load(options, namespaces)) load_profile(r, profile);
    return OPC_OK;
  } catch (const LoadFailure& failure) {
    r->set_error(r->host, failure.message.c_str());
    return failure.status;
  } catch (const c10::Error& e) {
    r->set_error(r->host, bridge::first_line(e.what_without_backtrace()).c_str());
    return OPC_ERROR;
  } catch (const std::bad_alloc&) {
    return OPC_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    r->set_error(r->host, e.what());
    return OPC_ERROR;
  } catch (...) {
    return OPC_ERROR;
  }
}

OPCONFORM_PLUGIN_WITH_OPTIONS(torch_library_plugin, "torch_library", "libtorch " TORCH_VERSION, register_ops,
                              kOptions, sizeof(kOptions) / sizeof(kOptions[0]))

}  // namespace

OPCONFORM_EXPORT_PLUGIN(torch_library_plugin)
