// opconform_demo — a tour of the operator model that checks what it shows and writes a report
// (the first main job, before the opconform CLI; kept as the one-page tour).
//
//   opconform_demo [--opset PATH] [--report DIR]
//
// 1. Parses (and prints back) every schema of PyTorch's Core ATen opset.
// 2. Defines an operator with a CPU kernel, an autograd-key wrapper and a Meta kernel, calls it
//    typed and boxed, on real and metadata-only tensors, and shows its dispatch table.
// 3. Shares a tensor with another framework through DLPack (zero copy) and back.
// 4. Shows the error a user gets for a backend the operator does not support.
// The report (Markdown) goes to DIR/demo.md; the exit code is non-zero when a step failed.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "opconform/core.h"

namespace {

using namespace opconform;

struct Report {
  std::ostringstream md;
  int failures = 0;
  void step(const std::string& title) {
    md << "\n## " << title << "\n\n";
    std::cout << "== " << title << "\n";
  }
  void line(const std::string& text) {
    md << text << "\n";
    std::cout << "   " << text << "\n";
  }
  void check(bool ok, const std::string& what) {
    if (!ok) ++failures;
    line(std::string(ok ? "- [x] " : "- [ ] FAILED: ") + what);
  }
};

std::filesystem::path find_opset(const std::filesystem::path& given) {
  if (!given.empty()) return given;
  // The repository's copy, from its root or a build folder below it.
  for (auto p : {"reference/data/core_aten_opset.tsv", "../reference/data/core_aten_opset.tsv",
                 "../../reference/data/core_aten_opset.tsv"}) {
    if (std::filesystem::exists(p)) return p;
  }
  return {};
}

void opset_step(Report& r, const std::filesystem::path& path) {
  r.step("Schemas of the Core ATen opset");
  if (path.empty()) {
    r.line("skipped: core_aten_opset.tsv not found (pass --opset PATH)");
    return;
  }
  std::ifstream in(path);
  std::string line;
  int total = 0, round_trips = 0;
  std::map<SchemaKind, int> kinds;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    auto tab = line.find('\t');
    std::string text = line.substr(tab + 1);
    ++total;
    try {
      FunctionSchema s = parse_schema(text);
      if (s.to_string() == text) ++round_trips;
      ++kinds[s.kind()];
    } catch (const Error& e) {
      r.line("parse error: " + std::string(e.what()));
    }
  }
  r.check(total > 0 && round_trips == total,
          std::to_string(round_trips) + " of " + std::to_string(total) + " schemas parse and print back identically");
  std::string summary;
  for (auto [k, n] : kinds) summary += std::string(summary.empty() ? "" : ", ") + std::string(to_string(k)) + ": " + std::to_string(n);
  r.line("schema kinds: " + summary);
}

// out = x * factor (float32, any strides).
Tensor scale_cpu(const Tensor& x, double factor) {
  Tensor out = empty_like(x);
  Tensor c = x.contiguous();
  const float* in = c.const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) o[i] = static_cast<float>(in[i] * factor);
  return out;
}

void dispatch_step(Report& r) {
  r.step("An operator with three kernels");
  Registry registry;
  Library lib("demo", LibraryKind::DEF, std::nullopt, registry);
  lib.define("scale(Tensor self, float factor) -> Tensor", {Tag::pointwise});
  lib.impl("scale", scale_cpu, DispatchKey::CPU);
  lib.impl("scale", [](const Tensor& x, double) { return make_metadata_tensor(x.sizes(), contiguous_strides(x.sizes()), x.dtype(), x.device()); },
           DispatchKey::Meta);
  int autograd_calls = 0;
  lib.impl("scale", [&](DispatchKeySet keys, const Tensor& x, double f) {
    ++autograd_calls;  // a real autograd kernel would record a graph node here
    return registry.get("demo::scale").typed<Tensor(const Tensor&, double)>().redispatch(keys.after(DispatchKey::AutogradCPU), x, f);
  }, DispatchKey::AutogradCPU, {.with_keyset = true});

  auto op = registry.get("demo::scale").typed<Tensor(const Tensor&, double)>();
  Tensor x = arange(6, DType::Float32).view({2, 3}).transpose(0, 1);
  Tensor y = op.call(x, 2.0);
  r.line("x = " + x.to_string());
  r.line("demo::scale(x, 2) = " + y.to_string());
  r.check(y.get({2, 1}).to_double() == 10.0 && autograd_calls == 1, "typed call through AutogradCPU then CPU");

  Stack stack{IValue(x), IValue(0.5)};
  registry.get("demo::scale").call_boxed(stack);
  r.check(stack.size() == 1 && stack[0].to_tensor().get({1, 1}).to_double() == 2.0, "boxed call");

  Tensor m = make_metadata_tensor(std::vector<int64_t>{4, 5}, std::vector<int64_t>{5, 1}, DType::Float32, Device::meta());
  Tensor my = op.call(m, 3.0);
  r.check(my.device().is_meta() && my.size(1) == 5, "meta tensors dispatch to the Meta kernel (shape only)");

  r.line("\n```\n" + registry.get("demo::scale").dump_dispatch_table() + "\n```");

  try {
    op.call(make_metadata_tensor(std::vector<int64_t>{2}, std::vector<int64_t>{1}, DType::Float32, Device::cuda(0)), 1.0);
    r.check(false, "a CUDA tensor has no kernel");
  } catch (const Error& e) {
    r.line("calling it with a CUDA tensor: `" + std::string(e.what()) + "`");
    r.check(e.code() == ErrorCode::kNotImplemented, "missing backends are reported with the kernels that exist");
  }
}

void dlpack_step(Report& r) {
  r.step("DLPack, zero copy");
  Tensor x = arange(12, DType::Float64).view({3, 4}).slice(1, 1, 4, 2);
  OpcDLManagedTensorVersioned* exported = to_dlpack_versioned(x);
  Tensor back = from_dlpack(exported);
  r.check(back.const_data_ptr() == x.const_data_ptr() && equal(back, x), "export then import shares the memory");
  back.fill_(7.0);
  r.check(x.get({0, 0}).to_double() == 7.0, "writes through the imported tensor are seen by the original");
  r.line("strides " + std::to_string(back.stride(0)) + "," + std::to_string(back.stride(1)) + " kept: " + back.to_string());
}

}  // namespace

int main(int argc, char** argv) {
  std::filesystem::path opset, report_dir = "opconform-report";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::cout << "usage: opconform_demo [--opset PATH] [--report DIR]\n"
                   "A tour of opconform's operator model; writes DIR/demo.md (default ./opconform-report).\n";
      return 0;
    } else if (a == "--opset" && i + 1 < argc) {
      opset = argv[++i];
    } else if (a == "--report" && i + 1 < argc) {
      report_dir = argv[++i];
    } else {
      std::cerr << "opconform_demo: unknown argument '" << a << "' (see --help)\n";
      return 2;
    }
  }
  Report r;
  r.md << "# opconform operator-model demo\n";
  auto guarded = [&](auto step) {
    try {
      step(r);
    } catch (const std::exception& e) {
      r.check(false, std::string("unexpected error: ") + e.what());
    }
  };
  guarded([&](Report& rr) { opset_step(rr, find_opset(opset)); });
  guarded(dispatch_step);
  guarded(dlpack_step);

  std::filesystem::create_directories(report_dir);
  auto path = report_dir / "demo.md";
  auto tmp = report_dir / "demo.md.tmp";
  {
    std::ofstream out(tmp);
    out << r.md.str();
  }
  std::filesystem::rename(tmp, path);  // atomic: readers never see half a report
  std::cout << (r.failures ? "FAILED" : "OK") << ": report written to " << path.string() << "\n";
  return r.failures ? 1 : 0;
}
