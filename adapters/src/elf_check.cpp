#include "elf_check.h"

#include <elf.h>

#include <cstring>
#include <fstream>
#include <vector>

namespace opconform::adapters::detail {
namespace {

#if defined(__x86_64__)
constexpr uint16_t kHostMachine = EM_X86_64;
#elif defined(__aarch64__)
constexpr uint16_t kHostMachine = EM_AARCH64;
#else
constexpr uint16_t kHostMachine = EM_NONE;  // not checked
#endif

}  // namespace

std::optional<std::string> elf_problem(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "cannot be opened for reading";
  in.seekg(0, std::ios::end);
  const auto size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  Elf64_Ehdr eh{};
  if (size < sizeof eh || !in.read(reinterpret_cast<char*>(&eh), sizeof eh)) {
    return "not a shared library: " + std::to_string(size) + " bytes, too short for an ELF header";
  }
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) return std::string("not a shared library: no ELF magic number");
  if (eh.e_ident[EI_CLASS] != ELFCLASS64) return std::string("not a 64-bit ELF file");
  if (eh.e_type != ET_DYN) return "not a shared library (ELF type " + std::to_string(eh.e_type) + ")";
  if (kHostMachine != EM_NONE && eh.e_machine != kHostMachine)
    return "built for another machine (ELF machine " + std::to_string(eh.e_machine) + ")";
  if (eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum == 0) return std::string("malformed ELF program headers");
  const uint64_t ph_end = eh.e_phoff + uint64_t{eh.e_phnum} * sizeof(Elf64_Phdr);
  if (eh.e_phoff > size || ph_end > size) return "truncated: the program headers end past the file's " + std::to_string(size) + " bytes";
  std::vector<Elf64_Phdr> ph(eh.e_phnum);
  in.seekg(static_cast<std::streamoff>(eh.e_phoff));
  if (!in.read(reinterpret_cast<char*>(ph.data()), static_cast<std::streamsize>(ph.size() * sizeof(Elf64_Phdr))))
    return std::string("truncated: cannot read the program headers");
  bool has_dynamic = false;
  for (size_t i = 0; i < ph.size(); ++i) {
    const Elf64_Phdr& p = ph[i];
    has_dynamic |= p.p_type == PT_DYNAMIC;
    if (p.p_type != PT_LOAD && p.p_type != PT_DYNAMIC) continue;
    if (p.p_offset > size || p.p_filesz > size - p.p_offset) {
      return "truncated: segment " + std::to_string(i) + " ends at byte " + std::to_string(p.p_offset + p.p_filesz) +
             ", the file has " + std::to_string(size);
    }
  }
  if (!has_dynamic) return std::string("not a dynamically loadable library (no PT_DYNAMIC segment)");
  return std::nullopt;
}

}  // namespace opconform::adapters::detail
