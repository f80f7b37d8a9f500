// Differential: the fuzz bytes pick an operator that both the reference registry and a loaded
// library implement, a dtype both accept, and inputs (small shapes, broadcast and matmul-shaped
// partners, strided and expanded views, ordinary and extreme values); the reference_agreement
// check then runs the op through both and compares outputs and arguments within the tolerance
// model. A `failed` outcome is a finding. With a GPU and a library that has CUDA kernels, the
// same sample also runs on CUDA against the reference on CPU copies.
//
// The library is examples/vendor_plugin linked in (instrumented like the rest), or the plugin
// named by OPCONFORM_FUZZ_LIBRARY (any shared library `opconform check` accepts);
// OPCONFORM_FUZZ_OPS='aten::mul*' keeps the ops that match a glob (as `opconform check --ops`).
#include <fnmatch.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_support.h"
#include "opconform/adapters/loader.h"
#include "opconform/conformance/opcheck.h"
#include "opconform/core/cuda.h"
#include "opconform/reference.h"

extern "C" const OpcPlugin* opconform_plugin(void);  // examples/vendor_plugin, linked in

namespace {

using namespace opconform;
using opconform::fuzz::plausible;

struct Op {
  OperatorHandle handle;
  std::vector<DType> dtypes;  // accepted by both
  bool cuda = false;          // the library has a CUDA kernel
};

// The two registries and the ops they share, made once per process.
struct World {
  Registry reference;
  reference::ReferenceRegistration registration = reference::register_reference_ops(reference);
  Registry library_registry;
  std::unique_ptr<adapters::LoadedLibrary> library;
  std::vector<Op> ops;

  World() {
    const char* path = std::getenv("OPCONFORM_FUZZ_LIBRARY");
    library = path != nullptr && *path != '\0'
                  ? adapters::load_plugin(path, library_registry, {.schemas = &reference})
                  : adapters::load_plugin(opconform_plugin(), library_registry, {.schemas = &reference}, "vendor_plugin");
    const char* glob = std::getenv("OPCONFORM_FUZZ_OPS");
    for (const std::string& name : library->ops()) {
      if (glob != nullptr && *glob != '\0' && fnmatch(glob, name.c_str(), 0) != 0) continue;
      auto info = reference::reference_op_info(reference, name);
      if (!info || !library->has_kernel(name, OPC_KERNEL_CPU)) continue;
      Op op{library_registry.get(name), {}, library->has_kernel(name, OPC_KERNEL_CUDA)};
      const auto declared = library->declared_dtypes(name).value_or(info->dtypes);
      for (DType d : declared)
        if (std::find(info->dtypes.begin(), info->dtypes.end(), d) != info->dtypes.end()) op.dtypes.push_back(d);
      if (!op.dtypes.empty()) ops.push_back(std::move(op));
    }
    if (ops.empty()) fuzz::fail("the library shares no operator with the reference (or none matches OPCONFORM_FUZZ_OPS)");
  }
};

// One element value: mostly small numbers that print readably, sometimes the edges of the type.
double some_value(FuzzedDataProvider& in, DType dtype) {
  const uint8_t kind = in.ConsumeIntegralInRange<uint8_t>(0, 15);
  if (is_floating(dtype)) {
    static constexpr double kEdges[] = {0.0, -0.0, std::numeric_limits<double>::infinity(),
                                        -std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN(),
                                        1e-310, 3.4e38, -1e300, 0.5, 1e-8};
    if (kind == 0) return in.PickValueInArray(kEdges);
    return in.ConsumeIntegralInRange<int8_t>(-64, 64) / 8.0;
  }
  if (dtype == DType::Bool) return in.ConsumeBool();
  if (kind == 0 && dtype == DType::Int64) {
    static constexpr double kEdges[] = {-9.2e18, 9.2e18, -4.6e18};
    return in.PickValueInArray(kEdges);
  }
  return in.ConsumeIntegralInRange<int8_t>(-8, 8);
}

std::vector<int64_t> some_shape(FuzzedDataProvider& in) {
  std::vector<int64_t> shape(in.ConsumeIntegralInRange<size_t>(0, 3));
  for (auto& s : shape) s = in.ConsumeIntegralInRange<int64_t>(0, 4);
  return shape;
}

// A shape for a later tensor argument, related to the first one's so that most calls are valid:
// the same, broadcast against it, the matmul partner ([k, m] for [n, k]), or unrelated.
std::vector<int64_t> partner_shape(FuzzedDataProvider& in, const std::vector<int64_t>& first) {
  std::vector<int64_t> shape = first;
  switch (in.ConsumeIntegralInRange<int>(0, 4)) {
    case 0: break;
    case 1:
      for (auto& s : shape)
        if (in.ConsumeBool()) s = 1;
      break;
    case 2:
      if (!shape.empty()) shape.erase(shape.begin(), shape.begin() + in.ConsumeIntegralInRange<ptrdiff_t>(0, shape.size()));
      break;
    case 3: shape = {first.empty() ? 1 : first.back(), in.ConsumeIntegralInRange<int64_t>(0, 4)}; break;
    default: shape = some_shape(in); break;
  }
  return shape;
}

// A tensor with the given shape and fuzzed values: contiguous, a transposed or strided view of
// a larger tensor, or an expanded (stride 0) one.
Tensor some_tensor(FuzzedDataProvider& in, const std::vector<int64_t>& shape, DType dtype) {
  const uint8_t layout = in.ConsumeIntegralInRange<uint8_t>(0, 3);
  std::vector<int64_t> made = shape;
  if (layout == 1 && shape.size() >= 2) std::swap(made.front(), made.back());
  if (layout == 2) made.push_back(2);  // every other element of a wider tensor
  Tensor t = empty(made, TensorOptions(dtype));
  const int64_t n = t.numel();
  std::vector<double> values(static_cast<size_t>(n));
  for (auto& v : values) v = some_value(in, dtype);
  Tensor flat = from_vector<double>(values, {n}).to(dtype);
  t.copy_(flat.view(made));
  if (layout == 1 && shape.size() >= 2) return t.transpose(0, static_cast<int64_t>(shape.size()) - 1);
  if (layout == 2) return t.select(static_cast<int64_t>(made.size()) - 1, 0);
  if (layout == 3 && !shape.empty() && shape.front() > 1) {
    std::vector<int64_t> one = shape;
    one.front() = 1;
    return some_tensor(in, one, dtype).expand(shape);
  }
  return t;
}

// Arguments for the op's schema: tensors in `dtype`, the other kinds from the bytes.
Stack some_arguments(FuzzedDataProvider& in, const FunctionSchema& schema, DType dtype) {
  Stack args;
  std::vector<int64_t> first_shape;
  bool have_first = false;
  for (const Argument& a : schema.arguments) {
    const Type& type = a.type;
    const bool optional = type.is_optional();
    const Type& t = optional ? type.elem() : type;
    if (optional && in.ConsumeBool()) {
      args.emplace_back();
      continue;
    }
    switch (t.kind()) {
      case TypeKind::kTensor: {
        const auto shape = have_first ? partner_shape(in, first_shape) : some_shape(in);
        if (!have_first) first_shape = shape, have_first = true;
        args.emplace_back(some_tensor(in, shape, dtype));
        break;
      }
      case TypeKind::kScalar:
        if (is_floating(dtype) && in.ConsumeBool()) {
          args.emplace_back(some_value(in, DType::Float64));
        } else {
          args.emplace_back(static_cast<int64_t>(in.ConsumeIntegralInRange<int8_t>(-4, 4)));
        }
        break;
      case TypeKind::kFloat: args.emplace_back(some_value(in, DType::Float64)); break;
      case TypeKind::kInt:
      case TypeKind::kSymInt: args.emplace_back(static_cast<int64_t>(in.ConsumeIntegralInRange<int8_t>(-4, 4))); break;
      case TypeKind::kBool: args.emplace_back(in.ConsumeBool()); break;
      case TypeKind::kScalarType: {
        static constexpr DType kDtypes[] = {DType::Float32, DType::Float64, DType::Int64};
        args.emplace_back(in.PickValueInArray(kDtypes));
        break;
      }
      case TypeKind::kList:
        if (t.elem().kind() == TypeKind::kInt || t.elem().kind() == TypeKind::kSymInt) {
          std::vector<int64_t> dims(in.ConsumeIntegralInRange<size_t>(0, t.size().value_or(3)));
          for (auto& d : dims) d = in.ConsumeIntegralInRange<int8_t>(-4, 3);
          args.emplace_back(std::move(dims));
          break;
        }
        [[fallthrough]];
      default:
        // A kind no generated sample covers: the schema's default, else None.
        args.emplace_back();
        break;
    }
  }
  return args;
}

std::string values_of(const Stack& args) {
  std::string out;
  for (const IValue& v : args)
    if (v.is_tensor() && v.to_tensor().defined()) out += "\n  " + v.to_tensor().to_string();
  return out;
}

void agree(World& world, const Op& op, const Stack& args, const char* where) {
  conformance::OpcheckOptions options;
  options.test_utils = {"reference_agreement"};
  options.raise_exception = false;
  options.reference = &world.reference;
  const auto results = conformance::opcheck(op.handle, {conformance::Sample(args)}, options, world.library_registry);
  const conformance::CheckResult& r = results.at("reference_agreement");
  // OPCONFORM_FUZZ_VERBOSE=1: one line per input, to see what the generated samples reach.
  static const bool verbose = std::getenv("OPCONFORM_FUZZ_VERBOSE") != nullptr;
  if (verbose) {
    Stack again = conformance::clone_args(args);
    std::string reference = "the reference accepts the sample";
    try {
      world.reference.get(op.handle.name()).call_boxed(again);
    } catch (const Error&) {
      reference = "the reference rejects the sample";
    }
    std::fprintf(stderr, "%s %s: %s (%s) %s\n", where, op.handle.name().c_str(),
                 std::string(conformance::to_string(r.outcome)).c_str(), reference.c_str(), r.message.substr(0, 160).c_str());
  }
  FUZZ_CHECK(r.outcome != conformance::Outcome::failed, where, ": ", r.message, "\nInputs:", values_of(args));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static World world;
  FuzzedDataProvider in(data, size);
  const Op& op = world.ops[in.ConsumeIntegralInRange<size_t>(0, world.ops.size() - 1)];
  const DType dtype = op.dtypes[in.ConsumeIntegralInRange<size_t>(0, op.dtypes.size() - 1)];
  Stack args;
  try {
    args = some_arguments(in, op.handle.schema(), dtype);
  } catch (const Error&) {
    return 0;  // a shape this harness could not build (an expand that does not fit)
  }
  agree(world, op, args, "cpu");
  if (op.cuda && cuda::is_available()) {
    for (auto& v : args) v = map_tensors(v, [](const Tensor& t) { return t.defined() ? t.to(Device::cuda()) : t; });
    agree(world, op, args, "cuda");
  }
  return 0;
}
