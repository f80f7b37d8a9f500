#include "opconform/core/device.h"

#include <array>
#include <charconv>
#include <mutex>

#include "opconform/core/error.h"

namespace opconform {
namespace {

struct VendorNames {
  std::mutex mutex;
  std::array<std::string, 3> names;  // empty: slot free
};

VendorNames& vendor_names() {
  static VendorNames names;
  return names;
}

}  // namespace

DeviceType register_device_type(std::string_view name) {
  OPCONFORM_CHECK(!name.empty() && name.find(':') == std::string_view::npos,
                  ErrorCode::kInvalidArgument, "register_device_type: invalid device name '", name, "'");
  OPCONFORM_CHECK(name != "cpu" && name != "cuda" && name != "meta", ErrorCode::kInvalidArgument,
                  "register_device_type: '", name, "' is a built-in device type");
  auto& v = vendor_names();
  std::lock_guard lock(v.mutex);
  for (size_t i = 0; i < v.names.size(); ++i) {
    if (v.names[i] == name) return static_cast<DeviceType>(3 + i);
  }
  for (size_t i = 0; i < v.names.size(); ++i) {
    if (v.names[i].empty()) {
      v.names[i] = std::string(name);
      return static_cast<DeviceType>(3 + i);
    }
  }
  throw Error(ErrorCode::kInvalidArgument,
              detail::concat("register_device_type: cannot register '", name,
                             "': all three vendor device slots are taken (", v.names[0], ", ",
                             v.names[1], ", ", v.names[2], ")"));
}

std::string device_type_name(DeviceType type) {
  switch (type) {
    case DeviceType::CPU: return "cpu";
    case DeviceType::CUDA: return "cuda";
    case DeviceType::Meta: return "meta";
    default: break;
  }
  int slot = static_cast<int>(type) - 3;
  if (slot < 0 || slot > 2) return "invalid";
  auto& v = vendor_names();
  std::lock_guard lock(v.mutex);
  if (!v.names[slot].empty()) return v.names[slot];
  return "privateuse" + std::to_string(slot + 1);
}

std::optional<DeviceType> parse_device_type(std::string_view name) {
  for (int i = 0; i < kNumDeviceTypes; ++i) {
    auto type = static_cast<DeviceType>(i);
    if (device_type_name(type) == name) return type;
  }
  return std::nullopt;
}

Device Device::parse(std::string_view text) {
  auto colon = text.find(':');
  std::string_view type_name = text.substr(0, colon);
  auto type = parse_device_type(type_name);
  OPCONFORM_CHECK(type.has_value(), ErrorCode::kInvalidArgument, "unknown device type '", type_name,
                  "' in device string '", text, "' (expected cpu, cuda, meta or a registered vendor type)");
  if (colon == std::string_view::npos) return Device(*type);
  std::string_view index_text = text.substr(colon + 1);
  int index = -1;
  auto [end, ec] = std::from_chars(index_text.data(), index_text.data() + index_text.size(), index);
  OPCONFORM_CHECK(ec == std::errc() && end == index_text.data() + index_text.size() && index >= 0 &&
                      index < 32768,
                  ErrorCode::kInvalidArgument, "invalid device index '", index_text, "' in device string '",
                  text, "'");
  OPCONFORM_CHECK(*type != DeviceType::CPU && *type != DeviceType::Meta, ErrorCode::kInvalidArgument,
                  "device '", text, "': ", type_name, " takes no index");
  return Device(*type, static_cast<int16_t>(index));
}

std::string Device::to_string() const {
  std::string s = device_type_name(type);
  if (index >= 0) s += ":" + std::to_string(index);
  return s;
}

std::ostream& operator<<(std::ostream& out, const Device& d) { return out << d.to_string(); }

}  // namespace opconform
