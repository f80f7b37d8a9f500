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
#include "opconform/conformance/detail/check_kit.h"
#include "opconform/core/autograd.h"
#include "opconform/core/error.h"
#include "opconform/core/fake_tensor.h"

namespace opconform::conformance::detail {
namespace {

using ::opconform::detail::concat;

constexpr std::string_view kName = "test_faketensor";

std::string sym_str(const std::vector<SymInt>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + s[i].to_string();
  return out + "]";
}

// A real size against the fake kernel's (maybe symbolic) size.
bool size_matches(int64_t real, const SymInt& fake) {
  if (auto c = fake.maybe_as_int()) return *c == real;
  auto hint = fake.hint();
  return !hint || *hint == real;  // unbacked: any real size
}

// One way the fake kernel's metadata differs from the real kernel's: its cause and its sentence.
struct Finding {
  Cause cause;
  std::string text;
};
using Findings = std::vector<Finding>;

// The real and the fake run's arguments and returns (and the mode the fakes belong to).
struct Runs {
  Stack real_args, real, fake_args, fake;
  FakeTensorMode mode;
};

// The fake run's arguments: fakes of clones of the sample, requires_grad carried over.
Stack fakes_of(const Stack& args, FakeTensorMode& mode) {
  Stack fake_args;
  for (const IValue& v : clone_args(args)) {
    fake_args.push_back(map_tensors(v, [&](const Tensor& t) {
      Tensor f = mode.from_tensor(t);
      if (t.requires_grad() && !f.requires_grad()) f.set_requires_grad(true);
      return f;
    }));
  }
  return fake_args;
}

// What the check says when the fake run threw (an Error the fake kernel or the fallback raised).
CheckResult fake_run_threw(const OpcheckTestRun& k, const Error& e) {
  const OperatorHandle& op = k.op();
  if (e.code() == ErrorCode::kDataDependentOutput) {
    if (!op.has_tag(Tag::data_dependent_output)) {
      return k.failed_on_sample(
          Cause{FindingKind::schema_violation, "data_dependent_output",
                "the fake kernel reports a data-dependent output, but the op is not tagged data_dependent_output"},
          concat("the fake kernel reports a data-dependent output, but the operator is not tagged "
                 "data_dependent_output: tag it, or compute the output's metadata. (", e.what(), ")"));
    }
    return k.skipped(concat("'", op.name(), "' returns a value of its input's data (tagged data_dependent_output), "
                            "which a fake run cannot predict; its fake kernel says so. Nothing to compare."),
                     "data_dependent_output", "the op returns a value of its input's data");
  }
  if (e.reason() == ErrorReason::kNoFakeKernel) {
    // A capability the library lacks for every op that has none: one finding for all of them.
    return k.failed_on_sample(Cause{FindingKind::missing_registration, "fake kernel", "no fake kernel", true},
                              concat("no fake kernel: the operator cannot run on fake tensors, so it cannot be traced, "
                                     "exported or compiled. Register one with register_fake (or a Meta kernel). (",
                                     e.what(), ")"));
  }
  if (e.reason() == ErrorReason::kFakeDataAccess) {
    return k.failed_on_sample(Cause{FindingKind::threw, "fake kernel", "the fake kernel reads tensor data"},
                              concat("the fake kernel reads tensor data, which fake tensors do not have. A fake kernel "
                                     "computes metadata only; for an output whose size depends on the data, use "
                                     "get_ctx().new_dynamic_size(). (", e.what(), ")"));
  }
  return k.failed_on_sample(Cause{FindingKind::threw, "fake kernel", "the fake kernel throws where the real kernel returns"},
                            concat("the fake kernel threw where the real kernel succeeded: ", e.what()));
}

// The fake run of the op under a FakeTensorMode; the result to return when it threw.
std::optional<CheckResult> run_fake(const OpcheckTestRun& k, Runs& runs) {
  const OperatorHandle& op = k.op();
  runs.fake_args = fakes_of(k.ctx().sample.args, runs.mode);
  runs.fake = runs.fake_args;
  RegistrationHandle fallback;
  const auto source = op.entry().table_source[static_cast<size_t>(DispatchKey::Fake)];
  if (source != ::opconform::detail::TableSource::Direct && source != ::opconform::detail::TableSource::Fallback) {
    fallback = install_fake_fallback(k.ctx().registry);
  }
  try {
    FakeTensorModeGuard guard(runs.mode);
    run_boxed(op, runs.fake);
  } catch (const Error& e) {
    return fake_run_threw(k, e);
  } catch (const std::exception& e) {
    return k.failed_on_sample(Cause{FindingKind::threw, "fake kernel", "the fake kernel throws where the real kernel returns"},
                              concat("the fake kernel threw where the real kernel succeeded: ", e.what()));
  }
  return std::nullopt;
}

// The metadata of one output, real against fake.
void compare_metadata(const Tensor& r, const Tensor& f, const std::string& label, Findings& findings) {
  const std::string subject = observable_subject(label);
  auto mismatch = [&](FindingKind kind, std::string_view what, const std::string& fake_value, const std::string& real_value) {
    findings.push_back({Cause{kind, subject, concat("the fake kernel gives wrong ", what, " for ", subject)},
                        concat(label, " ", what, ": the fake kernel gives ", fake_value, ", the real kernel ", real_value, ".")});
  };
  const std::vector<SymInt> fs = f.sym_sizes(), fst = f.sym_strides();
  bool sizes_ok = static_cast<int64_t>(fs.size()) == r.dim();
  for (int64_t d = 0; sizes_ok && d < r.dim(); ++d) sizes_ok = size_matches(r.size(d), fs[d]);
  if (!sizes_ok) {
    mismatch(FindingKind::shape_mismatch, "sizes", sym_str(fs), shape_string(r.sizes()));
    return;  // strides and the rest would only repeat the shape error
  }
  if (r.numel() > 0) {
    for (int64_t d = 0; d < r.dim(); ++d) {
      if (r.size(d) > 1 && !size_matches(r.stride(d), fst[d])) {
        mismatch(FindingKind::stride_mismatch, "strides", sym_str(fst), shape_string(r.strides()));
        break;
      }
    }
  }
  if (r.dtype() != f.dtype()) {
    mismatch(FindingKind::dtype_mismatch, "dtype", std::string(opconform::name(f.dtype())), std::string(opconform::name(r.dtype())));
  }
  if (r.device() != f.device()) mismatch(FindingKind::device_mismatch, "device", f.device().to_string(), r.device().to_string());
  if (r.storage_offset() != f.storage_offset()) {
    mismatch(FindingKind::storage_offset_mismatch, "storage offset", std::to_string(f.storage_offset()),
             std::to_string(r.storage_offset()));
  }
  if (r.requires_grad() != f.requires_grad()) {
    mismatch(FindingKind::other, "requires_grad", f.requires_grad() ? "true" : "false", r.requires_grad() ? "true" : "false");
  }
}

// The aliasing pattern: outputs vs inputs, outputs vs outputs.
void compare_aliasing(const OpcheckTestRun& k, const Runs& runs, const std::vector<std::pair<Tensor, Tensor>>& outs,
                      const std::vector<std::string>& labels, Findings& findings) {
  std::vector<std::pair<Tensor, Tensor>> ins;  // (real, fake), flattened in argument order
  std::vector<std::string> in_names;
  for (size_t i = 0; i < runs.real_args.size() && i < runs.fake_args.size(); ++i) {
    auto rt = tensors_in(runs.real_args[i]), ft = tensors_in(runs.fake_args[i]);
    for (size_t j = 0; j < rt.size() && j < ft.size(); ++j) {
      ins.emplace_back(rt[j], ft[j]);
      in_names.push_back(i < k.schema.arguments.size() ? k.schema.arguments[i].name : concat("#", i));
    }
  }
  auto alias_finding = [&](const std::string& a, const std::string& b, bool real_alias) {
    const std::string subject = observable_subject(a);
    findings.push_back(
        {Cause{FindingKind::aliasing_mismatch, subject, concat("the fake kernel gives ", subject, " another aliasing")},
         concat(a, (real_alias ? " aliases " : " does not alias "), b, " in the real run but ", (real_alias ? "not" : "does"),
                " in the fake run. ",
                real_alias ? "The fake kernel must return a view of it where the real kernel does."
                           : "The fake kernel must return a new tensor where the real kernel does.")});
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
}

class TestFakeTensor final : public Check {
 public:
  std::string_view name() const override { return kName; }

  CheckResult run(const CheckContext& ctx) const override {
    const OpcheckTestRun k(kName, ctx);
    // An out= op does not support autograd (PyTorch's rule: a call with an argument that requires
    // grad is refused): its metadata is compared with grad mode off.
    std::optional<autograd::NoGradGuard> no_grad;
    if (ctx.op.has_tag(Tag::out)) no_grad.emplace();

    Runs runs;
    runs.real_args = k.clone();
    runs.real = runs.real_args;
    try {
      run_boxed(ctx.op, runs.real);
    } catch (const std::exception& e) {
      return k.threw(e, "the real run");
    }
    if (auto threw = run_fake(k, runs)) return *threw;

    // ---- count and tensor-ness
    if (runs.real.size() != runs.fake.size()) {
      return k.failed_on_sample(Cause{FindingKind::return_mismatch, "fake kernel", "the fake kernel returns another number of values"},
                                concat("the real kernel returned ", runs.real.size(), " value(s), the fake kernel ",
                                       runs.fake.size(), ". The fake kernel must return what the operator returns."));
    }
    Findings findings;
    std::vector<std::pair<Tensor, Tensor>> outs;  // (real, fake), flattened
    std::vector<std::string> labels;
    for (size_t j = 0; j < runs.real.size(); ++j) {
      auto rt = tensors_in(runs.real[j]), ft = tensors_in(runs.fake[j]);
      if (runs.real[j].is_tensor() != runs.fake[j].is_tensor() || rt.size() != ft.size()) {
        findings.push_back({Cause{FindingKind::return_mismatch, concat("output ", j),
                                  concat("the fake kernel gives output ", j, " another kind of value")},
                            concat("output ", j, " is a ", runs.real[j].type_name(), " with ", rt.size(),
                                   " tensor(s) in the real run but a ", runs.fake[j].type_name(), " with ", ft.size(),
                                   " in the fake run.")});
        continue;
      }
      for (size_t e = 0; e < rt.size(); ++e) {
        outs.emplace_back(rt[e], ft[e]);
        labels.push_back(runs.real[j].is_tensor() ? concat("output ", j) : concat("output ", j, "[", e, "]"));
      }
    }
    for (size_t o = 0; o < outs.size(); ++o) compare_metadata(outs[o].first, outs[o].second, labels[o], findings);
    compare_aliasing(k, runs, outs, labels, findings);

    if (findings.empty()) return k.passed();
    std::string what = "the fake kernel does not predict the real output's metadata. ";
    for (size_t f = 0; f < findings.size(); ++f) what += (f ? " " : "") + findings[f].text;
    what += " Fix the fake kernel (register_fake) so that it computes exactly the real kernel's metadata.";
    return k.failed_on_sample(findings.front().cause, what);
  }
};

}  // namespace

std::unique_ptr<Check> make_test_faketensor() { return std::make_unique<TestFakeTensor>(); }

}  // namespace opconform::conformance::detail
