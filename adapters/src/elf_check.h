// A look at a shared library's ELF headers before dlopen maps it: dlopen of a truncated file can
// map segments past the end of the file and fault (SIGBUS) on first touch, inside the loader's
// own process. Checking the headers first turns garbage and truncated files into clear errors.
#pragma once
#include <filesystem>
#include <optional>
#include <string>

namespace opconform::adapters::detail {

// nullopt when `path` looks like a loadable ELF shared object for this machine; otherwise what
// is wrong ("not an ELF file", "built for another machine (EM 183)", "truncated: segment 2 ends
// at byte 90112, the file has 40960").
std::optional<std::string> elf_problem(const std::filesystem::path& path);

}  // namespace opconform::adapters::detail
