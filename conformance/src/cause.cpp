// Finding kinds' names and cause keys (cause.h).
#include "opconform/conformance/cause.h"

#include <array>
#include <utility>

namespace opconform::conformance {
namespace {

constexpr std::array<std::pair<FindingKind, std::string_view>, 25> kNames{{
    {FindingKind::other, "other"},
    {FindingKind::value_mismatch, "value_mismatch"},
    {FindingKind::shape_mismatch, "shape_mismatch"},
    {FindingKind::stride_mismatch, "stride_mismatch"},
    {FindingKind::dtype_mismatch, "dtype_mismatch"},
    {FindingKind::storage_offset_mismatch, "storage_offset_mismatch"},
    {FindingKind::aliasing_mismatch, "aliasing_mismatch"},
    {FindingKind::device_mismatch, "device_mismatch"},
    {FindingKind::return_mismatch, "return_mismatch"},
    {FindingKind::threw, "threw"},
    {FindingKind::accepted_invalid, "accepted_invalid"},
    {FindingKind::undeclared_mutation, "undeclared_mutation"},
    {FindingKind::wrong_gradient, "wrong_gradient"},
    {FindingKind::out_of_bounds, "out_of_bounds"},
    {FindingKind::race, "race"},
    {FindingKind::rounding_bias, "rounding_bias"},
    {FindingKind::nondeterminism, "nondeterminism"},
    {FindingKind::schema_violation, "schema_violation"},
    {FindingKind::missing_registration, "missing_registration"},
    {FindingKind::crash, "crash"},
    {FindingKind::hang, "hang"},
    {FindingKind::load, "load"},
    {FindingKind::not_implemented, "not_implemented"},
    {FindingKind::not_applicable, "not_applicable"},
    {FindingKind::inconclusive, "inconclusive"},
}};

}  // namespace

std::string_view to_string(FindingKind kind) {
  for (const auto& [k, name] : kNames)
    if (k == kind) return name;
  return "other";
}

std::optional<FindingKind> parse_finding_kind(std::string_view name) {
  for (const auto& [k, n] : kNames)
    if (n == name) return k;
  return std::nullopt;
}

std::vector<FindingKind> all_finding_kinds() {
  std::vector<FindingKind> kinds;
  for (const auto& [k, name] : kNames) kinds.push_back(k);
  return kinds;
}

std::string cause_key(std::string_view op, std::string_view check, const Cause& cause) {
  std::string key = cause.library_wide ? std::string("*") : std::string(op);
  key += '/';
  key += check;
  key += '/';
  key += to_string(cause.kind);
  key += '/';
  for (char c : cause.subject) key += (c == ' ' || c == '\'' || c == '"' || c == '/') ? '_' : c;
  return key;
}

}  // namespace opconform::conformance
