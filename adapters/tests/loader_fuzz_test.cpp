// Garbage and truncated files fed to the loader: an error naming the file, never a crash.
#include <elf.h>
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "opconform/adapters/loader.h"
#include "opconform/core/tensor.h"

namespace opconform::adapters {
namespace {

std::string read_all(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

std::filesystem::path write_temp(const std::string& bytes) {
  static int counter = 0;
  auto p = std::filesystem::temp_directory_path() /
           ("opconform_loader_fuzz_" + std::to_string(getpid()) + "_" + std::to_string(counter++) + ".so");
  std::ofstream(p, std::ios::binary) << bytes;
  return p;
}

// Loads `bytes` as a plugin: returns "" when it loaded (and then its op must work), else the error.
std::string try_load(const std::string& bytes) {
  const auto path = write_temp(bytes);
  std::string error;
  try {
    Registry registry;
    auto lib = load_plugin(path, registry);
    Stack stack{from_vector<double>({1, 2}, {2})};
    registry.get("fixture::twice").call_boxed(stack);
    EXPECT_EQ(stack.at(0).to_tensor().to_vector<double>(), (std::vector<double>{2, 4}));
  } catch (const PluginError& e) {
    error = e.what();
    EXPECT_NE(error.find(path.string()), std::string::npos) << error;
  }
  std::filesystem::remove(path);
  return error;
}

TEST(LoaderFuzz, TheUntouchedFixtureLoads) { EXPECT_EQ(try_load(read_all(OPCONFORM_FIXTURE_PLUGIN)), ""); }

// The end of the last loaded segment: a prefix shorter than this cannot be mapped.
size_t end_of_loaded_segments(const std::string& elf) {
  Elf64_Ehdr eh;
  std::memcpy(&eh, elf.data(), sizeof eh);
  size_t end = 0;
  for (int i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    std::memcpy(&ph, elf.data() + eh.e_phoff + i * sizeof ph, sizeof ph);
    if (ph.p_type == PT_LOAD || ph.p_type == PT_DYNAMIC) end = std::max<size_t>(end, ph.p_offset + ph.p_filesz);
  }
  return end;
}

// Prefixes at a 1/97 step and in the first header bytes: a cut inside the ELF header, the program
// headers or a loaded segment is refused; a cut after them (only the section table lost, which
// dlopen does not read) loads and works (try_load calls the op).
TEST(LoaderFuzz, TruncatedPluginsGiveErrors) {
  const std::string whole = read_all(OPCONFORM_FIXTURE_PLUGIN);
  ASSERT_GT(whole.size(), 1000u);
  const size_t loaded_end = end_of_loaded_segments(whole);
  ASSERT_GT(loaded_end, 64u);
  std::vector<size_t> lengths = {0, 1, 4, 16, 63, 64, 65, 120, 200, 400, loaded_end - 1};
  for (size_t i = 1; i < 97; ++i) lengths.push_back(whole.size() * i / 97);
  for (size_t n : lengths) {
    const std::string error = try_load(whole.substr(0, n));
    if (n < loaded_end) {
      EXPECT_NE(error, "") << "a prefix of " << n << " bytes loaded";
    }
  }
}

RC_GTEST_PROP(LoaderFuzz, ArbitraryBytesGiveErrors, (const std::string& bytes)) {
  RC_ASSERT(!try_load(bytes).empty());
}

// An ELF header followed by garbage: the header checks must catch it before dlopen maps it.
RC_GTEST_PROP(LoaderFuzz, AnElfHeaderOverGarbageGivesAnError, (const std::string& tail)) {
  const std::string whole = read_all(OPCONFORM_FIXTURE_PLUGIN);
  RC_ASSERT(!try_load(whole.substr(0, 64) + tail).empty());
}

}  // namespace
}  // namespace opconform::adapters
