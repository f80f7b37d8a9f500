// Device: where a tensor's memory lives — cpu, cuda:N, meta (no memory: fake tensors), or a
// vendor device type registered at run time (the PrivateUse idea: a plugin names its device,
// "npu" say, and gets one of three vendor slots with their own dispatch keys).
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>

namespace opconform {

enum class DeviceType : uint8_t {
  CPU = 0,
  CUDA = 1,
  Meta = 2,
  PrivateUse1 = 3,  // vendor slots, named by register_device_type()
  PrivateUse2 = 4,
  PrivateUse3 = 5,
};
inline constexpr int kNumDeviceTypes = 6;

// Registers a vendor device type under `name` ("npu") and returns its slot; registering the
// same name again returns the same slot. Throws when the name is taken by a built-in type or
// when all three vendor slots are used.
DeviceType register_device_type(std::string_view name);
// Name of a device type: "cpu", "cuda", "meta", or the registered vendor name
// ("privateuse1" while unregistered).
std::string device_type_name(DeviceType type);
std::optional<DeviceType> parse_device_type(std::string_view name);

struct Device {
  DeviceType type = DeviceType::CPU;
  int16_t index = -1;  // -1: the current device of that type (cpu and meta have no index)

  constexpr Device() = default;
  constexpr Device(DeviceType t, int16_t i = -1) : type(t), index(i) {}

  static constexpr Device cpu() { return Device(DeviceType::CPU); }
  static constexpr Device cuda(int16_t index = 0) { return Device(DeviceType::CUDA, index); }
  static constexpr Device meta() { return Device(DeviceType::Meta); }

  // "cpu", "cuda", "cuda:1", "meta", "npu:0". Throws Error(kInvalidArgument) otherwise.
  static Device parse(std::string_view text);

  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  bool is_meta() const { return type == DeviceType::Meta; }
  std::string to_string() const;

  friend bool operator==(const Device&, const Device&) = default;
};

std::ostream& operator<<(std::ostream& out, const Device& d);

}  // namespace opconform
