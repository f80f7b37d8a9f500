// test_faketensor: the fake kernel predicts the real output's metadata (CHECKS.md).
//
// The op runs twice on clones of the sample: once on real tensors, once under a FakeTensorMode
// on fakes of them (mode.from_tensor, requires_grad carried over, aliasing between arguments
// kept: fakes of tensors sharing a storage share a fake storage). Then, for every output:
// count and tensor-ness; sizes (a symbolic size matches when it is unbacked — a data-dependent
// size from get_ctx().new_dynamic_size() — or its hint equals the real size); strides of every
// dimension of size > 1, on every device, CPU included (for a non-empty output: the strides of
// an empty tensor are meaningless); dtype; device; storage offset; requires_grad; and the
// aliasing pattern: for each output, which inputs and which other outputs it shares storage
// with must be the same in both runs.
//
// A registry without a fake fallback would let a fake call fall through to the real kernel;
// for the fake run the check installs install_fake_fallback in that registry (removed again
// afterwards), so that an op without a fake kernel fails with the fallback's kNotImplemented.
// A registry that has its own fallback at DispatchKey::Fake keeps it.
#include <optional>

#include "opconform/conformance/detail/builtin_checks.h"
#include "opconform/core/autograd.h"
#include "opconform/core/error.h"
#include "opconform/core/fake_tensor.h"

namespace opconform::conformance {
namespace {

using ::opconform::detail::concat;

constexpr std::string_view kName = "test_faketensor";

std::string sym_str(const std::vector<SymInt>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + s[i].to_string();
  return out + "]";
}

bool contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

// A real size against the fake kernel's (maybe symbolic) size.
bool size_matches(int64_t real, const SymInt& fake) {
  if (auto c = fake.maybe_as_int()) return *c == real;
  auto hint = fake.hint();
  return !hint || *hint == real;  // unbacked: any real size
}

class TestFakeTensor final : public Check {
 public:
  std::string_view name() const override { return kName; }

  CheckResult run(const CheckContext& ctx) const override {
    CheckResult result;
    result.check = std::string(kName);
    const OperatorHandle& op = ctx.op;
    const FunctionSchema& schema = op.schema();
    const std::string sample = description_of(ctx.sample, schema);
    auto fail = [&](std::string what) {
      result.outcome = Outcome::failed;
      result.message = concat("'", op.name(), "' on sample (", sample, "): ", what);
      result.repro = concat("opcheck(\"", op.name(), "\", test_utils={\"", kName, "\"}) on sample: ", sample);
      return result;
    };

    // An out= op does not support autograd (PyTorch's rule: a call with an argument that requires
    // grad is refused): its metadata is compared with grad mode off.
    std::optional<autograd::NoGradGuard> no_grad;
    if (op.has_tag(Tag::out)) no_grad.emplace();

    // ---- the real run
    Stack real_args = clone_args(ctx.sample.args);
    Stack real = real_args;
    try {
      ::opconform::conformance::detail::run_boxed(op, real);
    } catch (const std::exception& e) {
      return operator_threw(result.check, op.name(), e, sample, "the real run");
    }

    // ---- the fake run
    FakeTensorMode mode;
    Stack fake_args;
    for (const IValue& v : clone_args(ctx.sample.args)) {
      fake_args.push_back(map_tensors(v, [&](const Tensor& t) {
        Tensor f = mode.from_tensor(t);
        if (t.requires_grad() && !f.requires_grad()) f.set_requires_grad(true);
        return f;
      }));
    }
    Stack fake = fake_args;
    {
      RegistrationHandle fallback;
      const auto source = op.entry().table_source[static_cast<size_t>(DispatchKey::Fake)];
      if (source != ::opconform::detail::TableSource::Direct && source != ::opconform::detail::TableSource::Fallback) {
        fallback = install_fake_fallback(ctx.registry);
      }
      try {
        FakeTensorModeGuard guard(mode);
        ::opconform::conformance::detail::run_boxed(op, fake);
      } catch (const Error& e) {
        if (e.code() == ErrorCode::kDataDependentOutput) {
          if (!op.has_tag(Tag::data_dependent_output)) {
            return fail(concat("the fake kernel reports a data-dependent output, but the operator is not tagged "
                               "data_dependent_output: tag it, or compute the output's metadata. (", e.what(), ")"));
          }
          result.outcome = Outcome::skipped;
          result.message = concat("'", op.name(), "' returns a value of its input's data (tagged data_dependent_output), "
                                  "which a fake run cannot predict; its fake kernel says so. Nothing to compare.");
          return result;
        }
        if (e.code() == ErrorCode::kNotImplemented && contains(e.what(), "has no fake kernel")) {
          return fail(concat("no fake kernel: the operator cannot run on fake tensors, so it cannot be traced, "
                             "exported or compiled. Register one with register_fake (or a Meta kernel). (", e.what(), ")"));
        }
        if (contains(e.what(), "accessed tensor data") || contains(e.what(), "cannot access the data of a fake tensor")) {
          return fail(concat("the fake kernel reads tensor data, which fake tensors do not have. A fake kernel computes "
                             "metadata only; for an output whose size depends on the data, use "
                             "get_ctx().new_dynamic_size(). (", e.what(), ")"));
        }
        return fail(concat("the fake kernel threw where the real kernel succeeded: ", e.what()));
      } catch (const std::exception& e) {
        return fail(concat("the fake kernel threw where the real kernel succeeded: ", e.what()));
      }
    }

    // ---- count and tensor-ness
    if (real.size() != fake.size()) {
      return fail(concat("the real kernel returned ", real.size(), " value(s), the fake kernel ", fake.size(),
                         ". The fake kernel must return what the operator returns."));
    }
    std::vector<std::string> findings;
    std::vector<std::pair<Tensor, Tensor>> outs;  // (real, fake), flattened
    std::vector<std::string> labels;
    for (size_t j = 0; j < real.size(); ++j) {
      auto rt = tensors_in(real[j]), ft = tensors_in(fake[j]);
      if (real[j].is_tensor() != fake[j].is_tensor() || rt.size() != ft.size()) {
        findings.push_back(concat("output ", j, " is a ", real[j].type_name(), " with ", rt.size(),
                                  " tensor(s) in the real run but a ", fake[j].type_name(), " with ", ft.size(),
                                  " in the fake run."));
        continue;
      }
      for (size_t k = 0; k < rt.size(); ++k) {
        outs.emplace_back(rt[k], ft[k]);
        labels.push_back(real[j].is_tensor() ? concat("output ", j) : concat("output ", j, "[", k, "]"));
      }
    }

    // ---- metadata of each output
    for (size_t o = 0; o < outs.size(); ++o) {
      const Tensor& r = outs[o].first;
      const Tensor& f = outs[o].second;
      const std::string& label = labels[o];
      auto mismatch = [&](std::string_view what, const std::string& fake_value, const std::string& real_value) {
        findings.push_back(concat(label, " ", what, ": the fake kernel gives ", fake_value, ", the real kernel ",
                                  real_value, "."));
      };
      const std::vector<SymInt> fs = f.sym_sizes(), fst = f.sym_strides();
      bool sizes_ok = static_cast<int64_t>(fs.size()) == r.dim();
      for (int64_t d = 0; sizes_ok && d < r.dim(); ++d) sizes_ok = size_matches(r.size(d), fs[d]);
      if (!sizes_ok) {
        mismatch("sizes", sym_str(fs), shape_string(r.sizes()));
        continue;  // strides and the rest would only repeat the shape error
      }
      if (r.numel() > 0) {
        for (int64_t d = 0; d < r.dim(); ++d) {
          if (r.size(d) > 1 && !size_matches(r.stride(d), fst[d])) {
            mismatch("strides", sym_str(fst), shape_string(r.strides()));
            break;
          }
        }
      }
      if (r.dtype() != f.dtype()) mismatch("dtype", std::string(opconform::name(f.dtype())), std::string(opconform::name(r.dtype())));
      if (r.device() != f.device()) mismatch("device", f.device().to_string(), r.device().to_string());
      if (r.storage_offset() != f.storage_offset()) {
        mismatch("storage offset", std::to_string(f.storage_offset()), std::to_string(r.storage_offset()));
      }
      if (r.requires_grad() != f.requires_grad()) {
        mismatch("requires_grad", f.requires_grad() ? "true" : "false", r.requires_grad() ? "true" : "false");
      }
    }

    // ---- aliasing pattern: outputs vs inputs, outputs vs outputs
    std::vector<std::pair<Tensor, Tensor>> ins;  // (real, fake), flattened in argument order
    std::vector<std::string> in_names;
    for (size_t i = 0; i < real_args.size() && i < fake_args.size(); ++i) {
      auto rt = tensors_in(real_args[i]), ft = tensors_in(fake_args[i]);
      for (size_t k = 0; k < rt.size() && k < ft.size(); ++k) {
        ins.emplace_back(rt[k], ft[k]);
        in_names.push_back(i < schema.arguments.size() ? schema.arguments[i].name : concat("#", i));
      }
    }
    auto alias_finding = [&](const std::string& a, const std::string& b, bool real_alias) {
      findings.push_back(concat(a, (real_alias ? " aliases " : " does not alias "), b, " in the real run but ",
                                (real_alias ? "not" : "does"), " in the fake run. ",
                                real_alias ? "The fake kernel must return a view of it where the real kernel does."
                                           : "The fake kernel must return a new tensor where the real kernel does."));
    };
    for (size_t o = 0; o < outs.size(); ++o) {
      for (size_t i = 0; i < ins.size(); ++i) {
        const bool r_alias = outs[o].first.is_alias_of(ins[i].first);
        if (r_alias != outs[o].second.is_alias_of(ins[i].second)) {
          alias_finding(labels[o], concat("argument '", in_names[i], "'"), r_alias);
        }
      }
      for (size_t p = o + 1; p < outs.size(); ++p) {
        const bool r_alias = outs[o].first.is_alias_of(outs[p].first);
        if (r_alias != outs[o].second.is_alias_of(outs[p].second)) alias_finding(labels[o], labels[p], r_alias);
      }
    }

    if (findings.empty()) return result;
    std::string what = "the fake kernel does not predict the real output's metadata. ";
    for (size_t f = 0; f < findings.size(); ++f) what += (f ? " " : "") + findings[f];
    what += " Fix the fake kernel (register_fake) so that it computes exactly the real kernel's metadata.";
    return fail(std::move(what));
  }
};

}  // namespace

std::unique_ptr<Check> detail::make_test_faketensor() { return std::make_unique<TestFakeTensor>(); }

}  // namespace opconform::conformance
