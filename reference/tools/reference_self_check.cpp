// opconform_reference_check: the main job until the opconform CLI lands — the reference checked
// by every check, with a Markdown report. Exit status 1 when some case fails.
//
//   opconform_reference_check [--samples N] [--ops GLOB] [--checks a,b,...] [--report FILE]
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include "opconform/reference.h"
#include "opconform/reference/self_check.h"

namespace {

void usage(std::ostream& out) {
  out << "usage: opconform_reference_check [--samples N] [--ops GLOB] [--checks a,b,...] [--report FILE]\n"
         "  Runs every check on every reference operator and dtype over generated samples and writes a\n"
         "  Markdown report (default: opconform-report/reference.md). Exit status 1 when a case fails.\n"
         "  --samples N     generated samples per op, dtype and check (default 50, the CI count)\n"
         "  --ops GLOB      only operators matching GLOB (default *), e.g. 'aten::add*'\n"
         "  --checks LIST   only these checks (default: all), e.g. test_schema,gradcheck\n"
         "  --report FILE   where the report goes\n"
         "  OPCONFORM_SEED=<n> replaces every case's fixed seed (replays a reported failure).\n";
}

}  // namespace

int main(int argc, char** argv) {
  using namespace opconform::reference;
  SelfCheckOptions options;
  std::string report = "opconform-report/reference.md";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "opconform_reference_check: " << a << " needs a value (try --help)\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--help" || a == "-h") {
      usage(std::cout);
      return 0;
    } else if (a == "--samples") {
      options.samples = std::atoi(value().c_str());
      if (options.samples <= 0) {
        std::cerr << "opconform_reference_check: --samples must be a positive number\n";
        return 2;
      }
    } else if (a == "--ops") {
      options.ops = value();
    } else if (a == "--checks") {
      std::stringstream list(value());
      for (std::string c; std::getline(list, c, ',');)
        if (!c.empty()) options.checks.push_back(c);
    } else if (a == "--report") {
      report = value();
    } else {
      std::cerr << "opconform_reference_check: unknown argument '" << a << "' (try --help)\n";
      return 2;
    }
  }
  try {
    opconform::Registry& registry = opconform::Registry::global();
    auto registration = register_reference_ops(registry);
    const bool tty = isatty(STDERR_FILENO);
    size_t failures = 0;
    auto cases = self_check(registry, options, [&](const SelfCheckCase& c, size_t done, size_t total) {
      failures += !c.ok();
      if (tty) {
        std::fprintf(stderr, "\r[%zu/%zu] %zu failing  %-40s", done, total, failures, c.op.c_str());
        if (done == total) std::fprintf(stderr, "\n");
      } else if (!c.ok() || done % 50 == 0 || done == total) {
        std::fprintf(stderr, "[%zu/%zu] %s %s: %s\n", done, total, c.op.c_str(), std::string(name(c.dtype)).c_str(),
                     c.ok() ? "ok" : "FAILED");
      }
    });
    std::string text = format_self_check_markdown(cases, options);
    if (auto dir = std::filesystem::path(report).parent_path(); !dir.empty()) std::filesystem::create_directories(dir);
    // Written beside, then renamed: a killed run leaves the previous report intact.
    const std::string tmp = report + ".tmp";
    {
      std::ofstream out(tmp);
      out << text;
      if (!out) throw std::runtime_error("cannot write " + tmp);
    }
    if (std::rename(tmp.c_str(), report.c_str()) != 0) throw std::runtime_error("cannot write " + report);
    std::cout << "opconform_reference_check: " << cases.size() << " cases, " << failures << " failing; report: " << report
              << "\n";
    return failures == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "opconform_reference_check: " << e.what() << "\n";
    return 1;
  }
}
