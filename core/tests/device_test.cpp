// Tests of Device (parse, print, vendor device registration) and of dispatch keys: names, key
// sets, alias keys and the thread-local include/exclude guards.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "opconform/core/device.h"
#include "opconform/core/device_semantics.h"
#include "opconform/core/dispatch_key.h"
#include "opconform/core/error.h"
#include "opconform/core/tensor.h"
#include "support/error_of.h"

namespace opconform {
namespace {

using testing::error_of;

// ---------------------------------------------------------------- Device

TEST(Device, ParseAndPrint) {
  EXPECT_EQ(Device::parse("cpu"), Device::cpu());
  EXPECT_EQ(Device::parse("cuda"), Device(DeviceType::CUDA, -1));
  EXPECT_EQ(Device::parse("cuda:0"), Device::cuda(0));
  EXPECT_EQ(Device::parse("cuda:1"), Device::cuda(1));
  EXPECT_EQ(Device::parse("cuda:12"), Device::cuda(12));
  EXPECT_EQ(Device::parse("meta"), Device::meta());
  EXPECT_EQ(Device::cpu().to_string(), "cpu");
  EXPECT_EQ(Device::meta().to_string(), "meta");
  EXPECT_EQ(Device::cuda(1).to_string(), "cuda:1");
  EXPECT_EQ(Device(DeviceType::CUDA).to_string(), "cuda");
  std::ostringstream out;
  out << Device::cuda(3);
  EXPECT_EQ(out.str(), "cuda:3");
  for (const char* text : {"cpu", "cuda", "cuda:0", "cuda:7", "meta"}) {
    EXPECT_EQ(Device::parse(text).to_string(), text);
  }
  EXPECT_TRUE(Device::cpu().is_cpu());
  EXPECT_TRUE(Device::cuda().is_cuda());
  EXPECT_TRUE(Device::meta().is_meta());
  EXPECT_FALSE(Device::cuda().is_cpu());
  EXPECT_NE(Device::cuda(0), Device::cuda(1));
}

TEST(Device, ParseErrors) {
  for (const char* bad : {"cpu:0", "meta:0", "cuda:x", "cuda:", "cuda:-1", "cuda:1x", "cuda:99999", "gpu", "",
                          ":0", "CPU", "cuda:0:1", " cpu"}) {
    Error e = error_of([&] { Device::parse(bad); });
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << bad;
    EXPECT_NE(std::string(e.what()).find(std::string("'")), std::string::npos) << bad;
  }
  EXPECT_NE(std::string(error_of([] { Device::parse("gpu"); }).what()).find("gpu"), std::string::npos);
  EXPECT_NE(std::string(error_of([] { Device::parse("cpu:0"); }).what()).find("no index"), std::string::npos);
  EXPECT_NE(std::string(error_of([] { Device::parse("cuda:x"); }).what()).find("index"), std::string::npos);
}

TEST(Device, DeviceTypeNames) {
  EXPECT_EQ(device_type_name(DeviceType::CPU), "cpu");
  EXPECT_EQ(device_type_name(DeviceType::CUDA), "cuda");
  EXPECT_EQ(device_type_name(DeviceType::Meta), "meta");
  EXPECT_EQ(parse_device_type("cuda"), DeviceType::CUDA);
  EXPECT_EQ(parse_device_type("tpu"), std::nullopt);
}

// Vendor slots are process-wide: one test walks the whole story in order.
TEST(Device, VendorRegistration) {
  EXPECT_EQ(device_type_name(DeviceType::PrivateUse1), "privateuse1");
  EXPECT_EQ(device_type_name(DeviceType::PrivateUse3), "privateuse3");
  EXPECT_EQ(error_of([] { Device::parse("npu:0"); }).code(), ErrorCode::kInvalidArgument);

  EXPECT_EQ(register_device_type("npu"), DeviceType::PrivateUse1);
  EXPECT_EQ(register_device_type("npu"), DeviceType::PrivateUse1);  // same name, same slot
  EXPECT_EQ(device_type_name(DeviceType::PrivateUse1), "npu");
  EXPECT_EQ(Device::parse("npu:0"), Device(DeviceType::PrivateUse1, 0));
  EXPECT_EQ(Device::parse("npu"), Device(DeviceType::PrivateUse1));
  EXPECT_EQ(Device(DeviceType::PrivateUse1, 2).to_string(), "npu:2");
  EXPECT_EQ(parse_device_type("npu"), DeviceType::PrivateUse1);
  EXPECT_EQ(parse_device_type("privateuse1"), std::nullopt);  // the slot has its name now

  // Built-in names and malformed names are rejected, and take no slot.
  for (const char* bad : {"cpu", "cuda", "meta", "", "npu:0"}) {
    EXPECT_EQ(error_of([&] { register_device_type(bad); }).code(), ErrorCode::kInvalidArgument) << bad;
  }
  EXPECT_EQ(register_device_type("xpu"), DeviceType::PrivateUse2);
  EXPECT_EQ(register_device_type("hpu"), DeviceType::PrivateUse3);
  EXPECT_EQ(register_device_type("xpu"), DeviceType::PrivateUse2);
  Error full = error_of([] { register_device_type("ipu"); });
  EXPECT_EQ(full.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(std::string(full.what()).find("ipu"), std::string::npos);
  // A failed registration changes nothing.
  EXPECT_EQ(parse_device_type("ipu"), std::nullopt);
  EXPECT_EQ(register_device_type("npu"), DeviceType::PrivateUse1);
  EXPECT_EQ(Device::parse("hpu:1").to_string(), "hpu:1");
}

// ---------------------------------------------------------------- dispatch keys

TEST(SemanticDevice, TheInnermostGuardElseTheTensorsOwnPerThread) {
  const Tensor t = zeros({2}, TensorOptions(DType::Float32));
  EXPECT_EQ(semantic_device(t), Device::cpu());
  {
    SemanticDeviceGuard outer(Device::cuda());
    EXPECT_EQ(semantic_device(t), Device::cuda());
    {
      SemanticDeviceGuard inner(Device(DeviceType::Meta));
      EXPECT_EQ(semantic_device(t), Device(DeviceType::Meta));
    }
    EXPECT_EQ(semantic_device(t), Device::cuda());
    Device other_thread = Device::cuda();
    std::thread([&] { other_thread = semantic_device(t); }).join();
    EXPECT_EQ(other_thread, Device::cpu());  // a guard is this thread's only
  }
  EXPECT_EQ(semantic_device(t), Device::cpu());
}

TEST(DispatchKey, NamesRoundTrip) {
  EXPECT_EQ(to_string(DispatchKey::CPU), "CPU");
  EXPECT_EQ(to_string(DispatchKey::AutogradCUDA), "AutogradCUDA");
  EXPECT_EQ(to_string(DispatchKey::Fake), "Fake");
  EXPECT_EQ(to_string(DispatchKey::DispatchMode), "DispatchMode");
  EXPECT_EQ(to_string(DispatchKey::CompositeImplicitAutograd), "CompositeImplicitAutograd");
  EXPECT_EQ(to_string(DispatchKey::Undefined), "Undefined");
  std::set<std::string_view> seen;
  for (int i = 0; i < static_cast<int>(DispatchKey::EndOfAliasKeys); ++i) {
    auto k = static_cast<DispatchKey>(i);
    std::string_view n = to_string(k);
    EXPECT_NE(n, "Invalid") << i;
    EXPECT_TRUE(seen.insert(n).second) << "duplicate name " << n;
    EXPECT_EQ(parse_dispatch_key(n), k) << n;
  }
  EXPECT_EQ(parse_dispatch_key("cpu"), DispatchKey::CPU);
  EXPECT_EQ(parse_dispatch_key("cuda"), DispatchKey::CUDA);
  EXPECT_EQ(parse_dispatch_key("CompositeImplicit"), DispatchKey::CompositeImplicitAutograd);
  EXPECT_EQ(parse_dispatch_key("CompositeExplicit"), DispatchKey::CompositeExplicitAutograd);
  EXPECT_EQ(parse_dispatch_key("Autocast"), std::nullopt);
  EXPECT_EQ(parse_dispatch_key(""), std::nullopt);
}

TEST(DispatchKey, Classification) {
  EXPECT_TRUE(is_backend_key(DispatchKey::CPU));
  EXPECT_TRUE(is_backend_key(DispatchKey::PrivateUse3));
  EXPECT_FALSE(is_backend_key(DispatchKey::Fake));
  EXPECT_TRUE(is_autograd_key(DispatchKey::AutogradOther));
  EXPECT_TRUE(is_autograd_key(DispatchKey::AutogradPrivateUse3));
  EXPECT_FALSE(is_autograd_key(DispatchKey::Autograd));
  EXPECT_TRUE(is_alias_key(DispatchKey::Autograd));
  EXPECT_TRUE(is_alias_key(DispatchKey::CompositeExplicitAutograd));
  EXPECT_FALSE(is_alias_key(DispatchKey::DispatchMode));
  for (int t = 0; t < kNumDeviceTypes; ++t) {
    auto type = static_cast<DeviceType>(t);
    DispatchKey b = backend_key(type);
    EXPECT_TRUE(is_backend_key(b));
    EXPECT_TRUE(is_autograd_key(autograd_key(type)));
    EXPECT_EQ(device_type_of(b), type);
  }
  EXPECT_EQ(backend_key(DeviceType::CUDA), DispatchKey::CUDA);
  EXPECT_EQ(autograd_key(DeviceType::Meta), DispatchKey::AutogradMeta);
  EXPECT_EQ(autograd_key(DeviceType::PrivateUse2), DispatchKey::AutogradPrivateUse2);
  EXPECT_EQ(device_type_of(DispatchKey::AutogradCPU), std::nullopt);
  EXPECT_EQ(device_type_of(DispatchKey::Undefined), std::nullopt);
  // Priorities, from high to low (ARCHITECTURE.md).
  EXPECT_GT(DispatchKey::DispatchMode, DispatchKey::Functionalize);
  EXPECT_GT(DispatchKey::AutocastCPU, DispatchKey::Batched);
  EXPECT_GT(DispatchKey::Batched, DispatchKey::AutogradCPU);
  EXPECT_GT(DispatchKey::AutogradOther, DispatchKey::BackendSelect);
  EXPECT_GT(DispatchKey::BackendSelect, DispatchKey::Fake);
  EXPECT_GT(DispatchKey::Fake, DispatchKey::CPU);
}

TEST(DispatchKeySet, Basics) {
  DispatchKeySet empty;
  EXPECT_TRUE(empty.empty());
  EXPECT_EQ(empty.highest(), DispatchKey::Undefined);
  EXPECT_TRUE(empty.keys().empty());
  EXPECT_EQ(empty.to_string(), "DispatchKeySet()");
  EXPECT_TRUE(DispatchKeySet(DispatchKey::Undefined).empty());

  DispatchKeySet s{DispatchKey::CPU, DispatchKey::AutogradCPU};
  EXPECT_EQ(s.highest(), DispatchKey::AutogradCPU);
  EXPECT_TRUE(s.has(DispatchKey::CPU));
  EXPECT_FALSE(s.has(DispatchKey::CUDA));
  EXPECT_FALSE(s.has(DispatchKey::Undefined));
  EXPECT_EQ(s.to_string(), "DispatchKeySet(AutogradCPU, CPU)");

  DispatchKeySet t = s.add(DispatchKey::DispatchMode);
  EXPECT_EQ(t.highest(), DispatchKey::DispatchMode);
  EXPECT_EQ(s.highest(), DispatchKey::AutogradCPU);  // add returns a new set
  EXPECT_EQ(t.remove(DispatchKey::DispatchMode), s);
  EXPECT_EQ(t.remove(DispatchKey::CUDA), t);
  EXPECT_EQ(s.remove(DispatchKey::AutogradCPU).remove(DispatchKey::CPU), DispatchKeySet());
  EXPECT_EQ((s | DispatchKeySet(DispatchKey::Fake)).keys(),
            (std::vector<DispatchKey>{DispatchKey::AutogradCPU, DispatchKey::Fake, DispatchKey::CPU}));
  EXPECT_EQ(s & DispatchKeySet(DispatchKey::CPU), DispatchKeySet(DispatchKey::CPU));
  EXPECT_EQ(s - DispatchKeySet(DispatchKey::CPU), DispatchKeySet(DispatchKey::AutogradCPU));
  DispatchKeySet u = s;
  u |= DispatchKeySet(DispatchKey::Batched);
  EXPECT_EQ(u.highest(), DispatchKey::Batched);
  EXPECT_EQ(DispatchKeySet::from_bits(s.bits()), s);
}

TEST(DispatchKeySet, BelowAndAll) {
  DispatchKeySet below = DispatchKeySet::below(DispatchKey::AutogradCPU);
  EXPECT_TRUE(below.has(DispatchKey::CPU));
  EXPECT_TRUE(below.has(DispatchKey::Fake));
  EXPECT_TRUE(below.has(DispatchKey::AutogradOther));
  EXPECT_FALSE(below.has(DispatchKey::AutogradCPU));
  EXPECT_FALSE(below.has(DispatchKey::AutogradCUDA));
  EXPECT_EQ(below.highest(), DispatchKey::AutogradOther);
  EXPECT_EQ((DispatchKeySet{DispatchKey::AutogradCPU, DispatchKey::CPU} & below), DispatchKeySet(DispatchKey::CPU));
  // Nothing is below the lowest backend key; below() holds runtime keys only.
  EXPECT_TRUE(DispatchKeySet::below(DispatchKey::CPU).empty());
  EXPECT_EQ(DispatchKeySet::below(DispatchKey::CPU).to_string(), "DispatchKeySet()");
  EXPECT_EQ(DispatchKeySet::below(DispatchKey::CUDA).keys(), std::vector<DispatchKey>{DispatchKey::CPU});
  EXPECT_TRUE(DispatchKeySet::below(DispatchKey::Undefined).empty());
  // all(): every runtime key, once each, high to low.
  std::vector<DispatchKey> all = DispatchKeySet::all().keys();
  ASSERT_EQ(all.size(), static_cast<size_t>(kNumRuntimeKeys - 1));
  EXPECT_EQ(all.front(), DispatchKey::DispatchMode);
  EXPECT_EQ(all.back(), DispatchKey::CPU);
  EXPECT_EQ(DispatchKeySet::all().highest(), DispatchKey::DispatchMode);
}

rc::Gen<DispatchKey> gen_runtime_key() {
  return rc::gen::map(rc::gen::inRange(1, kNumRuntimeKeys), [](int i) { return static_cast<DispatchKey>(i); });
}

RC_GTEST_PROP(DispatchKeySetProperty, KeysAreSortedHighToLowAndRoundTrip, ()) {
  auto keys = *rc::gen::container<std::vector<DispatchKey>>(gen_runtime_key());
  DispatchKeySet s;
  for (auto k : keys) s = s.add(k);
  std::vector<DispatchKey> listed = s.keys();
  std::set<DispatchKey> distinct(keys.begin(), keys.end());
  RC_ASSERT(listed.size() == distinct.size());
  for (size_t i = 1; i < listed.size(); ++i) RC_ASSERT(listed[i - 1] > listed[i]);
  for (auto k : listed) RC_ASSERT(distinct.count(k) == 1u);
  RC_ASSERT(s.highest() == (distinct.empty() ? DispatchKey::Undefined : *distinct.rbegin()));
  DispatchKeySet rebuilt;
  for (auto k : listed) rebuilt |= DispatchKeySet(k);
  RC_ASSERT(rebuilt == s);
  // below(k) & s: exactly the keys of s lower than k.
  DispatchKey k = *gen_runtime_key();
  for (auto key : (s & DispatchKeySet::below(k)).keys()) RC_ASSERT(key < k);
  for (auto key : listed) RC_ASSERT((s & DispatchKeySet::below(k)).has(key) == (key < k));
}

TEST(DispatchKeySet, RuntimeKeysOfAliases) {
  using K = DispatchKey;
  DispatchKeySet autograd{K::AutogradOther, K::AutogradCPU, K::AutogradCUDA, K::AutogradMeta,
                          K::AutogradPrivateUse1, K::AutogradPrivateUse2, K::AutogradPrivateUse3};
  DispatchKeySet backends{K::CPU, K::CUDA, K::Meta, K::PrivateUse1, K::PrivateUse2, K::PrivateUse3};
  EXPECT_EQ(runtime_keys_of(K::Autograd), autograd);
  EXPECT_EQ(runtime_keys_of(K::CompositeExplicitAutograd), backends);
  EXPECT_EQ(runtime_keys_of(K::CompositeImplicitAutograd), autograd | backends);
  EXPECT_FALSE(runtime_keys_of(K::CompositeImplicitAutograd).has(K::Fake));
  EXPECT_FALSE(runtime_keys_of(K::CompositeImplicitAutograd).has(K::BackendSelect));
  for (int i = 1; i < kNumRuntimeKeys; ++i) {
    auto k = static_cast<K>(i);
    EXPECT_EQ(runtime_keys_of(k), DispatchKeySet(k)) << to_string(k);
  }
  EXPECT_TRUE(runtime_keys_of(K::Undefined).empty());
}

// ---------------------------------------------------------------- guards

TEST(DispatchKeyGuards, IncludeAndExcludeRestoreOnScopeExit) {
  const LocalDispatchKeySet before = local_dispatch_key_set();
  {
    IncludeDispatchKeyGuard include{DispatchKeySet(DispatchKey::AutocastCPU)};
    EXPECT_TRUE(local_dispatch_key_set().included.has(DispatchKey::AutocastCPU));
    {
      ExcludeDispatchKeyGuard exclude(DispatchKeySet{DispatchKey::AutogradCPU, DispatchKey::AutogradCUDA});
      EXPECT_TRUE(local_dispatch_key_set().excluded.has(DispatchKey::AutogradCPU));
      EXPECT_TRUE(local_dispatch_key_set().included.has(DispatchKey::AutocastCPU));
      {
        // Including a key already included: leaving this scope must not drop it.
        IncludeDispatchKeyGuard again(DispatchKeySet{DispatchKey::AutocastCPU, DispatchKey::Tracer});
        EXPECT_TRUE(local_dispatch_key_set().included.has(DispatchKey::Tracer));
      }
      EXPECT_TRUE(local_dispatch_key_set().included.has(DispatchKey::AutocastCPU));
      EXPECT_FALSE(local_dispatch_key_set().included.has(DispatchKey::Tracer));
      {
        ExcludeDispatchKeyGuard again{DispatchKeySet(DispatchKey::AutogradCPU)};
      }
      EXPECT_TRUE(local_dispatch_key_set().excluded.has(DispatchKey::AutogradCPU));
    }
    EXPECT_EQ(local_dispatch_key_set().excluded, before.excluded);
  }
  EXPECT_EQ(local_dispatch_key_set().included, before.included);
  EXPECT_EQ(local_dispatch_key_set().excluded, before.excluded);
}

TEST(DispatchKeyGuards, RestoreWhenAnExceptionPasses) {
  const LocalDispatchKeySet before = local_dispatch_key_set();
  EXPECT_THROW(
      {
        IncludeDispatchKeyGuard include{DispatchKeySet(DispatchKey::Functionalize)};
        ExcludeDispatchKeyGuard exclude{DispatchKeySet(DispatchKey::AutogradCPU)};
        ASSERT_TRUE(local_dispatch_key_set().included.has(DispatchKey::Functionalize));
        throw std::runtime_error("boom");
      },
      std::runtime_error);
  EXPECT_EQ(local_dispatch_key_set().included, before.included);
  EXPECT_EQ(local_dispatch_key_set().excluded, before.excluded);
}

TEST(DispatchKeyGuards, AreThreadLocal) {
  IncludeDispatchKeyGuard include{DispatchKeySet(DispatchKey::Batched)};
  bool seen_in_other_thread = true;
  std::thread([&] { seen_in_other_thread = local_dispatch_key_set().included.has(DispatchKey::Batched); }).join();
  EXPECT_FALSE(seen_in_other_thread);
  EXPECT_TRUE(local_dispatch_key_set().included.has(DispatchKey::Batched));
}

}  // namespace
}  // namespace opconform
