#include "opconform/core/library.h"

namespace opconform {
namespace {

std::string_view kind_name(LibraryKind k) {
  switch (k) {
    case LibraryKind::DEF: return "DEF";
    case LibraryKind::IMPL: return "IMPL";
    case LibraryKind::FRAGMENT: return "FRAGMENT";
  }
  return "?";
}

bool valid_identifier(std::string_view s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

}  // namespace

Library::Library(std::string ns, LibraryKind kind, std::optional<DispatchKey> dispatch_key, Registry& registry,
                 SourceLocation loc)
    : ns_(std::move(ns)), kind_(kind), dispatch_key_(dispatch_key), registry_(&registry),
      source_(RegistrationSource::here(loc)) {
  OPCONFORM_CHECK(ns_ == "_" ? kind_ == LibraryKind::IMPL : valid_identifier(ns_), ErrorCode::kRegistration,
                  "Library: invalid namespace '", ns_, "' for a ", kind_name(kind_),
                  " library (the global namespace '_' only takes IMPL libraries)");
  if (kind_ == LibraryKind::DEF) registrations_.push_back(registry_->claim_namespace(ns_, source_));
}

Library::~Library() { reset(); }
Library::Library(Library&&) noexcept = default;
Library& Library::operator=(Library&& o) noexcept {
  if (this != &o) {
    reset();
    ns_ = std::move(o.ns_);
    kind_ = o.kind_;
    dispatch_key_ = o.dispatch_key_;
    registry_ = o.registry_;
    source_ = std::move(o.source_);
    registrations_ = std::move(o.registrations_);
  }
  return *this;
}

void Library::reset() {
  // Newest first, so overrides unwind in order.
  while (!registrations_.empty()) {
    registrations_.back().reset();
    registrations_.pop_back();
  }
}

std::string Library::qualify(std::string_view op_name) const {
  if (auto sep = op_name.find("::"); sep != std::string_view::npos) {
    OPCONFORM_CHECK(op_name.substr(0, sep) == ns_ || ns_ == "_", ErrorCode::kRegistration, "operator '", op_name,
                    "' is not in this library's namespace '", ns_, "'");
    return std::string(op_name);
  }
  OPCONFORM_CHECK(ns_ != "_", ErrorCode::kRegistration, "the global '_' library needs qualified operator names, got '",
                  op_name, "'");
  return ns_ + "::" + std::string(op_name);
}

std::string Library::define(std::string_view schema_text, std::vector<Tag> tags, std::string alias_analysis,
                            SourceLocation loc) {
  OPCONFORM_CHECK(kind_ != LibraryKind::IMPL, ErrorCode::kRegistration, "define('", schema_text,
                  "') in an IMPL library of namespace '", ns_, "': use a DEF or FRAGMENT library to define operators");
  FunctionSchema schema = parse_schema(schema_text);
  if (schema.ns.empty()) {
    schema.ns = ns_;
  } else {
    OPCONFORM_CHECK(schema.ns == ns_, ErrorCode::kRegistration, "define('", schema_text,
                    "'): the schema's namespace '", schema.ns, "' is not the library's namespace '", ns_, "'");
  }
  std::string name = schema.full_name();
  registrations_.push_back(
      registry_->define(std::move(schema), std::move(tags), RegistrationSource::here(loc), std::move(alias_analysis)));
  return name;
}

Library& Library::impl_kernel(std::string_view op_name, KernelFunction kernel, std::optional<DispatchKey> key,
                              bool allow_override, SourceLocation loc) {
  OPCONFORM_CHECK(ns_ != "_", ErrorCode::kRegistration, "impl('", op_name,
                  "') in the global '_' library: it only takes fallbacks");
  std::optional<DispatchKey> k = key ? key : dispatch_key_;
  OPCONFORM_CHECK(k.has_value(), ErrorCode::kRegistration, "impl('", op_name,
                  "'): no dispatch key given and the library has no default key");
  registrations_.push_back(
      registry_->impl(qualify(op_name), *k, std::move(kernel), RegistrationSource::here(loc), allow_override));
  return *this;
}

Library& Library::fallback_kernel(KernelFunction kernel, std::optional<DispatchKey> key, SourceLocation loc) {
  OPCONFORM_CHECK(ns_ == "_", ErrorCode::kRegistration,
                  "fallback: only the global namespace library Library(\"_\", IMPL) registers fallbacks, not '", ns_, "'");
  std::optional<DispatchKey> k = key ? key : dispatch_key_;
  OPCONFORM_CHECK(k.has_value(), ErrorCode::kRegistration, "fallback: no dispatch key given and the library has no default key");
  registrations_.push_back(registry_->fallback(*k, std::move(kernel), RegistrationSource::here(loc)));
  return *this;
}

RegistrationHandle define(std::string_view qualname, std::string_view schema, std::vector<Tag> tags, Registry& registry,
                          SourceLocation loc) {
  auto sep = qualname.find("::");
  OPCONFORM_CHECK(sep != std::string_view::npos && sep > 0, ErrorCode::kRegistration, "define: '", qualname,
                  "' must be qualified as 'namespace::name'");
  std::string text(schema);
  if (!text.empty() && text.front() == '(') text = std::string(qualname) + text;
  FunctionSchema parsed = parse_schema(text);
  if (parsed.ns.empty()) parsed.ns = std::string(qualname.substr(0, sep));
  OPCONFORM_CHECK(parsed.full_name() == qualname || parsed.qualified_name() == qualname, ErrorCode::kRegistration,
                  "define: the schema names '", parsed.full_name(), "', not '", qualname, "'");
  return registry.define(std::move(parsed), std::move(tags), RegistrationSource::here(loc));
}

}  // namespace opconform
