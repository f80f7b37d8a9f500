// PyTorch's own OpInfo samples as an external check of the reference (docs/opinfo-replay.md).
//
// reference/tests/data/opinfo_corpus.jsonl.gz holds aten-level calls recorded from PyTorch 2.11's
// OpInfo `reference_inputs` (scripts/record-opinfo-corpus.py: arguments before the call, what
// torch returned on CPU and on CUDA). Each call is replayed through the reference and compared
// with both results as torch.testing.assert_close compares by default: same dtype and shape,
// values within the dtype's default tolerance, NaN equal to NaN. Ops whose outputs hold
// uninitialized memory (empty*) are compared by metadata only.
//
// The test prints the agreement per op and fails on any disagreement that
// docs/opinfo-replay.md does not list (op, count on CPU, count on CUDA, cause) — and on a listed
// count that no longer matches, so the page stays true.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <zlib.h>

#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "opconform/conformance/tolerance.h"
#include "opconform/core/cuda.h"
#include "opconform/core/device_semantics.h"
#include "opconform/core/default_value.h"
#include "opconform/core/layout.h"
#include "support/reference_test_support.h"

namespace opconform::reference {
namespace {

using json = nlohmann::json;

std::vector<json> read_corpus(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) throw std::runtime_error("cannot open " + path);
  std::vector<json> calls;
  std::string line;
  char buffer[1 << 16];
  while (gzgets(f, buffer, sizeof buffer) != nullptr) {
    line += buffer;
    if (!line.empty() && line.back() == '\n') {
      calls.push_back(json::parse(line));
      line.clear();
    }
  }
  gzclose(f);
  if (!line.empty()) calls.push_back(json::parse(line));
  return calls;
}

std::vector<unsigned char> base64_decode(const std::string& text) {
  static const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::vector<unsigned char> out;
  uint32_t bits = 0;
  int count = 0;
  for (char c : text) {
    if (c == '=') break;
    const size_t v = alphabet.find(c);
    if (v == std::string::npos) throw std::runtime_error("bad base64");
    bits = (bits << 6) | static_cast<uint32_t>(v);
    if ((count += 6) >= 8) out.push_back(static_cast<unsigned char>(bits >> (count -= 8)));
  }
  return out;
}

Tensor decode_tensor(const json& v) {
  const DType dtype = *parse_dtype(v.at("t").get<std::string>());
  const auto sizes = v.at("sizes").get<std::vector<int64_t>>();
  const auto strides = v.at("strides").get<std::vector<int64_t>>();
  const auto bytes = base64_decode(v.at("data").get<std::string>());
  const int64_t span = static_cast<int64_t>(bytes.size() / itemsize(dtype));
  Tensor storage = empty({span}, TensorOptions(dtype));
  if (!bytes.empty()) std::memcpy(storage.mutable_data_ptr(), bytes.data(), bytes.size());
  return storage.as_strided(sizes, strides, 0);
}

double decode_number(const json& v) {
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
    return s == "inf" ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity();
  }
  return v.get<double>();
}

// A recorded value as the IValue the schema type takes (an int where a float is expected is a
// float, as Python passes it; a list takes its element type).
IValue decode(const Type& type, const json& v) {
  if (v.is_null()) return IValue();
  const Type& t = type.is_optional() ? type.elem() : type;
  if (v.contains("t")) return IValue(decode_tensor(v));
  if (v.contains("i")) {
    if (t.kind() == TypeKind::kFloat) return IValue(static_cast<double>(v["i"].get<int64_t>()));
    return IValue(v["i"].get<int64_t>());
  }
  if (v.contains("f")) return IValue(decode_number(v["f"]));
  if (v.contains("b")) return IValue(v["b"].get<bool>());
  if (v.contains("c")) return IValue(complex128(decode_number(v["c"][0]), decode_number(v["c"][1])));
  if (v.contains("str")) return IValue(v["str"].get<std::string>());
  if (v.contains("dtype")) return IValue(*parse_dtype(v["dtype"].get<std::string>()));
  if (v.contains("device")) return IValue(Device::parse(v["device"].get<std::string>()));
  if (v.contains("layout")) return IValue(*parse_layout(v["layout"].get<std::string>()));
  if (v.contains("memory_format")) return IValue(*parse_memory_format(v["memory_format"].get<std::string>()));
  if (!v.contains("l")) throw std::runtime_error("unknown value " + v.dump().substr(0, 80));
  const json& items = v["l"];
  const Type& e = t.is_list() ? t.elem() : t;
  const Type& base = e.is_optional() ? e.elem() : e;
  switch (base.kind()) {
    case TypeKind::kTensor: {
      if (e.is_optional()) {
        std::vector<std::optional<Tensor>> out;
        for (const auto& i : items) out.push_back(i.is_null() ? std::nullopt : std::optional(decode_tensor(i)));
        return IValue(std::move(out));
      }
      std::vector<Tensor> out;
      for (const auto& i : items) out.push_back(decode_tensor(i));
      return IValue(std::move(out));
    }
    case TypeKind::kInt:
    case TypeKind::kSymInt: {
      std::vector<int64_t> out;
      for (const auto& i : items) out.push_back(i.at("i").get<int64_t>());
      return IValue(std::move(out));
    }
    case TypeKind::kFloat: {
      std::vector<double> out;
      for (const auto& i : items) out.push_back(i.contains("i") ? static_cast<double>(i["i"].get<int64_t>()) : decode_number(i.at("f")));
      return IValue(std::move(out));
    }
    case TypeKind::kBool: {
      std::vector<bool> out;
      for (const auto& i : items) out.push_back(i.at("b").get<bool>());
      return IValue(std::move(out));
    }
    default: {
      std::vector<IValue> out;
      for (const auto& i : items) out.push_back(decode(base, i));
      return IValue::list(std::move(out));
    }
  }
}

// What torch returned, flattened as the recorder flattens tuples and lists.
std::vector<IValue> flatten(const Stack& returns) {
  std::vector<IValue> out;
  for (const auto& r : returns) {
    if (r.is_tensor_list()) {
      for (const auto& t : r.to_tensor_list()) out.emplace_back(t);
    } else {
      out.push_back(r);
    }
  }
  return out;
}

// Ops whose results are uninitialized memory: only their metadata means anything.
const std::set<std::string> kUninitialized = {"aten::empty.memory_format", "aten::empty_strided", "aten::empty_like",
                                              "aten::new_empty", "aten::new_empty_strided"};

// Note [Tied indices]: PyTorch promises the values of topk, sort, max.dim and min.dim, and for
// tied values any of their indices (topk's CPU kernel partitions, its order among ties is not
// the reference's). An index output that differs is accepted when it selects the same values:
// self gathered along dim at either set of indices (by the registry's aten::gather) is equal.
const std::map<std::string, size_t> kTiedIndexDim = {
    {"aten::topk", 2}, {"aten::sort", 1}, {"aten::max.dim", 1}, {"aten::min.dim", 1}};

bool same_selection(const Registry& registry, const Stack& inputs, size_t dim_arg, const Tensor& a, const Tensor& b) {
  const OperatorHandle gather = registry.get("aten::gather");
  auto select = [&](const Tensor& index) {
    Stack s{inputs[0], inputs[dim_arg], IValue(index), IValue(false)};
    gather.call_boxed(s);
    return s[0].to_tensor();
  };
  return conformance::bitwise_equal(select(a), select(b));
}

// Empty when output i of `got` agrees with the recorded `want[i]`; else how it differs.
std::string output_difference(const Registry& registry, const std::string& op, const Stack& inputs,
                              const std::vector<IValue>& got, const json& want, size_t i) {
  const std::string at = "output " + std::to_string(i) + ": ";
  if (want[i].contains("t")) {
    if (!got[i].is_tensor()) return at + "not a tensor";
    const Tensor expected = decode_tensor(want[i]);
    const Tensor& actual = got[i].to_tensor();
    if (kUninitialized.count(op) != 0) {
      const bool same = actual.dtype() == expected.dtype() && std::ranges::equal(actual.sizes(), expected.sizes());
      return same ? "" : at + "metadata differs";
    }
    auto c = conformance::compare(actual, expected, conformance::default_tolerance(expected.dtype()));
    if (!c.equal && i == 1 && kTiedIndexDim.count(op) && actual.dtype() == DType::Int64 &&
        std::ranges::equal(actual.sizes(), expected.sizes()) &&
        same_selection(registry, inputs, kTiedIndexDim.at(op), actual, expected)) {
      return "";  // Note [Tied indices]
    }
    return c.equal ? "" : at + c.mismatch;
  }
  if (want[i].contains("i")) {
    return got[i].is_int() && got[i].to_int() == want[i]["i"].get<int64_t>() ? "" : at + "int differs";
  }
  if (want[i].contains("b")) {
    return got[i].is_bool() && got[i].to_bool() == want[i]["b"].get<bool>() ? "" : at + "bool differs";
  }
  if (want[i].contains("f")) {
    const double w = decode_number(want[i]["f"]), g = got[i].is_scalar() ? got[i].to_double() : NAN;
    return g == w || (std::isnan(g) && std::isnan(w)) ? "" : at + "float differs";
  }
  return "";
}

// Empty when `got` agrees with the recorded `want` (a list of values); else the first difference.
std::string difference(const Registry& registry, const std::string& op, const Stack& inputs,
                       const std::vector<IValue>& got, const json& want) {
  if (got.size() != want.size())
    return "returned " + std::to_string(got.size()) + " values, torch " + std::to_string(want.size());
  for (size_t i = 0; i < got.size(); ++i)
    if (std::string d = output_difference(registry, op, inputs, got, want, i); !d.empty()) return d;
  return "";
}

struct OpTally {
  int calls = 0, cpu_differ = 0, cuda_calls = 0, cuda_differ = 0;
  int not_replayed = 0;           // calls this machine cannot make (kept out of the counts)
  int cpu_torch_further = 0, cuda_torch_further = 0;  // Note [The float64 arbiter]
  int torch_fails_dtype_consistency = 0;               // of the torch-further ones, both devices
  std::vector<std::string> examples;  // the first differences, with their sources
};

// Note [Wrapped numbers]: PyTorch's Python binding turns a number given for a Tensor argument
// into a "wrapped number" tensor, which promotes as a Scalar, and __torch_dispatch__ (so the
// corpus) sees the number itself. C++ has no wrapped numbers; the same call is the op's Scalar
// overload (add.Tensor(x, 2.5) is add.Scalar(x, 2.5)), which the replay makes instead. Where the
// reference has no such overload the call is not replayed (and counted so).
bool is_number(const json& v) {
  return v.is_object() && (v.contains("f") || v.contains("i") || v.contains("b") || v.contains("c"));
}

std::optional<std::string> scalar_overload(const Registry& registry, const std::string& name, const json& args) {
  const auto op = registry.find(name);
  if (!op) return name;  // counted as a refusal by replay()
  const auto& arguments = op->schema().arguments;
  std::vector<size_t> wrapped;
  for (size_t i = 0; i < arguments.size() && i < args.size(); ++i) {
    const Type& t = arguments[i].type.is_optional() ? arguments[i].type.elem() : arguments[i].type;
    if (t.kind() == TypeKind::kTensor && is_number(args[i])) wrapped.push_back(i);
  }
  if (wrapped.empty()) return name;
  if (wrapped != std::vector<size_t>{1}) return std::nullopt;
  for (auto [from, to] : {std::pair{".Tensor_mode", ".Scalar_mode"}, {".Tensor", ".Scalar"}}) {
    const std::string f(from);
    if (name.size() > f.size() && name.compare(name.size() - f.size(), f.size(), f) == 0) {
      const std::string other = name.substr(0, name.size() - f.size()) + to;
      if (registry.find(other)) return other;
    }
  }
  return std::nullopt;
}

bool asks_for_cuda(const json& v) {
  if (v.is_object() && v.contains("device")) return v["device"].get<std::string>() != "cpu";
  if (v.is_object() && v.contains("l")) return std::ranges::any_of(v["l"], asks_for_cuda);
  return v.is_array() && std::ranges::any_of(v, asks_for_cuda);
}

Stack decode_call(const OperatorHandle& op, const json& args) {
  const auto& arguments = op.schema().arguments;
  Stack stack;
  for (size_t i = 0; i < arguments.size(); ++i) {
    const json& v = args.at(i);
    if (v.is_object() && v.contains("default")) {
      auto d = default_ivalue(arguments[i]);
      if (!d) throw std::runtime_error("no default for " + arguments[i].name);
      stack.push_back(*d);
    } else {
      stack.push_back(decode(arguments[i].type, v));
    }
  }
  return stack;
}

bool low_precision(DType d) { return d == DType::Float16 || d == DType::BFloat16; }

// The summed distance of t's finite elements from the exact ones (a sum, not a maximum: where
// both sides round alike their equal errors would hide the elements that differ).
double total_error(const Tensor& t, const Tensor& exact) {
  const auto a = t.to(DType::Float64).contiguous().to_vector<double>();
  const auto e = exact.to(DType::Float64).contiguous().to_vector<double>();
  double sum = 0;
  for (size_t i = 0; i < a.size() && i < e.size(); ++i)
    if (std::isfinite(a[i]) && std::isfinite(e[i])) sum += std::abs(a[i] - e[i]);
  return sum;
}

// The call's results with its float16/bfloat16 tensors in float64, through the reference;
// nullopt when it has no such tensor or the reference refuses the widened call.
std::optional<std::vector<IValue>> in_float64(const OperatorHandle& op, const Stack& args) {
  Stack wide = args;
  bool any = false;
  for (auto& v : wide) {
    if (v.is_tensor() && v.to_tensor().defined() && low_precision(v.to_tensor().dtype())) {
      v = IValue(v.to_tensor().to(DType::Float64)), any = true;
    }
  }
  if (!any) return std::nullopt;
  try {
    op.call_boxed(wide);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  return flatten(wide);
}

// Note [The float64 arbiter]: where a float16/bfloat16 result differs from torch's, which is
// nearer the truth? The same call with those inputs in float64, through the reference (whose
// float64 results agree with torch's), says: the summed error of each side from it. "torch
// further" means torch's own reduced-precision arithmetic is the cause. It is PyTorch's own rule
// for its references (test/test_ops.py, _ref_test_helper: where a reference's low-precision
// result is not close to torch's, each output's summed distance from the float64 result must be
// no larger than torch's) and for its decompositions (test/test_decomp.py, op_assert_ref, with the
// greatest distance), applied output by output: every differing output must be a float16/bfloat16
// tensor no further from float64 than torch's, and one strictly nearer.
std::optional<bool> torch_further(const Registry& registry, const OperatorHandle& op, const Stack& args,
                                  const std::vector<IValue>& got, const json& want) {
  const auto wide = in_float64(op, args);
  if (!wide) return std::nullopt;
  const std::vector<IValue>& exact = *wide;
  if (got.size() != want.size() || exact.size() != got.size()) return std::nullopt;
  bool nearer = false;
  for (size_t i = 0; i < got.size(); ++i) {
    if (output_difference(registry, op.name(), args, got, want, i).empty()) continue;
    const bool judged = got[i].is_tensor() && exact[i].is_tensor() && want[i].contains("t") &&
                        low_precision(got[i].to_tensor().dtype()) &&
                        got[i].to_tensor().dtype() == *parse_dtype(want[i]["t"].get<std::string>());
    if (!judged) return std::nullopt;  // a differing output the float64 result cannot judge
    const double ours = total_error(got[i].to_tensor(), exact[i].to_tensor());
    const double theirs = total_error(decode_tensor(want[i]), exact[i].to_tensor());
    if (ours > theirs) return false;
    nearer = nearer || ours < theirs;
  }
  if (!nearer) return std::nullopt;  // no side nearer
  return true;
}

// Whether torch's recorded result would fail dtype_consistency (conformance/src/properties.cpp)
// on this call: a float16/bfloat16 output beyond its dtype's default tolerance of the float64
// result rounded to that dtype. Where it would, a reference that returned torch's result would
// fail the main job's own check (docs/architecture.md, "The reference rounds once").
bool torch_fails_dtype_consistency(const OperatorHandle& op, const Stack& args, const json& want) {
  const auto wide = in_float64(op, args);
  if (!wide) return false;
  const std::vector<IValue>& exact = *wide;
  for (size_t i = 0; i < exact.size() && i < want.size(); ++i) {
    if (!exact[i].is_tensor() || !want[i].contains("t")) continue;
    const Tensor theirs = decode_tensor(want[i]);
    if (!low_precision(theirs.dtype())) continue;
    const Tensor rounded = exact[i].to_tensor().to(theirs.dtype());
    if (!conformance::compare(theirs, rounded, conformance::default_tolerance(theirs.dtype())).equal) return true;
  }
  return false;
}

// Replays one call; the reference's result (or its error) against torch's CPU and CUDA results.
void replay(Registry& registry, const json& call, std::map<std::string, OpTally>& tally) {
  const std::string name = call.at("op").get<std::string>();
  OpTally& t = tally[name];
  const json& args = call.at("args");
  const auto replayed_as = scalar_overload(registry, name, args);
  if (!replayed_as || (asks_for_cuda(args) && !cuda::is_available())) {
    ++t.not_replayed;
    return;
  }
  ++t.calls;
  const bool with_cuda = call.contains("cuda") && !call["cuda"].is_null();
  t.cuda_calls += with_cuda;
  auto note = [&](const std::string& where, const std::string& what) {
    if (t.examples.size() < 3) t.examples.push_back(where + " (" + call.value("source", "") + "): " + what);
  };
  std::optional<OperatorHandle> op;
  Stack inputs;
  // The reference's result with CPU's semantics, or with CUDA's (Note [Device-dependent semantics]
  // in core/device_semantics.h): the CUDA column is compared with what the reference says a CUDA
  // kernel returns, which differs from CPU's for the norms' statistics. Each run decodes its own
  // arguments: an in-place op writes them.
  auto run = [&](std::optional<Device> semantics) {
    std::optional<SemanticDeviceGuard> guard;
    if (semantics) guard.emplace(*semantics);
    Stack stack = decode_call(*op, args);
    op->call_boxed(stack);
    return flatten(stack);
  };
  std::vector<IValue> got;
  try {
    op = registry.get(*replayed_as);
    inputs = decode_call(*op, args);
    got = run(std::nullopt);
  } catch (const std::exception& e) {
    const std::string what = std::string("the reference refused: ") + e.what();
    ++t.cpu_differ, t.cuda_differ += with_cuda;
    note("cpu", what.substr(0, 300));
    return;
  }
  auto judge = [&](const std::string& where, const std::vector<IValue>& result, const json& want, int& differ, int& further) {
    const std::string d = difference(registry, name, inputs, result, want);
    if (d.empty()) return;
    ++differ;
    const auto arbiter = torch_further(registry, *op, inputs, result, want);
    if (arbiter && *arbiter) {
      ++further;
      t.torch_fails_dtype_consistency += torch_fails_dtype_consistency(*op, inputs, want);
    }
    note(where, d + (arbiter ? (*arbiter ? " [torch further from float64]" : " [the reference further from float64]") : ""));
  };
  judge("cpu", got, call.at("cpu"), t.cpu_differ, t.cpu_torch_further);
  if (!with_cuda) return;
  std::vector<IValue> got_cuda;
  try {
    got_cuda = run(Device::cuda());
  } catch (const std::exception& e) {
    ++t.cuda_differ;
    note("cuda", (std::string("the reference refused with CUDA's semantics: ") + e.what()).substr(0, 300));
    return;
  }
  judge("cuda", got_cuda, call["cuda"].is_string() ? call.at("cpu") : call["cuda"], t.cuda_differ, t.cuda_torch_further);
}

struct Listed {
  int cpu = 0, cuda = 0, cpu_torch_further = 0, cuda_torch_further = 0;
};

// The table of docs/opinfo-replay.md:
// "| `aten::op` | CPU differences | CUDA differences | of them torch further (CPU) | (CUDA) | cause |".
std::map<std::string, Listed> listed_differences() {
  std::ifstream in(std::string(OPCONFORM_SOURCE_DIR) + "/docs/opinfo-replay.md");
  std::map<std::string, Listed> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("| `aten::", 0) != 0) continue;
    std::stringstream cells(line);
    std::string empty, op, cpu, cuda, cpu_further, cuda_further;
    std::getline(cells, empty, '|'), std::getline(cells, op, '|'), std::getline(cells, cpu, '|'), std::getline(cells, cuda, '|');
    std::getline(cells, cpu_further, '|'), std::getline(cells, cuda_further, '|');
    const auto strip = [](std::string s) {
      s.erase(0, s.find_first_not_of(" `"));
      s.erase(s.find_last_not_of(" `") + 1);
      return s;
    };
    out[strip(op)] = {std::stoi(strip(cpu)), std::stoi(strip(cuda)), std::stoi(strip(cpu_further)),
                      std::stoi(strip(cuda_further))};
  }
  return out;
}

TEST(OpInfoReplay, PyTorchsOwnSamplesAgreeWithTheReferenceButWhereListed) {
  Registry& registry = testing::registry();
  const auto calls = read_corpus(std::string(OPCONFORM_SOURCE_DIR) + "/reference/tests/data/opinfo_corpus.jsonl.gz");
  ASSERT_GT(calls.size(), 5000u);
  std::map<std::string, OpTally> tally;
  for (const auto& call : calls) replay(registry, call, tally);

  const auto listed = listed_differences();
  int calls_total = 0, cpu_differ = 0, cuda_total = 0, cuda_differ = 0, not_replayed = 0, cpu_further = 0, cuda_further = 0,
      torch_fails = 0;
  for (const auto& [op, t] : tally) {
    calls_total += t.calls, cpu_differ += t.cpu_differ, cuda_total += t.cuda_calls, cuda_differ += t.cuda_differ;
    not_replayed += t.not_replayed, cpu_further += t.cpu_torch_further, cuda_further += t.cuda_torch_further;
    torch_fails += t.torch_fails_dtype_consistency;
    const Listed l = listed.count(op) ? listed.at(op) : Listed{};
    std::cout << op << ": " << t.calls - t.cpu_differ << "/" << t.calls << " agree with torch CPU, "
              << t.cuda_calls - t.cuda_differ << "/" << t.cuda_calls << " with CUDA"
              << (t.not_replayed ? ", " + std::to_string(t.not_replayed) + " not replayed" : "")
              << (t.cpu_torch_further + t.cuda_torch_further
                      ? "; torch further from float64 on " + std::to_string(t.cpu_torch_further) + " CPU and " +
                            std::to_string(t.cuda_torch_further) + " CUDA differences"
                      : "")
              << "\n";
    for (const auto& e : t.examples) std::cout << "    " << e << "\n";
    std::string examples;
    for (const auto& e : t.examples) examples += "\n  " + e;
    EXPECT_EQ(t.cpu_differ, l.cpu) << op << " differs from torch CPU on " << t.cpu_differ
                                   << " calls; docs/opinfo-replay.md lists " << l.cpu << "." << examples;
    EXPECT_EQ(t.cuda_differ, l.cuda) << op << " differs from torch CUDA on " << t.cuda_differ
                                     << " calls; docs/opinfo-replay.md lists " << l.cuda << "." << examples;
    EXPECT_EQ(t.cpu_torch_further, l.cpu_torch_further) << op << ": Note [The float64 arbiter] finds torch further on "
                                                        << t.cpu_torch_further << " CPU differences; listed: " << l.cpu_torch_further;
    EXPECT_EQ(t.cuda_torch_further, l.cuda_torch_further) << op << ": Note [The float64 arbiter] finds torch further on "
                                                          << t.cuda_torch_further << " CUDA differences; listed: " << l.cuda_torch_further;
  }
  for (const auto& [op, l] : listed) EXPECT_TRUE(tally.count(op)) << op << " is listed but has no recorded call";
  std::cout << "OpInfo replay: " << calls_total << " calls over " << tally.size() << " overloads replayed ("
            << not_replayed << " not: Note [Wrapped numbers], or CUDA tensors without a GPU); "
            << calls_total - cpu_differ << " agree with torch CPU (" << cpu_further << " more where torch is further from "
            << "the float64 result), " << cuda_total - cuda_differ << "/" << cuda_total << " with torch CUDA (" << cuda_further
            << " more)\n";
  // The acceptance of the replay (Note [The float64 arbiter], docs/opinfo-replay.md "Decision"):
  // at least 99.9% of each column agree by PyTorch's rule for references, close or no further
  // from float64 than torch. The plain assert_close share is printed; it is below 99.9% by the
  // listed intermediate roundings of torch, which the reference does not copy.
  auto share = [](int agree, int total) { return total == 0 ? 0.0 : static_cast<double>(agree) / total; };
  const double cpu_plain = share(calls_total - cpu_differ, calls_total);
  const double cpu_rule = share(calls_total - cpu_differ + cpu_further, calls_total);
  const double cuda_plain = share(cuda_total - cuda_differ, cuda_total);
  const double cuda_rule = share(cuda_total - cuda_differ + cuda_further, cuda_total);
  std::cout << "agreement, plain assert_close / by PyTorch's rule: CPU " << 100 * cpu_plain << "% / " << 100 * cpu_rule
            << "%, CUDA " << 100 * cuda_plain << "% / " << 100 * cuda_rule << "%\n";
  std::cout << "of the " << cpu_further + cuda_further << " differences where torch is further from float64, torch's "
            << "result would fail dtype_consistency on " << torch_fails << "\n";
  EXPECT_EQ(torch_fails, cpu_further + cuda_further)
      << "docs/architecture.md (\"The reference rounds once\") says every listed difference is one that a reference "
         "returning torch's result would fail dtype_consistency on";
  EXPECT_GE(cpu_rule, 0.999) << "agreement with torch CPU by PyTorch's rule for references";
  EXPECT_GT(cuda_total, 5000) << "the corpus's CUDA column is missing";
  EXPECT_GE(cuda_rule, 0.999) << "agreement with torch CUDA by PyTorch's rule for references";
}

}  // namespace
}  // namespace opconform::reference
