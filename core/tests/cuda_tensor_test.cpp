// Tensors on a CUDA device: allocation, host <-> device copies (contiguous and strided), fill_
// on device tensors and strided device views, element access, to(device). Skipped without a GPU.
#include <gtest/gtest.h>

#include <vector>

#include "opconform/core/cuda.h"
#include "opconform/core/tensor.h"

namespace opconform {
namespace {

using V = std::vector<int64_t>;
V vec(IntArrayRef r) { return V(r.begin(), r.end()); }

#define SKIP_WITHOUT_CUDA() \
  if (!opconform::cuda::is_available()) GTEST_SKIP() << opconform::cuda::unavailable_reason()

TEST(CudaTensor, AllocateOnTheDevice) {
  SKIP_WITHOUT_CUDA();
  Tensor t = empty({2, 3}, TensorOptions(DType::Float32, Device::cuda()));
  EXPECT_EQ(t.device(), Device::cuda(0));
  EXPECT_TRUE(t.key_set().has(DispatchKey::CUDA));
  EXPECT_TRUE(t.key_set().has(DispatchKey::AutogradCUDA));
  EXPECT_FALSE(t.is_meta_data());
  EXPECT_NE(t.const_data_ptr(), nullptr);
  EXPECT_EQ(t.storage()->device(), Device::cuda(0));
  EXPECT_EQ(empty({0}, Device::cuda()).numel(), 0);
  EXPECT_EQ(zeros({4}, TensorOptions(DType::Int64, Device::cuda())).to_vector<int64_t>(), (std::vector<int64_t>(4, 0)));
}

TEST(CudaTensor, HostDeviceHostRoundTripContiguous) {
  SKIP_WITHOUT_CUDA();
  Tensor host = arange(24, DType::Float64).view({2, 3, 4});
  Tensor dev = host.to(Device::cuda());
  EXPECT_TRUE(dev.device().is_cuda());
  EXPECT_FALSE(dev.is_alias_of(host));
  Tensor back = dev.to(Device::cpu());
  EXPECT_TRUE(back.device().is_cpu());
  EXPECT_TRUE(equal(back, host));
  EXPECT_TRUE(equal(dev, host));  // equal copies to the host itself
  EXPECT_TRUE(dev.to(Device::cuda(0)).is_same(dev));
  // With a dtype change on the way.
  Tensor half = host.to(DType::Float16, Device::cuda());
  EXPECT_EQ(half.dtype(), DType::Float16);
  EXPECT_EQ(half.to(DType::Float64, Device::cpu()).to_vector<double>(), host.to_vector<double>());
}

TEST(CudaTensor, HostDeviceHostRoundTripStrided) {
  SKIP_WITHOUT_CUDA();
  Tensor host = arange(30, DType::Int32).view({5, 6});
  Tensor view = host.transpose(0, 1).slice(0, 1, 6, 2);  // [3, 5], strides [2, 6], offset 1
  Tensor dev = view.to(Device::cuda());
  EXPECT_TRUE(equal(dev.to(Device::cpu()), view));
  // Into a strided view of a device tensor: the elements between stay as they were.
  Tensor dev_big = full(V{4, 6}, -1, TensorOptions(DType::Int32, Device::cuda()));
  Tensor dev_view = dev_big.slice(1, 0, 6, 2);  // [4, 3]
  dev_view.copy_(from_vector<int32_t>({1, 2, 3}, {3}));
  std::vector<int32_t> expected;
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 6; ++c) expected.push_back(c % 2 == 0 ? c / 2 + 1 : -1);
  EXPECT_EQ(dev_big.to_vector<int32_t>(), expected);
  // Device to a strided host view.
  Tensor host_dst = zeros({3, 4}, DType::Int32);
  host_dst.slice(1, 1, 4, 2).copy_(dev_big.narrow(0, 0, 3).narrow(1, 0, 2));
  EXPECT_EQ(host_dst.to_vector<int32_t>(), (std::vector<int32_t>{0, 1, 0, -1, 0, 1, 0, -1, 0, 1, 0, -1}));
  // Device to device, overlapping views of one storage.
  Tensor d = arange(6, TensorOptions(DType::Int64, Device::cuda()));
  d.slice(0, 1).copy_(d.slice(0, 0, 5));
  EXPECT_EQ(d.to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 1, 2, 3, 4}));
}

TEST(CudaTensor, FillOnDeviceTensorsAndStridedViews) {
  SKIP_WITHOUT_CUDA();
  Tensor t = empty({3, 4}, TensorOptions(DType::Float32, Device::cuda()));
  uint64_t version = t.version();
  t.fill_(2.5);
  EXPECT_GT(t.version(), version);
  EXPECT_EQ(t.to_vector<float>(), std::vector<float>(12, 2.5f));
  t.transpose(0, 1).select(0, 2).fill_(-1);  // column 2
  t.diagonal().fill_(7);
  std::vector<float> expected(12, 2.5f);
  for (int r = 0; r < 3; ++r) expected[r * 4 + 2] = -1;
  for (int r = 0; r < 3; ++r) expected[r * 4 + r] = 7;
  EXPECT_EQ(t.to_vector<float>(), expected);
  EXPECT_THROW(t.select(0, 0).unsqueeze(0).expand({2, 4}).fill_(0), Error);
}

TEST(CudaTensor, GetSetAndPrint) {
  SKIP_WITHOUT_CUDA();
  Tensor t = zeros({2, 2}, TensorOptions(DType::Int64, Device::cuda()));
  t.set({1, 0}, 42);
  t.set({0, -1}, -3);
  EXPECT_EQ(t.get({1, 0}).to_int(), 42);
  EXPECT_EQ(t.get({0, 1}).to_int(), -3);
  EXPECT_EQ(t.select(0, 1).select(0, 0).item().to_int(), 42);
  EXPECT_EQ(t.to_string(), "tensor([[0, -3], [42, 0]], device='cuda:0')");
  Tensor c = zeros({1}, TensorOptions(DType::Complex128, Device::cuda()));
  c.set({0}, complex128(1, -2));
  EXPECT_EQ(c.item().to<complex128>(), complex128(1, -2));
}

TEST(CudaTensor, ToDeviceAndBackKeepsLayout) {
  SKIP_WITHOUT_CUDA();
  Tensor host = arange(6, DType::Float32).view({2, 3}).transpose(0, 1);
  Tensor dev = host.to(Device::cuda());
  EXPECT_EQ(vec(dev.strides()), (V{1, 3}));  // dense: strides kept
  Tensor back = dev.to(Device::cpu());
  EXPECT_EQ(vec(back.strides()), (V{1, 3}));
  EXPECT_TRUE(equal(back, host));
  Tensor cl = dev.clone();
  EXPECT_TRUE(cl.device().is_cuda());
  EXPECT_FALSE(cl.is_alias_of(dev));
  EXPECT_TRUE(equal(cl, host));
  Tensor cont = dev.contiguous();
  EXPECT_TRUE(cont.is_contiguous());
  EXPECT_TRUE(cont.device().is_cuda());
  EXPECT_TRUE(equal(cont, host));
}

}  // namespace
}  // namespace opconform
