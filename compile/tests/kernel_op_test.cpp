// kernel_op and wrap_kernel on the reference registry: eager calls, capture seeing inside the op,
// functionalize and replay, the buffers a wrapped kernel writes, duplicate names, fake and
// autograd behaviour, and a CUDA kernel (a PTX kernel loaded at run time; skipped without a GPU).
#include <gtest/gtest.h>

#include <algorithm>

#include "support/compile_test_support.h"
#include "opconform/compile/capture.h"
#include "opconform/compile/detail/tracing.h"
#include "opconform/compile/functionalize.h"
#include "opconform/compile/interpreter.h"
#include "opconform/compile/kernel_op.h"
#include "opconform/core/autograd.h"
#include "opconform/core/cuda.h"
#include "opconform/core/custom_op.h"
#include "opconform/core/fake_tensor.h"
#include "opconform/reference/reference.h"

#ifdef OPCONFORM_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace opconform::compile {
namespace {

using testing::registry;
using testing::call;
using testing::call1;
using testing::iota;

Tensor full_like(const Tensor& x, double value) {
  return call1("aten::full_like", {x, value, IValue(), IValue(), IValue(), IValue(), IValue()});
}

// The raw kernel: out = x + alpha * y over ints[0] Float64 elements, in blocks of ints[1] (the
// way a GPU kernel walks its grid), alpha = floats[0].
void axpy_kernel(const std::vector<Tensor>& in, const std::vector<Tensor>& out, const std::vector<int64_t>& ints,
                 const std::vector<double>& floats) {
  const int64_t n = ints.at(0), block = ints.at(1);
  const double alpha = floats.at(0);
  const Tensor x = in.at(0).contiguous(), y = in.at(1).contiguous();
  const double* xp = x.const_data_ptr<double>();
  const double* yp = y.const_data_ptr<double>();
  double* op = out.at(0).mutable_data_ptr<double>();
  for (int64_t start = 0; start < n; start += block)
    for (int64_t i = start; i < std::min(start + block, n); ++i) op[i] = xp[i] + alpha * yp[i];
}

// Another kernel, for the duplicate-name test.
void copy_kernel(const std::vector<Tensor>& in, const std::vector<Tensor>& out, const std::vector<int64_t>&,
                 const std::vector<double>&) {
  out.at(0).copy_(in.at(0));
}

constexpr int64_t kBlock = 4;

// t::scaled_add(x, y, alpha) = x + alpha * y, y broadcast to x: the body broadcasts with
// registry ops (y * ones), allocates the result (zeros like x) and launches the raw kernel with
// the element count (symbolic under capture) and alpha as launch arguments.
KernelOpBody scaled_add_body(WrappedKernel axpy) {
  return [axpy](const Stack& a) {
    const Tensor& x = a[0].to_tensor();
    Tensor y = call1("aten::mul.Tensor", {a[1], full_like(x, 1.0)});
    Tensor out = full_like(x, 0.0);
    SymInt n = 1;
    for (const SymInt& s : x.sym_sizes()) n = n * s;
    axpy({x, y}, {out}, {n, kBlock}, {a[2].to_double()});
    return Stack{IValue(out)};
  };
}

struct ScaledAdd {
  WrappedKernel axpy = wrap_kernel("axpy", axpy_kernel, registry());
  KernelOp op = kernel_op("t::scaled_add", "t::scaled_add(Tensor x, Tensor y, float alpha) -> Tensor",
                          scaled_add_body(axpy), registry());
};

std::vector<double> expected_scaled_add(const Tensor& x, const Tensor& y, double alpha) {
  auto xv = x.to_vector<double>(), yv = y.to_vector<double>();
  std::vector<double> out(xv.size());
  for (size_t i = 0; i < xv.size(); ++i) out[i] = xv[i] + alpha * yv[i % yv.size()];
  return out;
}

// scaled_add(x, y, 2.0) * x
Stack program(const Stack& in) {
  Tensor r = call1("t::scaled_add", {in[0], in[1], 2.0});
  return {IValue(call1("aten::mul.Tensor", {r, in[0]}))};
}

const Node* find_node(const Graph& g, std::string_view op) {
  for (const Node& n : g.nodes)
    if (n.op == op) return &n;
  return nullptr;
}
size_t count_nodes(const Graph& g, std::string_view op) {
  return static_cast<size_t>(std::count_if(g.nodes.begin(), g.nodes.end(), [&](const Node& n) { return n.op == op; }));
}

TEST(KernelOp, EagerCallRunsTheBody) {
  ScaledAdd s;
  Tensor x = iota({4, 3}), y = iota({3}, -2);
  const Stack r = s.op({x, y, 0.5});
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(shape_string(r[0].to_tensor().sizes()), shape_string(x.sizes()));
  EXPECT_EQ(r[0].to_tensor().to_vector<double>(), expected_scaled_add(x, y, 0.5));
  // The same through the registry.
  EXPECT_EQ(call1("t::scaled_add", {x, y, -3.0}).to_vector<double>(), expected_scaled_add(x, y, -3.0));
  EXPECT_EQ(s.op.name(), "t::scaled_add");
  EXPECT_EQ(s.axpy.op_name(), "wrap_kernel::axpy");
  EXPECT_EQ(s.axpy.handle().schema().to_string(),
            "wrap_kernel::axpy(Tensor[] inputs, Tensor(a!)[] outputs, int[] ints, float[] floats) -> ()");
}

TEST(KernelOp, TheSchemaMayBeGivenWithoutTheName) {
  WrappedKernel axpy = wrap_kernel("axpy", axpy_kernel, registry());
  KernelOp op = kernel_op("t::scaled_add", "(Tensor x, Tensor y, float alpha) -> Tensor", scaled_add_body(axpy),
                          registry());
  EXPECT_EQ(op.schema().to_string(), "t::scaled_add(Tensor x, Tensor y, float alpha) -> Tensor");
  Tensor x = iota({2, 3}), y = iota({2, 3}, 5);
  EXPECT_EQ(op({x, y, 2.0})[0].to_tensor().to_vector<double>(), expected_scaled_add(x, y, 2.0));
}

TEST(KernelOp, CaptureRecordsTheInnerOpsAndTheKernelLaunchNotTheOp) {
  ScaledAdd s;
  Graph g = capture(program, {iota({4, 3}), iota({3}, -2)}, {.registry = &registry(), .input_names = {"x", "y"}});
  SCOPED_TRACE(g.to_string());
  EXPECT_EQ(count_nodes(g, "t::scaled_add"), 0u) << "the kernel_op is inlined";
  EXPECT_NE(g.to_string().find("  wrap_kernel::axpy([%x, %3], [%4], [s0*s1, 4], [2.0])\n"), std::string::npos);
  EXPECT_EQ(count_nodes(g, "wrap_kernel::axpy"), 1u);
  EXPECT_EQ(count_nodes(g, "aten::full_like"), 2u);
  EXPECT_EQ(count_nodes(g, "aten::mul.Tensor"), 2u);  // the body's broadcast and the program's product
  const Node* launch = find_node(g, "wrap_kernel::axpy");
  ASSERT_NE(launch, nullptr);
  ASSERT_EQ(launch->args.size(), 4u);
  EXPECT_TRUE(launch->outputs.empty()) << "a kernel launch returns nothing";
  // The launch arguments: alpha among the floats; the element count stays an expression of the
  // input's sizes (symbolic capture), the block size a constant.
  const IValue& floats = std::get<IValue>(launch->args[3]);
  ASSERT_NE(floats.get_if<std::vector<double>>(), nullptr) << floats.repr();
  EXPECT_EQ(*floats.get_if<std::vector<double>>(), std::vector<double>{2.0});
  const IValue& ints = std::get<IValue>(launch->args[2]);
  ASSERT_EQ(ints.tag(), IValue::Tag::GenericList) << ints.repr();
  const auto& items = ints.to_generic_list();
  ASSERT_EQ(items.size(), 2u);
  ASSERT_TRUE(items[0].get_if<SymInt>() != nullptr) << items[0].repr();
  EXPECT_EQ(items[0].get_if<SymInt>()->hint(), 12);
  EXPECT_EQ(items[1].to_int(), kBlock);
  // The kernel reads the input x and the broadcast y.
  const auto& reads = std::get<RefList>(launch->args[0]).items;
  ASSERT_EQ(reads.size(), 2u);
  EXPECT_EQ(reads[0]->id, g.inputs[0]);
  EXPECT_EQ(reads[1]->id, find_node(g, "aten::mul.Tensor")->outputs[0]);
}

TEST(KernelOp, AStaticCaptureBakesTheLaunchArguments) {
  ScaledAdd s;
  Graph g = capture(program, {iota({4, 3}), iota({3}, -2)}, {.dynamic = false, .registry = &registry()});
  const Node* launch = find_node(g, "wrap_kernel::axpy");
  ASSERT_NE(launch, nullptr);
  const IValue& ints = std::get<IValue>(launch->args[2]);
  ASSERT_NE(ints.get_if<std::vector<int64_t>>(), nullptr) << ints.repr();
  EXPECT_EQ(*ints.get_if<std::vector<int64_t>>(), (std::vector<int64_t>{12, kBlock}));
}

TEST(KernelOp, TheLaunchNodeRecordsTheBufferItWrites) {
  ScaledAdd s;
  Graph g = capture(program, {iota({4, 3}), iota({3}, -2)}, {.registry = &registry()});
  const Node* launch = find_node(g, "wrap_kernel::axpy");
  ASSERT_NE(launch, nullptr);
  // The buffer: the second full_like (zeros like x), which the program's product then reads.
  std::vector<const Node*> fills;
  for (const Node& n : g.nodes)
    if (n.op == "aten::full_like") fills.push_back(&n);
  ASSERT_EQ(fills.size(), 2u);
  const ValueId buffer = fills[1]->outputs.at(0);
  const auto& writes = std::get<RefList>(launch->args[1]).items;
  ASSERT_EQ(writes.size(), 1u);
  EXPECT_EQ(writes[0]->id, buffer);
  EXPECT_FALSE(writes[0]->id == g.inputs[0]);
  const Node& product = g.nodes.back();
  EXPECT_EQ(product.op, "aten::mul.Tensor");
  EXPECT_EQ(std::get<Ref>(product.args[0]).id, buffer) << "before functionalize the product reads the written buffer";
  EXPECT_TRUE(registry().get(launch->op).schema().is_mutable(1));
  EXPECT_TRUE(has_mutation(g, registry()));
}

TEST(KernelOp, FunctionalizeMakesTheLaunchFunctionalAndReplayEqualsEager) {
  ScaledAdd s;
  Graph g = capture(program, {iota({4, 3}), iota({3}, -2)}, {.registry = &registry()});
  Graph f = functionalize(g, registry());
  SCOPED_TRACE(f.to_string());
  EXPECT_FALSE(has_mutation(f, registry()));
  const Node* launch = find_node(f, "wrap_kernel::axpy");
  ASSERT_NE(launch, nullptr);
  EXPECT_TRUE(launch->functional);
  ASSERT_EQ(launch->outputs.size(), 1u) << "one new value: the written buffer's content";
  // The product now reads the kernel's result, not the zero buffer.
  EXPECT_EQ(std::get<Ref>(f.nodes.back().args[0]).id, launch->outputs[0]);
  EXPECT_TRUE(f.write_backs.empty()) << "the program writes none of its inputs";

  for (double start : {0.5, -7.0}) {
    Tensor x = iota({4, 3}, start), y = iota({3}, start * 2);
    const Tensor eager = program({x, y})[0].to_tensor();
    EXPECT_EQ(run_graph(f, {x, y}, registry()).at(0).to_tensor().to_vector<double>(), eager.to_vector<double>());
    EXPECT_EQ(run_graph(g, {x, y}, registry()).at(0).to_tensor().to_vector<double>(), eager.to_vector<double>())
        << "the unfunctionalized graph replays too";
  }
}

TEST(KernelOp, TheBodyIsTheFakeKernel) {
  ScaledAdd s;
  FakeTensorMode mode;
  FakeTensorModeGuard guard(mode);
  Tensor x = make_fake_tensor({5, 3}, DType::Float64, Device::cpu());
  Tensor y = make_fake_tensor({3}, DType::Float64, Device::cpu());
  const Tensor r = s.op({x, y, 1.5})[0].to_tensor();
  EXPECT_TRUE(r.is_fake());
  EXPECT_EQ(shape_string(r.sizes()), "[5, 3]");
  EXPECT_EQ(r.dtype(), DType::Float64);
}

TEST(KernelOp, BackwardThroughTheOpNamesIt) {
  ScaledAdd s;
  Tensor x = iota({2, 3});
  x.set_requires_grad(true);
  Tensor r = s.op({x, iota({3}), 1.0})[0].to_tensor();  // the forward runs
  EXPECT_EQ(r.to_vector<double>(), expected_scaled_add(x, iota({3}), 1.0));
  Tensor total = call1("aten::sum.dim_IntList", {r, std::vector<int64_t>{0, 1}, false, IValue()});
  try {
    total.backward();
    FAIL() << "expected the backward to fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("t::scaled_add"), std::string::npos) << e.what();
  }
}

TEST(WrapKernel, ADirectLaunchOnInputsThatRequireGradIsRefused) {
  WrappedKernel axpy = wrap_kernel("axpy", axpy_kernel, registry());
  Tensor x = iota({3});
  x.set_requires_grad(true);
  Tensor out = full_like(iota({3}), 0.0);
  try {
    axpy({x, iota({3})}, {out}, {3, kBlock}, {1.0});
    FAIL() << "expected a refusal";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'wrap_kernel::axpy' is a raw kernel"), std::string::npos) << e.what();
  }
  autograd::NoGradGuard no_grad;
  axpy({x, iota({3})}, {out}, {3, kBlock}, {1.0});
  EXPECT_EQ(out.to_vector<double>(), (std::vector<double>{2, 4, 6}));
}

TEST(WrapKernel, TheSameNameAndKernelShareOneRegistration) {
  ASSERT_FALSE(registry().find("wrap_kernel::axpy") && registry().find("wrap_kernel::axpy")->has_schema())
      << "no earlier test left it registered";
  auto first = std::make_optional(wrap_kernel("axpy", axpy_kernel, registry()));
  WrappedKernel second = wrap_kernel("axpy", axpy_kernel, registry());
  EXPECT_EQ(first->state(), second.state());
  first.reset();
  Tensor out = full_like(iota({2}), 0.0);
  second({iota({2}), iota({2})}, {out}, {2, kBlock}, {1.0});  // still registered
  EXPECT_EQ(out.to_vector<double>(), (std::vector<double>{2, 4}));
}

TEST(WrapKernel, TheLastHandleUndoesTheRegistration) {
  { WrappedKernel k = wrap_kernel("axpy", axpy_kernel, registry()); }
  auto op = registry().find("wrap_kernel::axpy");
  EXPECT_FALSE(op && op->has_schema());
}

TEST(WrapKernel, TheSameNameWithAnotherKernelIsAnError) {
  WrappedKernel axpy = wrap_kernel("axpy", axpy_kernel, registry());
  try {
    wrap_kernel("axpy", copy_kernel, registry());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kRegistration);
    EXPECT_NE(std::string(e.what()).find("already registered in this registry for another kernel"), std::string::npos)
        << e.what();
  }
  // Another registry has its own.
  Registry other;
  WrappedKernel there = wrap_kernel("axpy", copy_kernel, other);
  EXPECT_NE(there.state(), axpy.state());
}

TEST(WrapKernel, BadNamesAndDevicesAreRefused) {
  EXPECT_THROW(wrap_kernel("not a name", axpy_kernel, registry()), Error);
  EXPECT_THROW(wrap_kernel("axpy", nullptr, registry()), Error);
  EXPECT_THROW(wrap_kernel("axpy", axpy_kernel, registry(), DeviceType::Meta), Error);
#ifndef OPCONFORM_WITH_CUDA
  try {
    wrap_kernel("axpy", axpy_kernel, registry(), DeviceType::CUDA);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotImplemented);
  }
#endif
}

TEST(KernelOp, DefiningTheSameNameTwiceIsAnError) {
  ScaledAdd s;
  try {
    kernel_op("t::scaled_add", "(Tensor x, Tensor y, float alpha) -> Tensor", scaled_add_body(s.axpy), registry());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kRegistration);
    EXPECT_NE(std::string(e.what()).find("'t::scaled_add' is already defined"), std::string::npos) << e.what();
  }
  // The first one is untouched.
  Tensor x = iota({2, 2}), y = iota({2});
  EXPECT_EQ(s.op({x, y, 1.0})[0].to_tensor().to_vector<double>(), expected_scaled_add(x, y, 1.0));
  // The same name in another registry while this one lives: refused (capture's table is by name).
  Registry other;
  auto fallbacks = install_builtin_fallbacks(other);
  EXPECT_THROW(kernel_op("t::scaled_add", "(Tensor x, Tensor y, float alpha) -> Tensor",
                         [](const Stack& a) { return Stack{a[0]}; }, other),
               Error);
}

TEST(KernelOp, DroppingTheOpUndoesEveryRegistration) {
  { ScaledAdd s; }
  auto op = registry().find("t::scaled_add");
  EXPECT_FALSE(op && op->has_schema());
  EXPECT_EQ(compile::detail::kernel_op_body("t::scaled_add"), nullptr);
}

TEST(KernelOp, ASchemaOfAnotherNameOrNoNamespaceIsRefused) {
  auto body = [](const Stack& a) { return Stack{a[0]}; };
  EXPECT_THROW(kernel_op("t::a", "t::b(Tensor x) -> Tensor", body, registry()), Error);
  EXPECT_THROW(kernel_op("a", "(Tensor x) -> Tensor", body, registry()), Error);
}

TEST(KernelOp, ABodyReturningTheWrongNumberOfValuesFailsNamingTheOp) {
  KernelOp op = kernel_op("t::two", "(Tensor x) -> (Tensor, Tensor)", [](const Stack& a) { return Stack{a[0]}; },
                          registry());
  try {
    op({iota({2})});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kSchemaMismatch);
    EXPECT_NE(std::string(e.what()).find("kernel_op 't::two': the body returned 1 values, the schema has 2 returns"),
              std::string::npos)
        << e.what();
  }
}

// ---------------------------------------------------------------- CUDA

#define SKIP_WITHOUT_CUDA() \
  if (!opconform::cuda::is_available()) GTEST_SKIP() << opconform::cuda::unavailable_reason()

#ifdef OPCONFORM_WITH_CUDA
// out[i] = x[i] + alpha * y[i] for i < n (Float64), from
//   extern "C" __global__ void axpy_f64(const double* x, const double* y, double* out, long long n,
//                                       double alpha)
// compiled with nvcc -ptx -arch=compute_75 and loaded at run time (cudaLibraryLoadData), the
// way a Triton kernel reaches the GPU.
constexpr const char* kAxpyPtx = R"(
.version 9.0
.target sm_75
.address_size 64
.visible .entry axpy_f64(
	.param .u64 axpy_f64_param_0,
	.param .u64 axpy_f64_param_1,
	.param .u64 axpy_f64_param_2,
	.param .u64 axpy_f64_param_3,
	.param .f64 axpy_f64_param_4
)
{
	.reg .pred 	%p<2>;
	.reg .b32 	%r<4>;
	.reg .f64 	%fd<5>;
	.reg .b64 	%rd<15>;
	ld.param.u64 	%rd2, [axpy_f64_param_0];
	ld.param.u64 	%rd3, [axpy_f64_param_1];
	ld.param.u64 	%rd4, [axpy_f64_param_2];
	ld.param.u64 	%rd5, [axpy_f64_param_3];
	ld.param.f64 	%fd1, [axpy_f64_param_4];
	mov.u32 	%r1, %ctaid.x;
	mov.u32 	%r2, %ntid.x;
	mul.wide.u32 	%rd6, %r1, %r2;
	mov.u32 	%r3, %tid.x;
	cvt.u64.u32 	%rd7, %r3;
	add.s64 	%rd1, %rd6, %rd7;
	setp.ge.s64 	%p1, %rd1, %rd5;
	@%p1 bra 	$L__BB0_2;
	cvta.to.global.u64 	%rd8, %rd2;
	shl.b64 	%rd9, %rd1, 3;
	add.s64 	%rd10, %rd8, %rd9;
	cvta.to.global.u64 	%rd11, %rd3;
	add.s64 	%rd12, %rd11, %rd9;
	ld.global.f64 	%fd2, [%rd12];
	ld.global.f64 	%fd3, [%rd10];
	fma.rn.f64 	%fd4, %fd2, %fd1, %fd3;
	cvta.to.global.u64 	%rd13, %rd4;
	add.s64 	%rd14, %rd13, %rd9;
	st.global.f64 	[%rd14], %fd4;
$L__BB0_2:
	ret;
}
)";

void check_cuda(cudaError_t status, const char* what) {
  OPCONFORM_CHECK(status == cudaSuccess, ErrorCode::kDevice, what, ": ", cudaGetErrorString(status));
}

cudaKernel_t axpy_cuda_function() {
  static cudaKernel_t kernel = [] {
    cudaLibrary_t library = nullptr;
    check_cuda(cudaLibraryLoadData(&library, kAxpyPtx, nullptr, nullptr, 0, nullptr, nullptr, 0), "cudaLibraryLoadData");
    cudaKernel_t k = nullptr;
    check_cuda(cudaLibraryGetKernel(&k, library, "axpy_f64"), "cudaLibraryGetKernel");
    return k;
  }();
  return kernel;
}

// The raw CUDA kernel: ints = {n, threads per block}, floats = {alpha}; inputs contiguous Float64.
void axpy_cuda(const std::vector<Tensor>& in, const std::vector<Tensor>& out, const std::vector<int64_t>& ints,
               const std::vector<double>& floats) {
  const void* x = in.at(0).const_data_ptr();
  const void* y = in.at(1).const_data_ptr();
  void* o = out.at(0).mutable_data_ptr();
  long long n = ints.at(0);
  double alpha = floats.at(0);
  void* args[] = {&x, &y, &o, &n, &alpha};
  const unsigned threads = static_cast<unsigned>(ints.at(1));
  const unsigned blocks = static_cast<unsigned>((n + threads - 1) / threads);
  check_cuda(cudaLaunchKernel(reinterpret_cast<const void*>(axpy_cuda_function()), dim3(blocks), dim3(threads), args,
                              0, nullptr),
             "cudaLaunchKernel");
  check_cuda(cudaDeviceSynchronize(), "axpy_f64");
}
#endif

TEST(WrapKernelCuda, ALaunchRunsTheDeviceKernel) {
  SKIP_WITHOUT_CUDA();
#ifdef OPCONFORM_WITH_CUDA
  WrappedKernel axpy = wrap_kernel("axpy_cuda", axpy_cuda, registry(), DeviceType::CUDA);
  EXPECT_EQ(axpy.device(), DeviceType::CUDA);
  Tensor x = iota({1000}).to(Device::cuda()), y = iota({1000}, -5).to(Device::cuda());
  Tensor out = empty({1000}, TensorOptions(DType::Float64, Device::cuda()));
  axpy({x, y}, {out}, {1000, 128}, {0.5});
  EXPECT_EQ(out.to(Device::cpu()).to_vector<double>(), expected_scaled_add(iota({1000}), iota({1000}, -5), 0.5));
  // A host tensor among the arguments is refused before the device kernel sees its address.
  try {
    axpy({x, iota({1000})}, {out}, {1000, 128}, {0.5});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("inputs[1] is on cpu, the kernel runs on cuda"), std::string::npos) << e.what();
  }
#endif
}

TEST(WrapKernelCuda, CaptureFunctionalizeAndReplayOnTheDevice) {
  SKIP_WITHOUT_CUDA();
#ifdef OPCONFORM_WITH_CUDA
  WrappedKernel axpy = wrap_kernel("axpy_cuda", axpy_cuda, registry(), DeviceType::CUDA);
  // The program writes its third input: out = x + 3 * y.
  auto prog = [&](const Stack& in) {
    const std::vector<SymInt> sizes = in[0].to_tensor().sym_sizes();
    axpy({in[0].to_tensor(), in[1].to_tensor()}, {in[2].to_tensor()}, {sizes.at(0), 64}, {3.0});
    return Stack{in[2]};
  };
  auto dev = [](Tensor t) { return t.to(Device::cuda()); };
  Graph g = capture(prog, {dev(iota({300})), dev(iota({300})), dev(iota({300}))}, {.registry = &registry()});
  ASSERT_EQ(count_nodes(g, "wrap_kernel::axpy_cuda"), 1u) << g.to_string();
  EXPECT_TRUE(g.value(g.inputs[2]).tensor->device.is_cuda());
  Graph f = functionalize(g, registry());
  EXPECT_FALSE(has_mutation(f, registry()));
  ASSERT_EQ(f.write_backs.size(), 1u);
  EXPECT_EQ(f.write_backs[0].input, 2u);

  // Replay at another size: the element count is evaluated again.
  Tensor x = iota({517}, 2), y = iota({517}, -9);
  Tensor out = dev(full_like(x, 0.0));
  const Stack r = run_graph(f, {dev(x), dev(y), out}, registry());
  const auto expected = expected_scaled_add(x, y, 3.0);
  EXPECT_EQ(r.at(0).to_tensor().to(Device::cpu()).to_vector<double>(), expected);
  EXPECT_EQ(out.to(Device::cpu()).to_vector<double>(), expected) << "the write-back reached the input";
#endif
}

}  // namespace
}  // namespace opconform::compile
