// opconform_reference_list: prints the reference registry (until the opconform CLI's
// `list --reference` lands), or writes its Core ATen coverage page.
//
//   opconform_reference_list                          # op, kind, family, dtypes, devices, fake, autograd, vmap, schema
//   opconform_reference_list --markdown docs/reference.md
#include <cstring>
#include <fstream>
#include <iostream>

#include "opconform/reference.h"
#include "opconform/reference/coverage.h"

int main(int argc, char** argv) {
  using namespace opconform::reference;
  const char* markdown = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--markdown") == 0 && i + 1 < argc) {
      markdown = argv[++i];
    } else if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::cout << "usage: opconform_reference_list [--markdown FILE]\n"
                   "  without options: one line per reference operator (tab-separated)\n"
                   "  --markdown FILE: write the Core ATen coverage page (docs/reference.md)\n";
      return 0;
    } else {
      std::cerr << "opconform_reference_list: unknown argument '" << argv[i] << "' (try --help)\n";
      return 2;
    }
  }
  try {
    opconform::Registry registry;
    auto registration = register_reference_ops(registry);
    auto infos = reference_op_infos();
    if (!markdown) {
      std::cout << format_reference_table(infos);
      return 0;
    }
    std::string page = format_coverage_markdown(read_core_aten_opset(default_core_aten_opset_path()), infos);
    std::ofstream out(markdown);
    out << page;
    if (!out) {
      std::cerr << "opconform_reference_list: cannot write '" << markdown << "'\n";
      return 1;
    }
    std::cout << "wrote " << markdown << " (" << infos.size() << " reference operators)\n";
  } catch (const std::exception& e) {
    std::cerr << "opconform_reference_list: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
