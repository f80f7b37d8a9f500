// The TORCH_LIBRARY adapter (libopconform_torch_library.so) loaded with opconform's loader, with
// torchvision 0.14's extension (python3-torchvision's _C.so): its 11 checkable ops found with their
// exact schemas, the kernels each has (CPU for all, a backward where torchvision registers
// autograd, no fake kernel: torchvision 0.14 has no Meta kernels), roi_align's CPU kernel against a
// value computed by hand, and the errors a bad extension path gives. Skips when the _C.so is not
// installed.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "opconform/adapters/loader.h"
#include "opconform/core/tensor.h"
#include "opconform/reference/detail/calls.h"

namespace opconform::adapters {
namespace {

const char* const kTorchvision = OPCONFORM_TORCHVISION_C_PATH;

bool have_torchvision() { return kTorchvision[0] != '\0' && std::filesystem::exists(kTorchvision); }

#define SKIP_WITHOUT_TORCHVISION()                                                                     \
  if (!have_torchvision())                                                                             \
  GTEST_SKIP() << "torchvision's _C.so is not installed (apt install python3-torchvision; CMake looked " \
                  "for /usr/lib/python3/dist-packages/torchvision/_C*.so)"

// The plugin loaded once with torchvision's extension (a second load in this process would find
// the same ops through the plugin's record of what the extension registered).
struct Torchvision {
  Registry registry;
  std::unique_ptr<LoadedLibrary> lib;
  Torchvision() {
    lib = load_plugin(OPCONFORM_TORCH_LIBRARY_PLUGIN_PATH, registry, {.plugin_options = {{"extension", kTorchvision}}});
  }
};
Torchvision& torchvision() {
  static Torchvision instance;
  return instance;
}

// torchvision 0.14.1's schemas, as c10::toString prints them (and opconform's parser reprints them).
const std::map<std::string, std::string>& expected_schemas() {
  static const std::map<std::string, std::string> schemas = {
      {"torchvision::nms", "torchvision::nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor"},
      {"torchvision::roi_align",
       "torchvision::roi_align(Tensor input, Tensor rois, float spatial_scale, int pooled_height, int pooled_width, "
       "int sampling_ratio, bool aligned) -> Tensor"},
      {"torchvision::_roi_align_backward",
       "torchvision::_roi_align_backward(Tensor grad, Tensor rois, float spatial_scale, int pooled_height, "
       "int pooled_width, int batch_size, int channels, int height, int width, int sampling_ratio, bool aligned) "
       "-> Tensor"},
      {"torchvision::roi_pool",
       "torchvision::roi_pool(Tensor input, Tensor rois, float spatial_scale, int pooled_height, int pooled_width) "
       "-> (Tensor, Tensor)"},
      {"torchvision::_roi_pool_backward",
       "torchvision::_roi_pool_backward(Tensor grad, Tensor rois, Tensor argmax, float spatial_scale, "
       "int pooled_height, int pooled_width, int batch_size, int channels, int height, int width) -> Tensor"},
      {"torchvision::ps_roi_align",
       "torchvision::ps_roi_align(Tensor input, Tensor rois, float spatial_scale, int pooled_height, "
       "int pooled_width, int sampling_ratio) -> (Tensor, Tensor)"},
      {"torchvision::_ps_roi_align_backward",
       "torchvision::_ps_roi_align_backward(Tensor grad, Tensor rois, Tensor channel_mapping, float spatial_scale, "
       "int pooled_height, int pooled_width, int sampling_ratio, int batch_size, int channels, int height, "
       "int width) -> Tensor"},
      {"torchvision::ps_roi_pool",
       "torchvision::ps_roi_pool(Tensor input, Tensor rois, float spatial_scale, int pooled_height, "
       "int pooled_width) -> (Tensor, Tensor)"},
      {"torchvision::_ps_roi_pool_backward",
       "torchvision::_ps_roi_pool_backward(Tensor grad, Tensor rois, Tensor channel_mapping, float spatial_scale, "
       "int pooled_height, int pooled_width, int batch_size, int channels, int height, int width) -> Tensor"},
      {"torchvision::deform_conv2d",
       "torchvision::deform_conv2d(Tensor input, Tensor weight, Tensor offset, Tensor mask, Tensor bias, "
       "int stride_h, int stride_w, int pad_h, int pad_w, int dilation_h, int dilation_w, int groups, "
       "int offset_groups, bool use_mask) -> Tensor"},
      {"torchvision::_deform_conv2d_backward",
       "torchvision::_deform_conv2d_backward(Tensor grad, Tensor input, Tensor weight, Tensor offset, Tensor mask, "
       "Tensor bias, int stride_h, int stride_w, int pad_h, int pad_w, int dilation_h, int dilation_w, int groups, "
       "int offset_groups, bool use_mask) -> (Tensor, Tensor, Tensor, Tensor, Tensor)"},
  };
  return schemas;
}

TEST(TorchLibraryAdapter, FindsTorchvisionsOpsWithTheirSchemas) {
  SKIP_WITHOUT_TORCHVISION();
  const LoadedLibrary& lib = *torchvision().lib;
  EXPECT_EQ(lib.name(), "torch_library");
  std::vector<std::string> expected;
  for (const auto& [op, schema] : expected_schemas()) expected.push_back(op);
  std::sort(expected.begin(), expected.end());
  // _cuda_version() -> int has no tensor to dispatch on: skipped.
  EXPECT_EQ(lib.ops(), expected);
  for (const auto& [op, schema] : expected_schemas()) {
    EXPECT_EQ(torchvision().registry.get(op).schema().to_string(), schema) << op;
  }
  for (const LoadProblem& p : lib.problems()) ADD_FAILURE() << p.op << ": " << p.message;
}

TEST(TorchLibraryAdapter, KernelsAreTheOnesTorchvisionRegisters) {
  SKIP_WITHOUT_TORCHVISION();
  const LoadedLibrary& lib = *torchvision().lib;
  for (const auto& [op, schema] : expected_schemas()) {
    EXPECT_TRUE(lib.has_kernel(op, OPC_KERNEL_CPU)) << op;
    // torchvision 0.14 registers no Meta kernel: no fake kernel, which test_faketensor reports.
    EXPECT_FALSE(lib.has_kernel(op, OPC_KERNEL_FAKE)) << op;
    // Every op but nms has an Autograd kernel: its backward is an operator, with a backward of its
    // own (the _backward ops' refuse double backward when run). No fake kernels for them either.
    const std::string backward = "torchvision_backward::" + op.substr(op.find("::") + 2);
    EXPECT_FALSE(lib.has_kernel(op, OPC_KERNEL_BACKWARD)) << op;
    EXPECT_EQ(lib.has_kernel(backward, OPC_KERNEL_CPU), op != "torchvision::nms") << op;
    EXPECT_FALSE(lib.has_kernel(backward, OPC_KERNEL_FAKE)) << op;
    EXPECT_EQ(lib.has_kernel("torchvision_backward2::" + op.substr(op.find("::") + 2), OPC_KERNEL_CPU),
              op != "torchvision::nms")
        << op;
  }
  // The profile next to the plugin declared dtypes and a sample builder.
  EXPECT_TRUE(lib.declared("torchvision::roi_align").sample_builder);
  EXPECT_EQ(lib.declared_dtypes("torchvision::roi_align"), (std::vector<DType>{DType::Float32, DType::Float64}));
}

// roi_align on a 2x2 map [[1, 2], [3, 4]], one box (batch 0, x1 = y1 = 0, x2 = y2 = 1), scale 1, a
// 1x1 output, one sampling point per bin. Unaligned, the box is 1x1 pixels from (0, 0): the point
// sits at its centre (0.5, 0.5), the mean of the four pixels, 2.5. Aligned, the box shifts by half
// a pixel to (-0.5, -0.5)..(0.5, 0.5): the point is pixel (0, 0), 1.
TEST(TorchLibraryAdapter, RoiAlignAgreesWithAHandComputedValue) {
  SKIP_WITHOUT_TORCHVISION();
  reference::detail::Ops ops(torchvision().registry);
  const Tensor input = from_vector<float>({1, 2, 3, 4}, {1, 1, 2, 2});
  const Tensor rois = from_vector<float>({0, 0, 0, 1, 1}, {1, 5});
  auto roi_align = [&](bool aligned) {
    return ops
        .call("torchvision::roi_align", {input, rois, IValue(1.0), IValue(int64_t{1}), IValue(int64_t{1}),
                                         IValue(int64_t{1}), IValue(aligned)})
        .at(0)
        .to_tensor();
  };
  const Tensor unaligned = roi_align(false);
  EXPECT_EQ(std::vector<int64_t>(unaligned.sizes().begin(), unaligned.sizes().end()), (std::vector<int64_t>{1, 1, 1, 1}));
  EXPECT_FLOAT_EQ(unaligned.to_vector<float>().at(0), 2.5f);
  EXPECT_FLOAT_EQ(roi_align(true).to_vector<float>().at(0), 1.0f);
}

// A second load in one process (another registry): dlopen runs no initializer again, and the plugin
// finds the ops from its record of the first load.
TEST(TorchLibraryAdapter, LoadsAgainInTheSameProcess) {
  SKIP_WITHOUT_TORCHVISION();
  const std::vector<std::string> first = torchvision().lib->ops();
  Registry registry;
  const auto again =
      load_plugin(OPCONFORM_TORCH_LIBRARY_PLUGIN_PATH, registry, {.plugin_options = {{"extension", kTorchvision}}});
  EXPECT_EQ(again->ops(), first);
  // A namespace given by name selects from every op libtorch has, whichever extension brought it.
  Registry by_namespace;
  const auto selected = load_plugin(OPCONFORM_TORCH_LIBRARY_PLUGIN_PATH, by_namespace,
                                    {.plugin_options = {{"extension", kTorchvision}, {"namespace", "torchvision"}}});
  EXPECT_EQ(selected->ops(), first);
}

TEST(TorchLibraryAdapter, ABadExtensionIsAnErrorNamingIt) {
  Registry registry;
  const std::string missing = "/nonexistent/libno_such_extension.so";
  try {
    load_plugin(OPCONFORM_TORCH_LIBRARY_PLUGIN_PATH, registry, {.plugin_options = {{"extension", missing}}});
    FAIL() << "loading a missing extension did not fail";
  } catch (const PluginError& e) {
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
  }
  // The option is required.
  EXPECT_THROW(load_plugin(OPCONFORM_TORCH_LIBRARY_PLUGIN_PATH, registry), PluginError);
}

}  // namespace
}  // namespace opconform::adapters
