// The fixed report every golden test writes: every outcome, a load problem, and the characters
// each format must escape (< & " ' | newlines, a tab, an ANSI escape, "</script>", "<!--",
// backticks, accents, symbols, an emoji).
#pragma once

#include "opconform/reports/report.h"

namespace opconform::reports::testing {

inline CaseResult result(std::string op, std::string check, std::string device, std::string dtype, Outcome outcome,
                         std::string message = "", std::string repro = "",
                         std::optional<std::string> minimal_input = std::nullopt, double seconds = 0.125) {
  return CaseResult{std::move(op),      std::move(check), std::move(device),        std::move(dtype), outcome,
                    std::move(message), std::move(repro), std::move(minimal_input), seconds};
}

inline Report sample_report() {
  Report report;
  report.info = RunInfo{.tool_version = "0.1.0",
                        .library = "vendor-ops 2.3 <beta> & \"friends\"",
                        .library_path = "/opt/vendor/lib/libvendor_ops.so",
                        .against = "reference",
                        .command = "opconform check --library /opt/vendor/lib/libvendor_ops.so --samples 50",
                        .started_at = "2026-12-01T03:04:05Z",
                        .seed = 0,
                        .samples = 50,
                        .shard = ""};
  report.seconds = 12.5;
  const std::string repro_prefix = "opconform repro --library /opt/vendor/lib/libvendor_ops.so";
  report.results = {
      result("aten::add.Tensor", "test_schema", "cpu", "float32", Outcome::passed, "", "", std::nullopt, 0.012),
      result("aten::add.Tensor", "gradcheck", "cpu", "float32", Outcome::failed,
             "gradient of 'self' differs at index [2]: analytical 1.5, numerical 1.25\n"
             "(rtol 0.001, atol 1e-05): 1 of 4 elements differ",
             "OPCONFORM_SEED=42 " + repro_prefix + " --op aten::add.Tensor --check gradcheck --device cpu --dtype float32",
             "self: tensor([0.0, 1.0, -2.5, 3.0], dtype=float32)\nother: tensor([1.0], dtype=float32)", 0.5),
      result("aten::add.Tensor", "gradcheck", "cpu", "float64", Outcome::passed, "", "", std::nullopt, 0.25),
      result("aten::add.Tensor", "gradcheck", "cuda", "float16", Outcome::skipped,
             "gradcheck needs float64 or complex128: float16 is too coarse for finite differences", "", std::nullopt, 0),
      result("aten::mul.Tensor", "test_schema", "cpu", "float32", Outcome::passed),
      result("aten::mul.Tensor", "stride_invariance", "cpu", "float32", Outcome::passed),
      result("aten::mul.Tensor", "stride_invariance", "cuda", "bfloat16", Outcome::unsupported,
             "no kernel for aten::mul.Tensor on cuda for bfloat16 (the library does not implement it)"),
      result("aten::index_put", "determinism", "cpu", "int64", Outcome::crashed,
             "the worker died of signal 11 (SIGSEGV) in the real run",
             repro_prefix + " --op aten::index_put --check determinism --device cpu --dtype int64",
             "self: tensor([[1, 2], [3, 4]])\nindices: [tensor([3])]\nvalues: tensor([9])", 1.0),
      result("aten::sort.stable", "dtype_consistency", "cpu", "float32", Outcome::timed_out,
             "no answer after 30 s: the kernel hangs",
             repro_prefix + " --op aten::sort.stable --check dtype_consistency --device cpu --dtype float32",
             std::nullopt, 30.0),
      result("aten::zeros_like", "test_faketensor", "cpu", "float32", Outcome::mistrusted,
             "every output element was zero in the library and the reference: the comparison proves nothing"),
      result("vendor::fused<&\"|'>.out", "edge_shapes", "cpu", "float32", Outcome::failed,
             "output | shape <2, 3> differs & \"quoted\" 'single'\n"
             "\tsecond line: \xC3\xA9 \xC3\xBC \xE2\x80\x94 \xE2\x88\x9E \xE2\x89\xA4 \xF0\x9F\x98\x80 \x1B[31m"
             " </script><script>alert(1)</script> <!--<script>",
             repro_prefix + " --op 'vendor::fused<&\"|'\\''>.out' --check edge_shapes",
             "x: tensor([], size=(0, 3)) | `backticks` ```fence```", 0.0625),
      result("vendor::broken", "load", "", "", Outcome::failed,
             "symbol 'vendor_broken_kernel' not found in /opt/vendor/lib/libvendor_ops.so", "", std::nullopt, 0),
  };
  // Causes as the checks and the harness set them (Note [One finding per cause]) on every result
  // that is not ok; the skip and the load result keep the ones their outcome gives.
  using conformance::Cause;
  using conformance::FindingKind;
  report.results[1].recorded_cause = Cause{FindingKind::wrong_gradient, "self", "the gradient of 'self' is wrong"};
  report.results[6].recorded_cause =
      Cause{FindingKind::not_implemented, "library_not_implemented", "not implemented: the library does not implement these arguments"};
  report.results[7].recorded_cause = Cause{FindingKind::crash, "SIGSEGV", "the kernel crashed (SIGSEGV) in determinism"};
  report.results[8].recorded_cause = Cause{FindingKind::hang, "", "the kernel hung past the time-out"};
  report.results[9].recorded_cause = Cause{FindingKind::inconclusive, "output 0", "every compared value was zero"};
  report.results[10].recorded_cause = Cause{FindingKind::shape_mismatch, "output 0", "output 0 has a wrong shape <&\"|'>"};
  return report;
}

// The sample with the add gradcheck failure repeated on another device and dtype (same op,
// check and cause; its own repro line): one finding of two results (Note [One finding per cause]).
inline Report sample_report_with_repeated_failure() {
  Report report = sample_report();
  CaseResult again = report.results[1];
  again.device = "cuda", again.dtype = "float64";
  again.repro = "opconform repro --library /opt/vendor/lib/libvendor_ops.so --op aten::add.Tensor --check gradcheck "
                "--device cuda --dtype float64";
  again.minimal_input.reset();
  report.results.push_back(again);
  return report;
}

}  // namespace opconform::reports::testing
