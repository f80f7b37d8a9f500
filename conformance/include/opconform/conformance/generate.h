// Generated samples (CHECKS.md, "Samples"): samples built from an operator's schema and its
// declared constraints by a RapidCheck generator, and a search that finds a failing sample,
// shrinks it to a minimal one and says which seed replays it.
//
//   GenerateSpec spec{.count = 200};
//   auto failure = find_failure(op.schema(), op.name(), [&](const Sample& s) { return my_check(op, s); }, spec);
//   if (failure) FAIL() << failure->result.message << "\nminimal input: " << failure->minimal.description
//                       << "\nreplay: " << failure->replay;
//
// What is generated, per schema type:
// - Tensor: rank 0..max_rank (0-d included), sizes 1..max_dim_size, sometimes one size 0 (empty);
//   in the large tier (GenerateSpec::large_percent of the samples) the first tensor has one size
//   from 31, 32, 33 ... 65535, 65536, 65537 (powers of two, one less, one more);
//   a layout — contiguous, offset (contiguous strides, storage offset > 0), sliced (every dim
//   stepped by 2), transposed (dims reversed), expanded (one dim of stride 0; never for inputs
//   the schema marks mutable) — and values: ordinary ones in [-10, 10] (or the declared range),
//   all zeros, or with NaN/±inf/denormals/extremes where the constraints accept them (bool: True
//   and False alike; integers: every value of [-10, 10] and the dtype's extremes). Memory a
//   view skips holds the sentinel 77 (true for bool), so a kernel that reads it shows.
// - int: a dimension of the related tensor under dim_in_range, else [0, max_dim_size] (or the
//   declared range); float, bool, Scalar, complex; int[]/float[]/bool[] (shapes: sizes
//   1..max_dim_size, length rank(t) under list_length_equals_rank); Tensor[] (1 to 3 tensors);
//   ScalarType/Device from the spec; `T?` is sometimes None; an argument with a default sometimes
//   takes it. ScalarType arguments take any of the op's dtypes, Device arguments any of the spec's
//   devices and cpu, MemoryFormat arguments contiguous, preserve and the channels-last format that
//   fits the first tensor's rank.
// Tensors and tensor lists are generated first (schema order), then the other arguments, so
// relations can point either way.
//
// Shrinking leads to small inputs: the simplest value of every choice comes first — fewer
// dimensions (leading ones dropped first), sizes 1, the contiguous layout, all-zero values, a
// default or None — so a stride bug shrinks to the smallest non-contiguous tensor (2 elements).
//
// Where the constraints cannot say what is valid (view's sizes multiply to numel, cat's tensors
// agree but on one dim, gather's indices are valid), an operator's data has a sample builder
// (core/sample_draw.h): a function that builds the arguments from draws and so shrinks and replays
// likewise. The by-operator forms below read the op's data from its registry entry (OpData).
#pragma once

#include <concepts>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <rapidcheck/Gen.h>

#include "opconform/conformance/outcome.h"
#include "opconform/conformance/sample.h"
#include "opconform/core/device.h"
#include "opconform/core/dtype.h"
#include "opconform/core/input_constraints.h"
#include "opconform/core/op_data.h"
#include "opconform/core/registry.h"
#include "opconform/core/sample_draw.h"
#include "opconform/core/schema.h"

namespace opconform::conformance {

struct GenerateSpec {
  int count = 100;        // samples tried (RapidCheck's maxSuccess)
  uint64_t seed = 0;      // 0: a random seed, printed on stderr; OPCONFORM_SEED overrides both
  // The devices samples live on; Device arguments take each of them, and cpu.
  std::vector<Device> devices = {Device::cpu()};
  // The sample dtypes. Empty: the op's declared ones (InputConstraints::dtypes of its OpData: the
  // reference's list, a plugin's declare_dtypes), else float32 and float64. An
  // argument's own declared dtypes (ArgConstraint::dtypes) win over either.
  std::vector<DType> dtypes = {};
  bool include_non_contiguous = true;   // offset, sliced, transposed, expanded layouts
  bool include_empty = true;            // tensors with a size 0
  bool include_scalars = true;          // 0-d tensors
  bool include_special_values = true;   // NaN, ±inf, denormals, extremes (where accepted)
  int max_rank = 4;
  int max_dim_size = 5;
  // The large tier (Note [The large tier], generate.cpp): this share of the samples gives its first
  // tensor one dimension at or around a power of two or a tile width (31, 32, 33, ... 4095, 4096,
  // 4097, ... 65537), so kernels that go wrong past a vector width, a tile or a threshold are
  // reached; its elements stay at most large_max_numel. 0 turns the tier off.
  int large_percent = 12;
  int64_t large_max_numel = int64_t{1} << 18;
  // Floating and complex tensors of arguments the schema does not write require grad, so that
  // gradcheck, gradgradcheck and test_autograd_registration have something to differentiate (as
  // the CLI's cases do). False only when a test wants plain tensors.
  bool requires_grad = true;
  // Property runs allowed while shrinking; past it the shrink stops where it is (a stuck or
  // slow shrink still reports a failure, just a less minimal one).
  int max_shrink_runs = 2000;
  // The command that reruns this search, for the replay line; empty: this program
  // (gtest.h sets it to the program with --gtest_filter of the current test).
  std::string replay_command;
};

// This program's path (from /proc/self/cmdline), for replay lines.
std::string program_path();

// The seed a run uses: OPCONFORM_SEED when set (and not 0), else spec.seed, else a random one
// (never 0), printed on stderr so that any run can be replayed. Throws for a malformed variable.
uint64_t resolve_seed(const GenerateSpec& spec);

// The generator of samples for a schema. Each sample's tensors are new (a property may write
// them); its description is describe() with the schema's argument names. Throws
// Error(kInvalidArgument) when the constraints do not fit the schema or an argument has a type
// that cannot be generated (a Generator, a Storage...) and no default.
rc::Gen<Sample> sample_gen(const FunctionSchema& schema, const InputConstraints& constraints,
                           const GenerateSpec& spec);

// spec.count samples, sizes growing from small to large as in a RapidCheck run; the same seed
// gives the same samples (resolve_seed picks the seed).
std::vector<Sample> generate_samples(const FunctionSchema& schema, const InputConstraints& constraints,
                                     const GenerateSpec& spec);

namespace detail {
rc::Gen<Sample> op_sample_gen(const FunctionSchema& schema, std::string_view op_name, const OpData& data,
                              const GenerateSpec& spec);
std::vector<Sample> take_samples(const rc::Gen<Sample>& gen, const GenerateSpec& spec);
}  // namespace detail

// sample_gen and generate_samples for an operator: its data's sample builder, else its schema and
// its data's constraints (OperatorHandle::data).
rc::Gen<Sample> sample_gen(const OperatorHandle& op, const GenerateSpec& spec);
std::vector<Sample> generate_samples(const OperatorHandle& op, const GenerateSpec& spec);

using SampleProperty = std::function<CheckResult(const Sample&)>;

struct GeneratedFailure {
  CheckResult result;  // the property's result on the minimal sample (minimal_input and repro set)
  Sample minimal;      // new tensors, never touched by the property
  uint64_t seed = 0;
  std::string replay;  // "OPCONFORM_SEED=<seed> <command>": reruns the search to the same sample
  int samples_tried = 0;   // until the first failure
  int shrinks = 0;         // accepted shrink steps
};

// Runs the property on up to spec.count generated samples. A sample fails when the property's
// outcome is `failed` or `crashed` (a kernel that died is the finding most worth minimizing);
// mistrusted, timed_out, unsupported and skipped do not (they prove nothing about the sample, and
// a timeout would make every shrink step wait). A property that throws fails, with the exception
// in the message. The first failure is shrunk; nullopt when every sample passes. RapidCheck's own
// output is not printed. The samples come from the op's data (as generate_samples(op)).
std::optional<GeneratedFailure> find_failure(const OperatorHandle& op, const SampleProperty& property,
                                             const GenerateSpec& spec = {});
// The same for a schema with explicit constraints (no sample builder); op_name names it in messages.
std::optional<GeneratedFailure> find_failure(const FunctionSchema& schema, const InputConstraints& constraints,
                                             const std::string& op_name, const SampleProperty& property,
                                             const GenerateSpec& spec = {});

}  // namespace opconform::conformance
