// Plugin ABI 1.1 (opconform/plugin.h): options checked before register_ops and handed to it,
// register_ops' own error message, declare_op turned into the op's data, the reference's fake
// kernel for an op implemented by name, and C sample builders drawing through the host.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "opconform/adapters/library_manifest.h"
#include "opconform/adapters/loader.h"
#include "opconform/conformance/generate.h"
#include "opconform/core/fake_tensor.h"
#include "opconform/core/tensor.h"
#include "opconform/reference/reference.h"

namespace opconform::adapters {
namespace {

Registry& reference_registry() {
  static Registry registry;
  static auto registration = reference::register_reference_ops(registry);
  return registry;
}

constexpr DLDataType kF32{kDLFloat, 32, 1};
constexpr DLDataType kF64{kDLFloat, 64, 1};

// ---- options ----

std::vector<std::string> g_seen_options;  // what register_ops read
std::string g_fail_with;                  // a message register_ops fails with ("" = succeed)

OpcStatus register_reading_options(const OpcRegistrar* r) {
  g_seen_options.clear();
  if (!OPC_HAS_FIELD(r, OpcRegistrar, declare_op)) return OPC_ABI_MISMATCH;
  for (int64_t i = 0; i < r->num_options; ++i)
    g_seen_options.push_back(std::string(r->options[i].name) + "=" + r->options[i].value);
  if (!g_fail_with.empty()) {
    r->set_error(r->host, g_fail_with.c_str());
    return OPC_ERROR;
  }
  return OPC_OK;
}
const OpcOptionSpec kSpecs[] = {
    {"mode", "how to run", "fast", OPC_OPTION_REQUIRED, 0},
    {"extension", "a library to load", nullptr, OPC_OPTION_REPEATABLE, 0},
};
OPCONFORM_PLUGIN_WITH_OPTIONS(options_plugin, "options-test", "1", register_reading_options, kSpecs, 2)

// A plugin built against ABI 1.0: its OpcPlugin ends at `flags`.
struct OpcPlugin10 {
  uint32_t abi_version, size;
  const char* name;
  const char* version;
  OpcStatus (*register_ops)(const OpcRegistrar*);
  uint64_t flags;
};
OpcStatus register_nothing(const OpcRegistrar*) { return OPC_OK; }
const OpcPlugin10 kOld{OPC_PLUGIN_ABI_VERSION_1, sizeof(OpcPlugin10), "old", "1", register_nothing, 0};

std::string load_error(const OpcPlugin* plugin, PluginOptions options) {
  Registry registry;
  try {
    load_plugin(plugin, registry, {.schemas = &reference_registry(), .plugin_options = std::move(options)});
  } catch (const PluginError& e) {
    return e.what();
  }
  return "";
}

TEST(PluginAbi11, OptionsReachRegisterOpsInOrder) {
  Registry registry;
  auto lib = load_plugin(options_plugin(), registry,
                         {.plugin_options = {{"extension", "/a.so"}, {"mode", "slow"}, {"extension", "/b.so"}}});
  EXPECT_EQ(g_seen_options, (std::vector<std::string>{"extension=/a.so", "mode=slow", "extension=/b.so"}));
  ASSERT_EQ(lib->option_specs().size(), 2u);
  EXPECT_EQ(lib->option_specs()[0].name, "mode");
  EXPECT_TRUE(lib->option_specs()[0].required);
  EXPECT_EQ(lib->option_specs()[0].default_value, "fast");
  EXPECT_TRUE(lib->option_specs()[1].repeatable);
  EXPECT_EQ(describe_library(*lib, registry).option_specs.size(), 2u);
}

TEST(PluginAbi11, BadOptionsAreRefusedBeforeRegisterOps) {
  g_seen_options = {"untouched"};
  const std::string unknown = load_error(options_plugin(), {{"mode", "x"}, {"colour", "red"}});
  EXPECT_NE(unknown.find("unknown option 'colour' (it takes: mode, extension)"), std::string::npos) << unknown;
  EXPECT_NE(load_error(options_plugin(), {}).find("option 'mode' is required"), std::string::npos);
  EXPECT_NE(load_error(options_plugin(), {{"mode", "a"}, {"mode", "b"}}).find("option 'mode' is given twice"),
            std::string::npos);
  EXPECT_EQ(g_seen_options, std::vector<std::string>{"untouched"});  // register_ops never ran
  const auto* old = reinterpret_cast<const OpcPlugin*>(&kOld);
  EXPECT_NE(load_error(old, {{"mode", "x"}}).find("built for plugin ABI 1.0: it takes no options"), std::string::npos);
  EXPECT_EQ(load_error(old, {}), "");  // an old plugin without options loads as before
}

TEST(PluginAbi11, RegisterOpsSaysWhyItFailed) {
  g_fail_with = "extension '/x.so': cannot open it";
  const std::string e = load_error(options_plugin(), {{"mode", "x"}});
  g_fail_with.clear();
  EXPECT_NE(e.find("register_ops failed with status 1: extension '/x.so': cannot open it"), std::string::npos) << e;
}

TEST(PluginAbi11, ParsesAndFormatsOptions) {
  EXPECT_EQ(parse_plugin_option("extension=/a=b.so"), (std::pair<std::string, std::string>{"extension", "/a=b.so"}));
  EXPECT_EQ(parse_plugin_option("flag="), (std::pair<std::string, std::string>{"flag", ""}));
  EXPECT_THROW(parse_plugin_option("novalue"), Error);
  EXPECT_THROW(parse_plugin_option("=x"), Error);
  EXPECT_EQ(format_plugin_option({"a", "b"}), "a=b");
}

// ---- declare_op, sample builders, the reference's fake kernel ----

// boxes [K, 4] (x1, y1, x2, y2) -> areas [K]
OpcStatus box_area(const OpcCallContext* ctx, const OpcValue* args, int64_t, OpcValue* returns, int64_t, void*) {
  const DLTensor& b = args[0].u.tensor->dl_tensor;
  OpcDLManagedTensorVersioned* out = ctx->new_tensor(ctx->host, b.dtype, 1, b.shape, nullptr);
  if (out == nullptr) return OPC_OUT_OF_MEMORY;
  returns[0].tag = OPC_TAG_TENSOR, returns[0].u.tensor = out;
  return OPC_OK;
}

// K in [0, 5]; each box has x1 < x2 and y1 < y2, computed from draws; scale in (0, 2].
OpcStatus build_boxes(const OpcSampleDraw* d, OpcValue* args, int64_t num_args, void*) {
  if (num_args != 2) return OPC_ABI_MISMATCH;
  int64_t k = 0;
  OpcStatus s = d->integer(d->host, 0, 5, &k);
  if (s != OPC_OK) return s;
  std::vector<double> values;
  for (int64_t i = 0; i < k; ++i) {
    double x = 0, y = 0, w = 0, h = 0;
    if ((s = d->real(d->host, 0, 10, &x)) != OPC_OK || (s = d->real(d->host, 0, 10, &y)) != OPC_OK ||
        (s = d->real(d->host, 0.5, 4, &w)) != OPC_OK || (s = d->real(d->host, 0.5, 4, &h)) != OPC_OK)
      return s;
    values.insert(values.end(), {x, y, x + w, y + h});
  }
  const int64_t sizes[2] = {k, 4};
  DLDataType dtype{};
  if ((s = d->dtype(d->host, nullptr, 0, &dtype)) != OPC_OK) return s;
  if ((s = d->tensor_of(d->host, 2, sizes, dtype, values.data(), &args[0])) != OPC_OK) return s;
  double scale = 0;
  if ((s = d->real(d->host, 0.25, 2, &scale)) != OPC_OK) return s;
  args[1].tag = OPC_TAG_DOUBLE, args[1].u.d = scale;
  return OPC_OK;
}

// A builder that asks for an impossible draw and (wrongly) goes on: the host's error wins.
OpcStatus build_impossible(const OpcSampleDraw* d, OpcValue*, int64_t, void*) {
  int64_t k = 0;
  (void)d->integer(d->host, 5, 1, &k);
  d->set_error(d->host, "ignored: the draw's own error is rethrown");
  return OPC_ERROR;
}

OpcStatus relu_contiguous(const OpcCallContext* ctx, const OpcValue* args, int64_t, OpcValue* returns, int64_t,
                          void*) {
  const DLTensor& x = args[0].u.tensor->dl_tensor;
  OpcDLManagedTensorVersioned* out = ctx->new_tensor(ctx->host, x.dtype, x.ndim, x.shape, nullptr);
  if (out == nullptr) return OPC_OUT_OF_MEMORY;
  returns[0].tag = OPC_TAG_TENSOR, returns[0].u.tensor = out;
  return OPC_OK;
}

OpcStatus register_declaring(const OpcRegistrar* r) {
  OpcStatus s = r->define(r->host, "boxes::area(Tensor boxes, float scale=1.0) -> Tensor");
  if (s == OPC_OK) s = r->impl(r->host, "boxes::area", OPC_KERNEL_CPU, box_area, nullptr);
  const DLDataType dtypes[2] = {kF32, kF64};
  OpcArgConstraint scale{};
  scale.name = "scale", scale.values.flags = OPC_VALUES_POSITIVE | OPC_VALUES_MAX, scale.values.max = 2;
  scale.max_rank = -1, scale.allow_none = 1;
  OpcTolerance tol{kF32, 0, 1e-4, 1e-5, -1, "areas of boxes sum four roundings"};
  OpcOpSpec spec{};
  spec.version = OPC_PLUGIN_ABI_VERSION_1, spec.size = sizeof(OpcOpSpec), spec.op_name = "boxes::area";
  spec.dtypes = dtypes, spec.num_dtypes = 2, spec.args = &scale, spec.num_args = 1;
  spec.tolerances = &tol, spec.num_tolerances = 1, spec.sample_builder = build_boxes, spec.doc = "box areas";
  if (s == OPC_OK) s = r->declare_op(r->host, &spec);

  // Problems, each of one op; the load goes on.
  (void)r->define(r->host, "boxes::bad(Tensor x) -> Tensor");
  (void)r->impl(r->host, "boxes::bad", OPC_KERNEL_CPU, box_area, nullptr);
  OpcArgConstraint nope{};
  nope.name = "no_such_argument", nope.max_rank = -1;
  OpcOpSpec bad{};
  bad.version = OPC_PLUGIN_ABI_VERSION_1, bad.size = sizeof(OpcOpSpec), bad.op_name = "boxes::bad";
  bad.args = &nope, bad.num_args = 1;
  (void)r->declare_op(r->host, &bad);
  bad.args = nullptr, bad.num_args = 0, bad.flags = OPC_OP_REFERENCE_FAKE;  // the plugin's own op
  (void)r->declare_op(r->host, &bad);

  (void)r->define(r->host, "boxes::impossible(Tensor x) -> Tensor");
  (void)r->impl(r->host, "boxes::impossible", OPC_KERNEL_CPU, box_area, nullptr);
  OpcOpSpec impossible{};
  impossible.version = OPC_PLUGIN_ABI_VERSION_1, impossible.size = sizeof(OpcOpSpec);
  impossible.op_name = "boxes::impossible", impossible.sample_builder = build_impossible;
  (void)r->declare_op(r->host, &impossible);

  // A reference op by name: its fake kernel is the reference's; constraints of its own are refused.
  if (s == OPC_OK) s = r->impl(r->host, "aten::relu", OPC_KERNEL_CPU, relu_contiguous, nullptr);
  OpcOpSpec relu{};
  relu.version = OPC_PLUGIN_ABI_VERSION_1, relu.size = sizeof(OpcOpSpec), relu.op_name = "aten::relu";
  relu.flags = OPC_OP_REFERENCE_FAKE, relu.dtypes = &kF32, relu.num_dtypes = 1;
  if (s == OPC_OK) s = r->declare_op(r->host, &relu);
  // A reference op with a sample builder of the reference's: the plugin narrows its dtypes only.
  if (s == OPC_OK) s = r->impl(r->host, "aten::gather", OPC_KERNEL_CPU, relu_contiguous, nullptr);
  OpcOpSpec gather{};
  gather.version = OPC_PLUGIN_ABI_VERSION_1, gather.size = sizeof(OpcOpSpec), gather.op_name = "aten::gather";
  gather.dtypes = &kF32, gather.num_dtypes = 1;
  if (s == OPC_OK) s = r->declare_op(r->host, &gather);
  (void)r->impl(r->host, "aten::neg", OPC_KERNEL_CPU, relu_contiguous, nullptr);
  OpcOpSpec neg{};
  neg.version = OPC_PLUGIN_ABI_VERSION_1, neg.size = sizeof(OpcOpSpec), neg.op_name = "aten::neg";
  neg.args = &scale, neg.num_args = 1;
  (void)r->declare_op(r->host, &neg);
  return s;
}
OPCONFORM_PLUGIN(declaring_plugin, "declaring-test", "1", register_declaring)

struct Declaring {
  Registry registry;
  std::unique_ptr<LoadedLibrary> lib = load_plugin(declaring_plugin(), registry, {.schemas = &reference_registry()});
};

std::string problem_of(const LoadedLibrary& lib, const std::string& op) {
  std::string all;
  for (const auto& p : lib.problems())
    if (p.op == op) all += p.message + "\n";
  return all;
}

TEST(PluginAbi11, DeclareOpBecomesTheOpsData) {
  Declaring d;
  const auto data = d.registry.get("boxes::area").data();
  EXPECT_EQ(data->constraints.dtypes, (std::vector<DType>{DType::Float32, DType::Float64}));
  const ArgConstraint& scale = data->constraints.for_arg("scale");
  EXPECT_TRUE(scale.values.positive);
  EXPECT_EQ(scale.values.max, 2.0);
  ASSERT_NE(data->tolerance_for(DType::Float32), nullptr);
  EXPECT_EQ(data->tolerance_for(DType::Float32)->reason, "areas of boxes sum four roundings");
  EXPECT_EQ(data->doc, "box areas");
  EXPECT_EQ(d.lib->declared_dtypes("boxes::area"), data->constraints.dtypes);
  EXPECT_TRUE(d.lib->declared("boxes::area").sample_builder);
  EXPECT_TRUE(d.lib->declared("boxes::area").constraints);
}

TEST(PluginAbi11, ABadDeclarationIsAProblemOfThatOp) {
  Declaring d;
  const std::string bad = problem_of(*d.lib, "boxes::bad");
  EXPECT_NE(bad.find("no_such_argument"), std::string::npos) << bad;
  EXPECT_NE(bad.find("OPC_OP_REFERENCE_FAKE is for ops the plugin implements by name"), std::string::npos) << bad;
  const std::string neg = problem_of(*d.lib, "aten::neg");
  EXPECT_NE(neg.find("the op is the reference's"), std::string::npos) << neg;
  EXPECT_TRUE(problem_of(*d.lib, "boxes::area").empty());
}

TEST(PluginAbi11, TheReferencesFakeKernelAnswersFakeCalls) {
  Declaring d;
  EXPECT_TRUE(d.lib->has_kernel("aten::relu", OPC_KERNEL_FAKE));
  EXPECT_TRUE(d.lib->declared("aten::relu").reference_fake);
  EXPECT_FALSE(d.lib->has_kernel("aten::neg", OPC_KERNEL_FAKE));
  EXPECT_EQ(d.lib->declared_dtypes("aten::relu"), std::vector<DType>{DType::Float32});
  // The reference's builder is the reference's, not declared by the plugin (list shows what the
  // plugin declared).
  EXPECT_TRUE(static_cast<bool>(d.registry.get("aten::gather").data()->sample_builder));
  EXPECT_FALSE(d.lib->declared("aten::gather").sample_builder);
  EXPECT_EQ(d.lib->declared_dtypes("aten::gather"), std::vector<DType>{DType::Float32});
  // A transposed input: PyTorch's relu keeps its layout, which the reference's fake kernel says.
  FakeTensorMode mode;
  FakeTensorModeGuard guard(mode);
  Tensor x = empty({3, 5}, TensorOptions(DType::Float32)).transpose(0, 1);
  Stack stack{IValue(x)};
  d.registry.get("aten::relu").call_boxed(stack);
  const Tensor y = stack.at(0).to_tensor();
  EXPECT_TRUE(y.is_fake());
  EXPECT_EQ(std::vector<int64_t>(y.sizes().begin(), y.sizes().end()), (std::vector<int64_t>{5, 3}));
  EXPECT_EQ(std::vector<int64_t>(y.strides().begin(), y.strides().end()), (std::vector<int64_t>{1, 5}));
}

TEST(PluginAbi11, ACSampleBuilderBuildsValidSamplesFromDraws) {
  Declaring d;
  conformance::GenerateSpec spec;
  spec.count = 40, spec.seed = 7;
  spec.requires_grad = false;
  const auto samples = conformance::generate_samples(d.registry.get("boxes::area"), spec);
  ASSERT_EQ(samples.size(), 40u);
  int non_empty = 0;
  for (const auto& s : samples) {
    const Tensor boxes = s.args.at(0).to_tensor();
    ASSERT_EQ(boxes.dim(), 2);
    ASSERT_EQ(boxes.size(1), 4);
    EXPECT_LE(boxes.size(0), 5);
    auto at = [&](int64_t i, int64_t j) { return boxes.get({i, j}).to_double(); };
    for (int64_t i = 0; i < boxes.size(0); ++i) {
      EXPECT_LT(at(i, 0), at(i, 2)) << s.description;
      EXPECT_LT(at(i, 1), at(i, 3)) << s.description;
    }
    non_empty += boxes.size(0) > 0;
    const double scale = s.args.at(1).to_double();
    EXPECT_GT(scale, 0);
    EXPECT_LE(scale, 2);
  }
  EXPECT_GT(non_empty, 10);
  // The same seed, the same samples: the builder is a function of its draws.
  const auto again = conformance::generate_samples(d.registry.get("boxes::area"), spec);
  EXPECT_EQ(again.at(20).description, samples.at(20).description);
}

TEST(PluginAbi11, AFailedDrawReachesTheGeneratorUnchanged) {
  Declaring d;
  conformance::GenerateSpec spec;
  spec.count = 1, spec.seed = 1;
  try {
    conformance::generate_samples(d.registry.get("boxes::impossible"), spec);
    FAIL() << "an impossible draw made a sample";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(std::string(e.what()).find("ignored"), std::string::npos) << e.what();
  }
}

// Specs a careless or hostile plugin fills: each is a problem with a reason, never a crash.
OpcStatus register_garbage(const OpcRegistrar* r) {
  (void)r->define(r->host, "garbage::op(Tensor x) -> Tensor");
  (void)r->impl(r->host, "garbage::op", OPC_KERNEL_CPU, box_area, nullptr);
  OpcOpSpec spec{};
  spec.version = OPC_PLUGIN_ABI_VERSION_1, spec.size = 8;  // holds no op_name
  OpcStatus failed = OPC_OK;
  failed |= r->declare_op(r->host, &spec) == OPC_OK ? 1 : 0;
  failed |= r->declare_op(r->host, nullptr) == OPC_OK ? 1 : 0;
  spec.size = sizeof(OpcOpSpec), spec.op_name = "garbage::op", spec.num_args = -3;
  failed |= r->declare_op(r->host, &spec) == OPC_OK ? 1 : 0;
  spec.num_args = 2;  // args NULL
  failed |= r->declare_op(r->host, &spec) == OPC_OK ? 1 : 0;
  spec.num_args = 0, spec.version = 99;
  failed |= r->declare_op(r->host, &spec) == OPC_OK ? 1 : 0;
  spec.version = OPC_PLUGIN_ABI_VERSION_1, spec.flags = 1u << 20;
  failed |= r->declare_op(r->host, &spec) == OPC_OK ? 1 : 0;
  const DLDataType junk{77, 3, 1};
  spec.flags = 0, spec.dtypes = &junk, spec.num_dtypes = 1;
  failed |= r->declare_op(r->host, &spec) == OPC_OK ? 1 : 0;
  return failed == 0 ? OPC_OK : OPC_ERROR;  // every declaration above must fail
}
OPCONFORM_PLUGIN(garbage_plugin, "garbage-test", "1", register_garbage)

TEST(PluginAbi11, UnreadableSpecsAreProblemsNotCrashes) {
  Registry registry;
  auto lib = load_plugin(garbage_plugin(), registry, {.schemas = &reference_registry()});
  EXPECT_EQ(lib->problems().size(), 7u);
  const std::string all = problem_of(*lib, "garbage::op") + problem_of(*lib, "(unnamed)");
  for (const char* why : {"holds no op_name", "the spec is NULL", "args count -3 is out of range",
                          "args is NULL with a count of 2", "OpcOpSpec.version is 99", "unknown flags",
                          "dtypes[0]"})
    EXPECT_NE(all.find(why), std::string::npos) << why << " in:\n" << all;
  EXPECT_TRUE(lib->has_kernel("garbage::op", OPC_KERNEL_CPU));  // the op itself stays
}

}  // namespace
}  // namespace opconform::adapters
