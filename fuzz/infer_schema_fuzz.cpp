// The paths that turn strings into schema pieces other than parse_schema:
//   0  infer_schema (core/include/opconform/core/infer_schema.h) over fixed C++ signatures with
//      fuzzed argument names ("*" among them), mutates_args, operator name and tags: it throws
//      opconform::Error or gives a schema whose printed form parses back to the same schema;
//   1  parse_type: what parses prints back to text that parses to the same type;
//   2  parse_argument: the same for one argument;
//   3  the name parsers (dtype, device type, Device, layout, memory format, tag, dispatch key):
//      a name that parses prints back to a name that parses to the same value.
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "fuzz_support.h"
#include "opconform/core/device.h"
#include "opconform/core/dispatch_key.h"
#include "opconform/core/dtype.h"
#include "opconform/core/infer_schema.h"
#include "opconform/core/layout.h"
#include "opconform/core/schema.h"
#include "opconform/core/tag.h"

namespace {

using namespace opconform;

// Names from a small vocabulary (so that valid combinations are common) or any short string.
std::string some_name(FuzzedDataProvider& in) {
  static constexpr const char* kNames[] = {"*", "x", "y", "out", "self", "other", "alpha", "a_1", "_", "*"};
  return in.ConsumeBool() ? std::string(in.PickValueInArray(kNames)) : in.ConsumeRandomLengthString(12);
}

std::string some_op_name(FuzzedDataProvider& in) {
  static constexpr const char* kOpNames[] = {"", "f", "mylib::f", "mylib::f.out", "f.Tensor", "mylib::", "::f", "a::b::c"};
  return in.ConsumeBool() ? std::string(in.PickValueInArray(kOpNames)) : in.ConsumeRandomLengthString(24);
}

void check_schema_round_trip(const FunctionSchema& schema, const std::string& what) {
  const std::string printed = schema.to_string();
  FunctionSchema again;
  try {
    again = parse_schema(printed);
  } catch (const Error& e) {
    fuzz::fail(what + " gave a schema whose printed form does not parse: '" + fuzz::printable(printed) + "': " + e.what());
  }
  FUZZ_CHECK(again == schema, what, " gave a schema that differs from its parsed printed form '", fuzz::printable(printed), "'");
}

template <typename F>
void infer(FuzzedDataProvider& in) {
  std::vector<std::string> names;
  const int n = in.ConsumeIntegralInRange<int>(0, 8);
  for (int i = 0; i < n; ++i) names.push_back(some_name(in));
  MutatesArgs mutates;
  if (in.ConsumeIntegralInRange<uint8_t>(0, 7) == 0) {
    mutates = MutatesArgs::all_unknown();
  } else {
    const int m = in.ConsumeIntegralInRange<int>(0, 3);
    for (int i = 0; i < m; ++i) mutates.names.push_back(some_name(in));
  }
  const std::string op_name = some_op_name(in);
  std::vector<Tag> tags;
  for (Tag t : {Tag::inplace, Tag::out, Tag::core, Tag::pointwise})
    if (in.ConsumeIntegralInRange<uint8_t>(0, 3) == 0) tags.push_back(t);
  FunctionSchema schema;
  try {
    schema = infer_schema<F>(names, mutates, op_name, tags);
  } catch (const Error&) {
    return;
  }
  // Without a name the schema prints as "(Tensor x) -> Tensor" (infer_schema.h), which is no
  // schema the parser takes: name it for the round trip.
  if (schema.name.empty()) schema.name = "unnamed";
  check_schema_round_trip(schema, "infer_schema with name '" + fuzz::printable(op_name) + "'");
}

// The signatures inferred from: every supported kind of parameter and return, a with_keyset
// kernel, tensors to mutate, and one unsupported type.
using Unary = Tensor(const Tensor&, double);
using OutForm = Tensor(const Tensor&, const Tensor&, const Tensor&);
using Mutating = void(const Tensor&, int64_t, bool);
using Pair = std::tuple<Tensor, Tensor>(const Tensor&, std::optional<Tensor>, std::vector<int64_t>);
using Kinds = Tensor(const Tensor&, std::string, Scalar, DType, Device, Layout, MemoryFormat);
using Lists = std::vector<Tensor>(std::vector<Tensor>, SymInt, std::optional<double>, complex128);
using WithKeyset = int64_t(DispatchKeySet, const Tensor&);
using Unsupported = Tensor(const Tensor&, const float*);

void infer_one(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange<int>(0, 7)) {
    case 0: infer<Unary>(in); break;
    case 1: infer<OutForm>(in); break;
    case 2: infer<Mutating>(in); break;
    case 3: infer<Pair>(in); break;
    case 4: infer<Kinds>(in); break;
    case 5: infer<Lists>(in); break;
    case 6: infer<WithKeyset>(in); break;
    default: infer<Unsupported>(in); break;
  }
}

void type_round_trip(std::string_view text) {
  Type type;
  try {
    type = parse_type(text);
  } catch (const Error&) {
    return;
  }
  const std::string printed = type.to_string();
  try {
    FUZZ_CHECK(parse_type(printed) == type, "type '", fuzz::printable(text), "' prints as '", printed,
               "', which parses to another type");
  } catch (const Error& e) {
    fuzz::fail("type '" + fuzz::printable(text) + "' prints as '" + printed + "', which does not parse: " + e.what());
  }
}

void argument_round_trip(std::string_view text) {
  Argument argument;
  try {
    argument = parse_argument(text);
  } catch (const Error&) {
    return;
  }
  const std::string printed = argument.to_string();
  Argument again;
  try {
    again = parse_argument(printed);
  } catch (const Error& e) {
    fuzz::fail("argument '" + fuzz::printable(text) + "' prints as '" + fuzz::printable(printed) +
               "', which does not parse: " + e.what());
  }
  FUZZ_CHECK(again.to_string() == printed, "argument '", fuzz::printable(printed), "' does not print stably");
  const auto* d = argument.default_value ? std::get_if<double>(&argument.default_value->value) : nullptr;
  FUZZ_CHECK(again == argument || (d != nullptr && *d != *d), "argument '", fuzz::printable(text), "' and its printed form '",
             fuzz::printable(printed), "' parse differently");
}

// parse(name) -> value -> print -> parse gives the value again.
template <typename Parse, typename Print>
void name_round_trip(std::string_view text, Parse parse, Print print, const char* what) {
  const auto value = parse(text);
  if (!value) return;
  const std::string printed(print(*value));
  const auto again = parse(printed);
  FUZZ_CHECK(again && *again == *value, what, " '", fuzz::printable(text), "' prints as '", fuzz::printable(printed),
             "', which does not parse back to it");
}

void names(std::string_view text) {
  name_round_trip(text, parse_dtype, [](DType d) { return name(d); }, "dtype");
  name_round_trip(text, parse_device_type, device_type_name, "device type");
  name_round_trip(text, parse_layout, [](Layout l) { return to_string(l); }, "layout");
  name_round_trip(text, parse_memory_format, [](MemoryFormat m) { return to_string(m); }, "memory format");
  name_round_trip(text, parse_tag, [](Tag t) { return to_string(t); }, "tag");
  name_round_trip(text, parse_dispatch_key, [](DispatchKey k) { return to_string(k); }, "dispatch key");
  auto parse_device = [](std::string_view s) -> std::optional<Device> {
    try {
      return Device::parse(s);
    } catch (const Error&) {
      return std::nullopt;
    }
  };
  name_round_trip(text, parse_device, [](Device d) { return d.to_string(); }, "device");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  FuzzedDataProvider in(data + 1, size - 1);
  switch (data[0] % 4) {
    case 0: infer_one(in); break;
    case 1: type_round_trip(text); break;
    case 2: argument_round_trip(text); break;
    default: names(text); break;
  }
  return 0;
}
