// Schema parser (core/include/opconform/core/schema.h): any text either throws opconform::Error
// or parses to a schema whose printed form parses back to the same schema and prints the same
// (print(parse(s)) is canonical), and whose queries answer without throwing.
#include <cmath>
#include <string>
#include <string_view>

#include "fuzz_support.h"
#include "opconform/core/schema.h"

namespace {

using namespace opconform;

// A NaN default never equals itself (schema.h), so such schemas compare by their printed form.
bool has_nan_default(const FunctionSchema& s) {
  for (const Argument& a : s.arguments) {
    if (!a.default_value) continue;
    const auto& v = a.default_value->value;
    if (const double* d = std::get_if<double>(&v); d != nullptr && std::isnan(*d)) return true;
    if (const auto* l = std::get_if<std::vector<double>>(&v))
      for (double d : *l)
        if (std::isnan(d)) return true;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  FunctionSchema schema;
  try {
    schema = parse_schema(text);
  } catch (const Error&) {
    return 0;
  }
  const std::string printed = schema.to_string();
  FunctionSchema again;
  try {
    again = parse_schema(printed);
  } catch (const Error& e) {
    fuzz::fail("the printed form of '" + fuzz::printable(text) + "' does not parse: " + e.what());
  }
  FUZZ_CHECK(again.to_string() == printed, "printing is not stable: '", fuzz::printable(printed), "' prints as '",
             fuzz::printable(again.to_string()), "'");
  FUZZ_CHECK(again == schema || has_nan_default(schema), "'", fuzz::printable(text), "' and its printed form '",
             fuzz::printable(printed), "' parse to different schemas");

  // The queries the dispatcher and the checks ask of every schema.
  (void)schema.kind();
  (void)schema.mutable_arguments();
  (void)schema.output_aliases();
  (void)schema.num_kwarg_only();
  for (const Argument& a : schema.arguments) {
    FUZZ_CHECK(schema.argument_index(a.name).has_value(), "argument '", fuzz::printable(a.name), "' is not found by name");
    (void)a.type.to_string(a.alias_info ? &*a.alias_info : nullptr);
  }
  return 0;
}
