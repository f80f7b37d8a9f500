// Sample generation and the shrinking search (generate.h).
//
// Note [Plans, then tensors]: the RapidCheck generators produce plain data — a SamplePlan of
// sizes, layouts, dtypes and values — and tensors are made from a plan only at the end. So
// every evaluation makes new tensors (a property that writes its inputs cannot spoil the next
// shrink step), the minimal failing sample can be rebuilt untouched, and all shrinking happens on
// small integers whose simplest value (0) is the simplest input.
//
// Note [Shrinking order]: the sample is one gen::exec: one pick for the sample's dtype and
// device, then one pick per argument (tensors first). RapidCheck shrinks picks left to right and
// regenerates the picks after a changed one from the same random stream, so each argument is a
// single pick whose parts (rank, sizes, layout, value mode, values) shrink independently inside
// it (gen::tuple, gen::mapcat), and every choice lists its simplest option first.
#include "opconform/conformance/generate.h"

#include "opconform/core/cuda.h"
#include "opconform/core/default_value.h"

#include <rapidcheck.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <memory>
#include <numeric>
#include <mutex>
#include <random>
#include <sstream>
#include <variant>
#include <cerrno>

#include "opconform/core/error.h"
#include "opconform/core/tensor.h"

namespace opconform::conformance {
namespace {

using opconform::detail::concat;

// RapidCheck's maximum size. Choices, ranks and sizes are generated at it, so that every run
// covers every shape from its first samples (RapidCheck's size would make the first quarter of a
// run 0-d); values still grow with the case's size.
constexpr int kFullSize = 100;

// An index with the given weights; shrinks toward 0, so the simplest option goes first.
rc::Gen<int> choice(std::vector<int> weights) {
  const int total = std::accumulate(weights.begin(), weights.end(), 0);
  return rc::gen::map(rc::gen::resize(kFullSize, rc::gen::inRange(0, total)), [weights](int x) {
    int i = 0;
    while (x >= weights[i]) x -= weights[i++];
    return i;
  });
}

// An integer in [lo, hi] that shrinks toward the value of the range closest to 0.
rc::Gen<int64_t> int_in(int64_t lo, int64_t hi) {
  if (lo >= 0) return rc::gen::inRange<int64_t>(lo, hi + 1);
  if (hi <= 0) return rc::gen::map(rc::gen::inRange<int64_t>(-hi, -lo + 1), [](int64_t m) { return -m; });
  return rc::gen::map(rc::gen::tuple(choice({1, 1}), rc::gen::inRange<int64_t>(0, std::max(-lo, hi) + 1)),
                      [lo, hi](const std::tuple<int, int64_t>& t) {
                        int64_t v = std::get<0>(t) ? -std::get<1>(t) : std::get<1>(t);
                        return std::clamp(v, lo, hi);
                      });
}

// ---- values ----

struct Limits {
  double lowest, max, tiny, denorm;
};
Limits limits_of(DType dt) {
  switch (dt) {
    case DType::Float16: return {-65504.0, 65504.0, 6.103515625e-05, 5.9604644775390625e-08};
    case DType::BFloat16: return {-3.3895313892515355e38, 3.3895313892515355e38, 1.1754943508222875e-38, 9.183549615799121e-41};
    case DType::Float32: case DType::Complex64:
      return {std::numeric_limits<float>::lowest(), std::numeric_limits<float>::max(),
              std::numeric_limits<float>::min(), std::numeric_limits<float>::denorm_min()};
    case DType::Float64: case DType::Complex128:
      return {std::numeric_limits<double>::lowest(), std::numeric_limits<double>::max(),
              std::numeric_limits<double>::min(), std::numeric_limits<double>::denorm_min()};
    case DType::Bool: return {0, 1, 0, 0};
    case DType::UInt8: return {0, 255, 0, 0};
    case DType::Int8: return {-128, 127, 0, 0};
    case DType::Int16: return {-32768, 32767, 0, 0};
    case DType::Int32: return {-2147483648.0, 2147483647.0, 0, 0};
    case DType::Int64: break;
  }
  // 2^63 saturates to int64's maximum when converted (convert_scalar's rule).
  return {-9223372036854775808.0, 9223372036854775808.0, 0, 0};
}

bool is_float_like(DType dt) { return is_floating(dt) || is_complex(dt); }

// The ordinary values of a dtype under a constraint: [lo, hi], lo exclusive for `positive`.
struct Range {
  double lo, hi;
  bool lo_exclusive = false;
  double anchor;  // the simplest value: 0 when allowed, else the bound closest to it
};

constexpr double kSpan = 10;  // ordinary values lie in [-10, 10] unless declared otherwise

Range range_of(DType dt, const ValueConstraint& vc, double span = kSpan) {
  // A bool is False or True whatever range the op declares for its numbers (asin's [-0.9, 0.9]
  // would leave only False, log's > 0 only True): both values, always, or a bool case compares
  // constant outputs and proves nothing.
  if (dt == DType::Bool) return Range{0, 1, false, 0};
  Limits l = limits_of(dt);
  double lo = vc.min.value_or(-span), hi = vc.max.value_or(span);
  if (!vc.max && hi < lo) hi = lo + span;
  if (!vc.min && lo > hi) lo = hi - span;
  lo = std::max(lo, l.lowest);
  hi = std::min(hi, l.max);
  Range r{lo, hi, false, 0};
  if (!is_float_like(dt)) {
    r.lo = std::ceil(r.lo);
    r.hi = std::floor(r.hi);
    if (vc.positive) r.lo = std::max(r.lo, 1.0);
  } else if (vc.positive && r.lo <= 0) {
    r.lo = 0;
    r.lo_exclusive = true;
  }
  if (r.lo > r.hi || (r.lo_exclusive && r.hi <= 0)) {
    throw Error(ErrorCode::kInvalidArgument,
                concat("no ", name(dt), " value satisfies the declared value constraint"));
  }
  r.anchor = r.lo_exclusive ? std::min(1.0, r.hi) : std::clamp(0.0, r.lo, r.hi);
  return r;
}

// The ordinary value the fraction f (in [0, 1]) of the way from the anchor to a bound (down: the
// lower). Integers round to nearest, so that every integer of the range, both bounds included, is
// drawn about equally often (truncating toward the anchor made a bool [0, 1] range all False).
double ordinary_at(const Range& r, bool integral, bool down, double f) {
  if (r.lo_exclusive) f *= 0.999;  // never reach the excluded bound
  double v = down ? r.anchor - f * (r.anchor - r.lo) : r.anchor + f * (r.hi - r.anchor);
  return integral ? std::clamp(std::round(v), r.lo, r.hi) : v;
}

// An ordinary value: anchor ± a fraction of the way to a bound; shrinks to the anchor. A bool is a
// fair coin at every size (the fraction grows with RapidCheck's size, which would make the early
// samples all False).
rc::Gen<double> ordinary_value(DType dt, const Range& r) {
  if (dt == DType::Bool) return rc::gen::map(choice({1, 1}), [](int k) { return double(k); });
  const bool integral = !is_float_like(dt);
  return rc::gen::map(rc::gen::tuple(choice({1, 1}), rc::gen::inRange(0, 1001)),
                      [r, integral](const std::tuple<int, int>& t) {
                        return ordinary_at(r, integral, std::get<0>(t) == 1, std::get<1>(t) / 1000.0);
                      });
}

// Floats: NaN, ±inf, the extremes, huge and tiny ordinary magnitudes, the smallest normal, a
// denormal and -0; integers: the extremes, their neighbours, -1 and the next narrower type's
// bounds (where an int32 accumulator would overflow); as far as accepted.
std::vector<double> special_values(DType dt, const ValueConstraint& vc) {
  std::vector<double> candidates;
  Limits l = limits_of(dt);
  if (is_float_like(dt)) {
    candidates = {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                  -std::numeric_limits<double>::infinity(), l.max, l.lowest, l.max / 4, -l.max / 4, 1e4, -1e4,
                  l.tiny, l.denorm, -l.denorm, 1e-4, -0.0};
  } else if (dt != DType::Bool) {
    // The extremes' neighbours; int64's as the nearest doubles inside the range (max - 1 rounds
    // back to 2^63 in a double).
    candidates = {l.max, l.lowest, dt == DType::Int64 ? std::nextafter(l.max, 0.0) : l.max - 1,
                  dt == DType::Int64 ? std::nextafter(l.lowest, 0.0) : l.lowest + 1};
    if (l.lowest < 0) candidates.push_back(-1);
    for (double b : {127.0, 128.0, -129.0, 255.0, 256.0, 32767.0, 32768.0, -32769.0, 2147483647.0, 2147483648.0,
                     -2147483649.0})
      if (b > l.lowest && b < l.max) candidates.push_back(b);
  }
  std::vector<double> out;
  for (double v : candidates)
    if (vc.admits(v)) out.push_back(v);
  return out;
}

// ---- plans ----

enum class TensorLayout : uint8_t { contiguous, offset, sliced, transposed, expanded };
constexpr int kLayoutWeights[] = {40, 10, 20, 15, 15};

enum class ValueMode : uint8_t { zeros, ordinary, special };

struct TensorPlan {
  bool none = false;  // an optional tensor that is None
  DType dtype = DType::Float32;
  Device device;
  std::vector<int64_t> sizes;
  TensorLayout layout = TensorLayout::contiguous;
  int offset = 0;               // elements before the first, for TensorLayout::offset
  std::vector<double> values;   // the view's elements (row-major); the base's for expanded
};

struct ArgPlan {
  enum class Kind : uint8_t { value, tensor, tensor_list, optional_tensor_list };
  Kind kind = Kind::value;
  IValue value;  // never holds a tensor (Note [Plans, then tensors])
  std::vector<TensorPlan> tensors;
};

struct SamplePlan {
  std::vector<ArgPlan> args;
  DType dtype = DType::Float32;  // the sample's dtype and device (the first picks)
  Device device;
};

// ---- enum-like arguments: every value that applies ----

template <typename T>
void add_unique(std::vector<T>& v, const T& x) {
  if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
}

// A ScalarType argument: the argument's declared dtypes, else the op's, the sample's first.
std::vector<DType> scalar_type_values(DType sample_dtype, const std::vector<DType>& declared) {
  std::vector<DType> out;
  if (declared.empty() || std::find(declared.begin(), declared.end(), sample_dtype) != declared.end())
    out.push_back(sample_dtype);
  for (DType d : declared) add_unique(out, d);
  return out;
}

// A Device argument: the sample's device first, then the spec's others, then cpu (a factory on
// the host applies to every case). Not every device of the machine: a cpu case of a CPU-only
// library must not be fed cuda factories; GenerateSpec::devices says which devices are tried.
std::vector<Device> device_values(const GenerateSpec& spec, Device sample_device) {
  std::vector<Device> out = {sample_device};
  for (const Device& d : spec.devices) add_unique(out, d);
  add_unique(out, Device::cpu());
  return out;
}

// A MemoryFormat argument: contiguous and preserve, and the channels-last format of the first
// tensor's rank (4: channels_last, 5: channels_last_3d) — the others would be invalid inputs.
std::vector<MemoryFormat> memory_format_values(int first_tensor_rank) {
  std::vector<MemoryFormat> out = {MemoryFormat::Contiguous, MemoryFormat::Preserve};
  if (first_tensor_rank == 4) out.push_back(MemoryFormat::ChannelsLast);
  if (first_tensor_rank == 5) out.push_back(MemoryFormat::ChannelsLast3d);
  return out;
}

// The rank of the sample's first tensor argument (-1: none, or None).
int first_tensor_rank(const SamplePlan& plan) {
  for (const ArgPlan& a : plan.args)
    if (a.kind == ArgPlan::Kind::tensor && !a.tensors.empty())
      return a.tensors[0].none ? -1 : static_cast<int>(a.tensors[0].sizes.size());
  return -1;
}

// Note [The large tier]: GenerateSpec::large_percent of the samples are large: the first shape
// drawn (the first tensor argument's, or a builder's first draw.shape()) gets one dimension from
// kLargeSizes — powers of two, one less and one more, where vector widths, tiles and thresholds
// sit — while its other sizes are drawn as usual and made 1 where the element count would pass
// GenerateSpec::large_max_numel. Tensors related to it (same_shape, broadcastable) follow its
// shape. The tier is the sample's first pick, small first, so a failure that needs no large input
// shrinks out of it; one that does keeps it, and its large size shrinks to the smallest listed one
// that still fails, the other sizes to 1 — the smallest failing input of the tier.
constexpr int64_t kLargeSizes[] = {31,   32,   33,   63,   64,   65,   127,   128,   129,   255,  256,
                                   257,  511,  512,  513,  1023, 1024, 1025,  2047,  2048,  2049, 4095,
                                   4096, 4097, 8191, 8192, 8193, 65535, 65536, 65537};
constexpr int kLargeSizeCount = static_cast<int>(std::size(kLargeSizes));

// The sample's tier: 1 (large) for GenerateSpec::large_percent of the samples; 0, small, is the
// simpler choice and comes first.
rc::Gen<int> tier_gen(const GenerateSpec& spec) {
  return spec.large_percent > 0 ? choice({100 - spec.large_percent, spec.large_percent}) : rc::gen::just(0);
}

int64_t product(const std::vector<int64_t>& s) {
  return std::accumulate(s.begin(), s.end(), int64_t{1}, std::multiplies<>());
}

// Puts the large size at dim `at` of `sizes` (rank >= 1) and makes other dims min_size (at least
// 1), first to last, until the element count is at most max_numel; then caps the large size so
// that it is.
void make_large(std::vector<int64_t>& sizes, size_t at, int big, int64_t max_numel, int64_t min_size = 1) {
  sizes[at] = kLargeSizes[big];
  for (size_t d = 0; d < sizes.size() && product(sizes) > max_numel; ++d)
    if (d != at) sizes[d] = std::max<int64_t>(min_size, 1);
  const int64_t others = product(sizes) / sizes[at];
  sizes[at] = std::max<int64_t>(std::min(sizes[at], max_numel / std::max<int64_t>(others, 1)), std::max<int64_t>(min_size, 1));
}

// The raw picks of one tensor, resolved against what was generated before it.
struct TensorPicks {
  int none = 0, dtype = 0, rank = 0;
  std::vector<int> sizes;  // max_rank sizes; rank r takes the last r (dropping leading dims first)
  int empty = 0, empty_dim = 0;
  std::vector<int> broadcast;  // per dim: 0 the partner's size, 1 a size of 1
  int layout = 0, offset = 1, mode = 0;
  int big = 0, big_dim = 0;  // the large tier's size (index into kLargeSizes) and its dim
};

// What the generator knows about one tensor argument, fixed when the generator is built.
struct TensorSlot {
  std::string name;
  bool optional = false;
  std::vector<DType> dtypes;  // declared dtypes (empty: the sample's)
  int min_rank = 0, max_rank = 4;
  int max_dim_size = 5;
  bool allow_empty = true;
  std::vector<TensorLayout> layouts;  // allowed, simplest first
  ValueConstraint values;
  bool specials = true;
};

// The relations resolved for one pick. Shared copies, not pointers into the plan: RapidCheck
// re-evaluates a pick's generator after the plan it was made for is gone.
struct ShapeContext {
  std::shared_ptr<const std::vector<int64_t>> same_as;  // same_shape partner
  std::shared_ptr<const std::vector<int64_t>> broadcast_with;
  int64_t large_max_numel = 0;  // > 0: this tensor is the large tier's (Note [The large tier])
};

std::vector<int64_t> resolve_sizes(const TensorSlot& slot, const TensorPicks& p, const ShapeContext& ctx) {
  if (ctx.same_as) return *ctx.same_as;
  const int max_rank = static_cast<int>(p.sizes.size());
  std::vector<int64_t> sizes;
  for (int i = max_rank - p.rank; i < max_rank; ++i) sizes.push_back(p.sizes[i]);
  if (ctx.broadcast_with) {
    const auto& other = *ctx.broadcast_with;
    const int r = p.rank, q = static_cast<int>(other.size());
    for (int i = 0; i < r; ++i) {
      int j = i - (r - q);  // the partner's dim aligned with ours (from the right)
      if (j < 0) continue;
      if (p.broadcast[max_rank - r + i] == 0) sizes[i] = other[j];
      else if (other[j] != 1) sizes[i] = 1;
    }
    return sizes;  // an own empty dim would break broadcasting: emptiness comes from the partner
  }
  if (ctx.large_max_numel > 0 && p.rank > 0) {
    make_large(sizes, static_cast<size_t>(p.big_dim % p.rank), p.big, ctx.large_max_numel);
    return sizes;  // never empty: the point of the tier is many elements
  }
  if (p.empty && slot.allow_empty && p.rank > 0) sizes[p.empty_dim % p.rank] = 0;
  return sizes;
}

// The dim an expanded layout broadcasts: the first of size > 1 (none: the layout is contiguous).
std::optional<size_t> expanded_dim(const std::vector<int64_t>& sizes) {
  for (size_t d = 0; d < sizes.size(); ++d)
    if (sizes[d] > 1) return d;
  return std::nullopt;
}

// The elements a plan stores: an expanded view stores one slice (and a tensor with no dim to
// expand is contiguous instead).
int64_t stored_count(TensorPlan& plan) {
  int64_t count = product(plan.sizes);
  if (plan.layout == TensorLayout::expanded) {
    if (auto d = expanded_dim(plan.sizes)) count /= plan.sizes[*d];
    else plan.layout = TensorLayout::contiguous;
  }
  return count;
}

// The value mode a pick means: specials only where the dtype and the constraint have some.
ValueMode value_mode(int pick, DType dt, const ValueConstraint& vc, bool specials) {
  ValueMode mode = static_cast<ValueMode>(pick);
  if (mode == ValueMode::special && (!specials || special_values(dt, vc).empty())) mode = ValueMode::ordinary;
  return mode;
}

// Past this many elements a tensor's values are not one RapidCheck choice each (a large-tier
// tensor would cost a shrink tree per element): they come from one drawn seed and do not shrink.
// They are never all zeros (the small tier has those; a large all-zero tensor puts every element
// of a piecewise op on its kink, where a directional gradient check cannot judge), and floating
// ones are continuous rather than on the thousandths grid, so ties and kinks stay rare.
constexpr int64_t kSeededValuesAbove = 4096;

// `count` values from one drawn seed (no shrinking): element(bits) makes each from 64 random bits.
template <typename Element>
rc::Gen<std::vector<double>> seeded_values(int64_t count, Element element) {
  return rc::gen::map(rc::gen::noShrink(rc::gen::arbitrary<uint64_t>()), [count, element](uint64_t seed) {
    std::mt19937_64 bits(seed);
    std::vector<double> out(static_cast<size_t>(count));
    for (double& v : out) v = element(bits());
    return out;
  });
}

// `count` values in a mode: all "zero" (the simplest admitted value), ordinary ones, or ordinary
// ones mixed with special ones.
rc::Gen<std::vector<double>> values_gen(DType dt, const ValueConstraint& vc, ValueMode mode, int64_t count) {
  Range range = range_of(dt, vc);
  if (count > kSeededValuesAbove && mode == ValueMode::zeros) mode = ValueMode::ordinary;
  if (mode == ValueMode::zeros) return rc::gen::just(std::vector<double>(count, range.anchor));
  if (count > kSeededValuesAbove) {
    // 30% specials where the mode has them; else a continuous fraction (bits 11..63).
    std::vector<double> specials = mode == ValueMode::special ? special_values(dt, vc) : std::vector<double>{};
    const bool integral = !is_float_like(dt);
    return seeded_values(count, [range, integral, specials](uint64_t r) {
      if (!specials.empty() && r % 100 < 30) return specials[(r >> 8) % specials.size()];
      return ordinary_at(range, integral, (r >> 10) & 1, static_cast<double>(r >> 11) * 0x1p-53);
    });
  }
  rc::Gen<double> element = ordinary_value(dt, range);
  if (mode == ValueMode::special) {
    element = rc::gen::mapcat(choice({70, 30}), [element, specials = special_values(dt, vc)](int special) {
      return special ? rc::gen::elementOf(specials) : element;
    });
  }
  return rc::gen::container<std::vector<double>>(count, element);
}

rc::Gen<TensorPlan> tensor_gen(std::shared_ptr<const TensorSlot> slot, std::vector<DType> dtype_options, Device device,
                               ShapeContext ctx) {
  const int max_rank = slot->max_rank;
  const bool large = ctx.large_max_numel > 0 && max_rank >= 1 && !ctx.same_as && !ctx.broadcast_with;
  if (!large) ctx.large_max_numel = 0;
  const int min_rank = large ? std::max(slot->min_rank, 1) : slot->min_rank;
  std::vector<int> layout_weights;
  for (auto l : slot->layouts) layout_weights.push_back(kLayoutWeights[static_cast<int>(l)]);
  auto structure = rc::gen::build<TensorPicks>(
      rc::gen::set(&TensorPicks::none, slot->optional && !large ? choice({85, 15}) : rc::gen::just(0)),
      rc::gen::set(&TensorPicks::dtype, choice(std::vector<int>(dtype_options.size(), 1))),
      rc::gen::set(&TensorPicks::rank, rc::gen::resize(kFullSize, rc::gen::inRange(min_rank, max_rank + 1))),
      rc::gen::set(&TensorPicks::sizes,
                   rc::gen::container<std::vector<int>>(
                       max_rank, rc::gen::resize(kFullSize, rc::gen::inRange(1, slot->max_dim_size + 1)))),
      rc::gen::set(&TensorPicks::empty, choice({92, 8})),
      rc::gen::set(&TensorPicks::empty_dim, rc::gen::resize(kFullSize, rc::gen::inRange(0, std::max(max_rank, 1)))),
      rc::gen::set(&TensorPicks::broadcast, rc::gen::container<std::vector<int>>(max_rank, choice({60, 40}))),
      rc::gen::set(&TensorPicks::layout, choice(layout_weights)),
      rc::gen::set(&TensorPicks::offset, rc::gen::inRange(1, 4)),
      rc::gen::set(&TensorPicks::mode, choice({5, 75, 20})),
      rc::gen::set(&TensorPicks::big, large ? rc::gen::resize(kFullSize, rc::gen::inRange(0, kLargeSizeCount))
                                            : rc::gen::just(0)),
      rc::gen::set(&TensorPicks::big_dim, large ? rc::gen::resize(kFullSize, rc::gen::inRange(0, max_rank))
                                                : rc::gen::just(0)));
  return rc::gen::mapcat(structure, [slot, dtype_options, device, ctx](const TensorPicks& p) -> rc::Gen<TensorPlan> {
    TensorPlan plan;
    if (p.none) {
      plan.none = true;
      return rc::gen::just(plan);
    }
    plan.dtype = dtype_options[p.dtype];
    plan.device = device;
    plan.sizes = resolve_sizes(*slot, p, ctx);
    plan.layout = slot->layouts[p.layout];
    plan.offset = p.offset;
    const int64_t count = stored_count(plan);
    const ValueMode mode = value_mode(p.mode, plan.dtype, slot->values, slot->specials);
    return rc::gen::map(values_gen(plan.dtype, slot->values, mode, count), [plan](std::vector<double> v) {
      TensorPlan out = plan;
      out.values = std::move(v);
      return out;
    });
  });
}

// ---- materializing a plan ----

Tensor make_tensor_from(const TensorPlan& p) {
  const TensorOptions options(p.dtype, p.device);
  const std::vector<int64_t>& sizes = p.sizes;
  Tensor base, view;
  bool holes = false;  // memory the view does not cover
  switch (p.layout) {
    case TensorLayout::contiguous:
      base = view = empty(sizes, options);
      break;
    case TensorLayout::offset: {
      base = empty({product(sizes) + p.offset}, options);
      auto strides = contiguous_strides(sizes);
      view = base.as_strided(sizes, strides, p.offset);
      holes = true;
      break;
    }
    case TensorLayout::sliced: {
      std::vector<int64_t> doubled = sizes;
      for (auto& s : doubled) s *= 2;
      base = view = empty(doubled, options);
      for (size_t d = 0; d < sizes.size(); ++d) view = view.slice(static_cast<int64_t>(d), 0, std::nullopt, 2);
      holes = true;
      break;
    }
    case TensorLayout::transposed: {
      std::vector<int64_t> reversed(sizes.rbegin(), sizes.rend()), dims;
      for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) dims.push_back(d);
      base = empty(reversed, options);
      view = base.permute(dims);
      break;
    }
    case TensorLayout::expanded: {
      std::vector<int64_t> base_sizes = sizes;
      base_sizes[*expanded_dim(sizes)] = 1;
      base = empty(base_sizes, options);
      base.copy_(from_vector(p.values, base_sizes));
      return base.expand(sizes);
    }
  }
  // A sentinel no ordinary value takes, so that reading a hole changes a result.
  if (holes) base.fill_(p.dtype == DType::Bool ? Scalar(true) : Scalar(int64_t{77}));
  view.copy_(from_vector(p.values, sizes));
  return view;
}

IValue materialize(const ArgPlan& a) {
  switch (a.kind) {
    case ArgPlan::Kind::value: return a.value;
    case ArgPlan::Kind::tensor:
      return a.tensors.front().none ? IValue() : IValue(make_tensor_from(a.tensors.front()));
    case ArgPlan::Kind::tensor_list: {
      std::vector<Tensor> ts;
      for (const auto& t : a.tensors) ts.push_back(make_tensor_from(t));
      return IValue(std::move(ts));
    }
    case ArgPlan::Kind::optional_tensor_list: {
      std::vector<std::optional<Tensor>> ts;
      for (const auto& t : a.tensors) ts.push_back(t.none ? std::nullopt : std::optional<Tensor>(make_tensor_from(t)));
      return IValue(std::move(ts));
    }
  }
  return IValue();
}

// ---- the generator of a whole sample ----


// GenerateSpec::requires_grad: floating and complex tensors of the arguments the schema does not
// write become leaves that require grad.
void require_grad(Stack& args, const FunctionSchema& schema) {
  for (size_t i = 0; i < args.size() && i < schema.arguments.size(); ++i) {
    if (schema.arguments[i].is_write()) continue;
    for (const Tensor& t : tensors_in(args[i])) {
      if (is_floating(t.dtype()) || is_complex(t.dtype())) t.set_requires_grad(true);
    }
  }
}

struct Generator {
  FunctionSchema schema;
  InputConstraints constraints;
  GenerateSpec spec;
  std::vector<DType> sample_dtypes;
  std::vector<DType> op_dtypes;  // every dtype the op accepts (ScalarType arguments take them)
  std::vector<std::string> names;
  std::vector<size_t> order;  // tensors first, then the rest (each in schema order)
  std::vector<std::shared_ptr<const TensorSlot>> slots;  // per argument; null for non-tensors

  bool is_tensorish(const Argument& a) const { return a.type.base_kind() == TypeKind::kTensor; }

  // A relation partner already generated (earlier in `order`), as an index.
  std::optional<size_t> partner(RelationKind kind, size_t i, const std::vector<bool>& done) const {
    for (const auto& r : constraints.relations) {
      if (r.kind != kind) continue;
      const std::string& me = names[i];
      const std::string* other = r.a == me ? &r.b : r.b == me ? &r.a : nullptr;
      if (!other || other->empty()) continue;
      if (auto j = schema.argument_index(*other); j && done[*j]) return *j;
    }
    return std::nullopt;
  }
  // The tensor b of a relation (kind, names[i], b), when generated.
  const TensorPlan* related_tensor(RelationKind kind, size_t i, const SamplePlan& plan) const {
    for (const auto& r : constraints.relations) {
      if (r.kind != kind || r.a != names[i]) continue;
      if (auto j = schema.argument_index(r.b); j && plan.args[*j].kind == ArgPlan::Kind::tensor &&
                                               !plan.args[*j].tensors.empty() && !plan.args[*j].tensors[0].none)
        return &plan.args[*j].tensors[0];
      return nullptr;
    }
    return nullptr;
  }

  std::shared_ptr<const TensorSlot> make_slot(size_t i) const {
    const Argument& a = schema.arguments[i];
    const ArgConstraint& c = constraints.for_arg(a.name);
    auto slot = std::make_shared<TensorSlot>();
    slot->name = a.name;
    slot->optional = a.type.is_optional() && c.allow_none;
    slot->dtypes = c.dtypes;
    slot->min_rank = std::max(c.min_rank, spec.include_scalars ? 0 : 1);
    slot->max_rank = c.max_rank.value_or(spec.max_rank);
    if (slot->min_rank > slot->max_rank) {
      throw Error(ErrorCode::kInvalidArgument, concat("argument '", a.name, "': no rank in [", slot->min_rank, ", ",
                                                      slot->max_rank, "] (include_scalars and the constraint)"));
    }
    slot->max_dim_size = spec.max_dim_size;
    slot->allow_empty = spec.include_empty && !constraints.has(RelationKind::size_positive, a.name);
    slot->layouts = {TensorLayout::contiguous};
    if (spec.include_non_contiguous) {
      slot->layouts.insert(slot->layouts.end(), {TensorLayout::offset, TensorLayout::sliced, TensorLayout::transposed});
      // Writing through a stride-0 view is ill-defined: mutable inputs are never expanded.
      if (!schema.is_mutable(i)) slot->layouts.push_back(TensorLayout::expanded);
    }
    slot->values = c.values;
    slot->specials = spec.include_special_values;
    return slot;
  }

  // The dtypes a tensor may take: its declared ones (those of the spec first), else the
  // sample's; a same_dtype partner's when one was generated.
  std::vector<DType> dtype_options(size_t i, DType sample_dtype, const SamplePlan& plan, const std::vector<bool>& done) const {
    if (auto j = partner(RelationKind::same_dtype, i, done)) {
      for (const auto& t : plan.args[*j].tensors)
        if (!t.none) return {t.dtype};
    }
    const auto& declared = slots[i]->dtypes;
    if (declared.empty()) return {sample_dtype};
    if (std::find(declared.begin(), declared.end(), sample_dtype) != declared.end()) return {sample_dtype};
    std::vector<DType> out;
    for (DType d : declared)
      if (std::find(spec.dtypes.begin(), spec.dtypes.end(), d) != spec.dtypes.end()) out.push_back(d);
    return out.empty() ? declared : out;
  }

  rc::Gen<ArgPlan> tensor_arg_gen(size_t i, DType sample_dtype, Device device, const SamplePlan& plan,
                                  const std::vector<bool>& done, bool large) const {
    const Argument& a = schema.arguments[i];
    auto options = dtype_options(i, sample_dtype, plan, done);
    ShapeContext ctx;
    auto shape_of = [&](size_t j) -> std::shared_ptr<const std::vector<int64_t>> {
      const auto& ts = plan.args[j].tensors;
      return ts.empty() || ts[0].none ? nullptr : std::make_shared<const std::vector<int64_t>>(ts[0].sizes);
    };
    if (auto j = partner(RelationKind::same_shape, i, done)) ctx.same_as = shape_of(*j);
    if (auto j = partner(RelationKind::broadcastable, i, done); j && !ctx.same_as) ctx.broadcast_with = shape_of(*j);
    if (large) ctx.large_max_numel = spec.large_max_numel;
    auto one = tensor_gen(slots[i], options, device, ctx);
    const Type& t = a.type.is_optional() ? a.type.elem() : a.type;
    if (!t.is_list()) {
      return rc::gen::map(one, [](TensorPlan p) {
        ArgPlan out;
        out.kind = ArgPlan::Kind::tensor;
        out.tensors = {std::move(p)};
        return out;
      });
    }
    // Tensor[] / Tensor?[]: 1 to 3 tensors (a fixed N when declared), all of the first one's
    // shape under elements_same_shape.
    const bool optional_elements = t.elem().is_optional();
    auto slot = slots[i];
    auto element_slot = std::make_shared<TensorSlot>(*slot);
    element_slot->optional = optional_elements;
    const bool same = constraints.has(RelationKind::elements_same_shape, a.name);
    rc::Gen<int> length = t.size() ? rc::gen::just(static_cast<int>(*t.size())) : rc::gen::inRange(1, 4);
    auto first_gen = tensor_gen(element_slot, options, device, ctx);
    return rc::gen::mapcat(length, [=](int n) {
      return rc::gen::mapcat(first_gen, [=](TensorPlan first) {
        ShapeContext rest_ctx = ctx;
        rest_ctx.large_max_numel = 0;  // one large tensor per sample
        if (same && !first.none) rest_ctx.same_as = std::make_shared<const std::vector<int64_t>>(first.sizes);
        auto rest = tensor_gen(element_slot, options, device, rest_ctx);
        return rc::gen::map(rc::gen::container<std::vector<TensorPlan>>(n - 1, rest),
                            [first, optional_elements](std::vector<TensorPlan> others) {
                              ArgPlan out;
                              out.kind = optional_elements ? ArgPlan::Kind::optional_tensor_list : ArgPlan::Kind::tensor_list;
                              out.tensors.push_back(first);
                              for (auto& o : others) out.tensors.push_back(std::move(o));
                              return out;
                            });
      });
    });
  }

  // Integers for int and int[] arguments: a dim of the related tensor, or a range.
  rc::Gen<int64_t> int_element_gen(size_t i, const SamplePlan& plan, bool is_shape) const {
    const Argument& a = schema.arguments[i];
    if (const TensorPlan* t = related_tensor(RelationKind::dim_in_range, i, plan); t || constraints.has(RelationKind::dim_in_range, a.name)) {
      const int64_t rank = t ? static_cast<int64_t>(t->sizes.size()) : 0;
      const int64_t hi = std::max<int64_t>(rank, 1);
      return int_in(-hi, hi - 1);
    }
    const ValueConstraint& vc = constraints.for_arg(a.name).values;
    const bool positive = vc.positive || constraints.has(RelationKind::size_positive, a.name) || is_shape;
    int64_t lo = vc.min ? static_cast<int64_t>(std::ceil(*vc.min)) : 0;
    int64_t hi = vc.max ? static_cast<int64_t>(std::floor(*vc.max)) : std::max<int64_t>(lo, 0) + spec.max_dim_size;
    if (positive) lo = std::max<int64_t>(lo, 1);
    if (lo > hi) throw Error(ErrorCode::kInvalidArgument, concat("argument '", a.name, "': no integer satisfies its constraint"));
    return int_in(lo, hi);
  }

  rc::Gen<double> float_gen(size_t i) const {
    const ValueConstraint& vc = constraints.for_arg(schema.arguments[i].name).values;
    Range r = range_of(DType::Float64, vc);
    auto ordinary = ordinary_value(DType::Float64, r);
    auto specials = spec.include_special_values ? special_values(DType::Float64, vc) : std::vector<double>{};
    if (specials.empty()) return ordinary;
    return rc::gen::mapcat(choice({90, 10}), [ordinary, specials](int s) {
      return s ? rc::gen::elementOf(specials) : ordinary;
    });
  }

  rc::Gen<IValue> list_length_then(size_t i, const SamplePlan& plan, const Type& t,
                                   std::function<rc::Gen<IValue>(int)> make) const {
    if (t.size()) return make(static_cast<int>(*t.size()));
    if (constraints.has(RelationKind::list_length_equals_rank, schema.arguments[i].name)) {
      const TensorPlan* tp = related_tensor(RelationKind::list_length_equals_rank, i, plan);
      return make(tp ? static_cast<int>(tp->sizes.size()) : 0);
    }
    return rc::gen::mapcat(rc::gen::inRange(0, spec.max_rank + 1), make);
  }

  // The value of a non-tensor type (not optional: optionals are handled by the caller).
  rc::Gen<IValue> value_gen(size_t i, const Type& t, const SamplePlan& plan) const {
    const Argument& a = schema.arguments[i];
    auto to_ivalue_gen = [](auto g) { return rc::gen::map(g, [](auto v) { return IValue(v); }); };
    switch (t.kind()) {
      case TypeKind::kInt:
      case TypeKind::kSymInt: return to_ivalue_gen(int_element_gen(i, plan, false));
      case TypeKind::kFloat: return to_ivalue_gen(float_gen(i));
      case TypeKind::kBool: return rc::gen::map(choice({1, 1}), [](int b) { return IValue(b == 1); });
      case TypeKind::kComplex:
        return rc::gen::map(rc::gen::tuple(float_gen(i), float_gen(i)), [](const std::tuple<double, double>& c) {
          return IValue(complex128(std::get<0>(c), std::get<1>(c)));
        });
      case TypeKind::kScalar: {
        rc::Gen<int64_t> ints = int_element_gen(i, plan, false);
        rc::Gen<double> floats = float_gen(i);
        return rc::gen::mapcat(choice({50, 40, 10}), [=](int kind) -> rc::Gen<IValue> {
          if (kind == 0) return rc::gen::map(ints, [](int64_t v) { return IValue(v); });
          if (kind == 1) return rc::gen::map(floats, [](double v) { return IValue(v); });
          return rc::gen::map(choice({1, 1}), [](int b) { return IValue(b == 1); });
        });
      }
      case TypeKind::kScalarType: {
        const auto& own = constraints.for_arg(a.name).dtypes;
        auto dtypes = scalar_type_values(plan.dtype, own.empty() ? op_dtypes : own);
        return rc::gen::map(choice(std::vector<int>(dtypes.size(), 1)), [dtypes](int k) { return IValue(dtypes[k]); });
      }
      case TypeKind::kDevice: {
        auto devices = device_values(spec, plan.device);
        return rc::gen::map(choice(std::vector<int>(devices.size(), 1)), [devices](int k) { return IValue(devices[k]); });
      }
      // Strided is the one layout the operator model implements.
      case TypeKind::kLayout: return rc::gen::just(IValue(Layout::Strided));
      case TypeKind::kMemoryFormat: {
        auto formats = memory_format_values(first_tensor_rank(plan));
        return rc::gen::map(choice(std::vector<int>(formats.size(), 1)), [formats](int k) { return IValue(formats[k]); });
      }
      case TypeKind::kStr: return rc::gen::just(IValue(std::string()));
      case TypeKind::kList: {
        const Type& e = t.elem();
        if (e.kind() == TypeKind::kInt || e.kind() == TypeKind::kSymInt) {
          auto element = int_element_gen(i, plan, !constraints.has(RelationKind::dim_in_range, a.name));
          return list_length_then(i, plan, t, [element](int n) {
            return rc::gen::map(rc::gen::container<std::vector<int64_t>>(n, element), [](std::vector<int64_t> v) { return IValue(std::move(v)); });
          });
        }
        if (e.kind() == TypeKind::kFloat) {
          auto element = float_gen(i);
          return list_length_then(i, plan, t, [element](int n) {
            return rc::gen::map(rc::gen::container<std::vector<double>>(n, element), [](std::vector<double> v) { return IValue(std::move(v)); });
          });
        }
        if (e.kind() == TypeKind::kBool) {
          return list_length_then(i, plan, t, [](int n) {
            return rc::gen::map(rc::gen::container<std::vector<int>>(n, choice({1, 1})), [](const std::vector<int>& v) {
              return IValue(std::vector<bool>(v.begin(), v.end()));
            });
          });
        }
        break;
      }
      default: break;
    }
    throw Error(ErrorCode::kInvalidArgument, concat("cannot generate argument '", a.name, "' of type ", t.to_string(),
                                                    " of ", schema.full_name(), ": give it a default"));
  }

  rc::Gen<ArgPlan> other_arg_gen(size_t i, const SamplePlan& plan) const {
    const Argument& a = schema.arguments[i];
    const ArgConstraint& c = constraints.for_arg(a.name);
    rc::Gen<IValue> g = [&]() -> rc::Gen<IValue> {
      if (!a.type.is_optional()) return value_gen(i, a.type, plan);
      // `T?`: None is the simplest choice (unless the constraint forbids it); a Generator is
      // only ever None.
      if (a.type.elem().kind() == TypeKind::kGenerator) return rc::gen::just(IValue());
      auto inner = value_gen(i, a.type.elem(), plan);
      if (!c.allow_none) return inner;
      return rc::gen::mapcat(choice({20, 80}), [inner](int some) { return some ? inner : rc::gen::just(IValue()); });
    }();
    // An argument with a default takes it as the simplest choice.
    if (auto d = default_ivalue(a)) {
      IValue dv = *d;
      g = rc::gen::mapcat(choice({25, 75}), [g, dv](int generated) { return generated ? g : rc::gen::just(dv); });
    }
    return rc::gen::map(g, [](IValue v) {
      ArgPlan out;
      out.value = std::move(v);
      return out;
    });
  }

  SamplePlan generate() const {
    SamplePlan plan;
    plan.args.resize(schema.arguments.size());
    std::vector<bool> done(schema.arguments.size(), false);
    const auto first = *rc::gen::tuple(tier_gen(spec), choice(std::vector<int>(sample_dtypes.size(), 1)),
                                       choice(std::vector<int>(spec.devices.size(), 1)));
    const bool large = std::get<0>(first) == 1;
    plan.dtype = sample_dtypes[std::get<1>(first)];
    plan.device = spec.devices[std::get<2>(first)];
    for (size_t i : order) {
      const bool first_tensor = slots[i] && i == order.front();
      plan.args[i] = slots[i] ? *tensor_arg_gen(i, plan.dtype, plan.device, plan, done, large && first_tensor)
                              : *other_arg_gen(i, plan);
      done[i] = true;
    }
    return plan;
  }

  Sample materialize(const SamplePlan& plan) const {
    Stack args;
    args.reserve(plan.args.size());
    for (const auto& a : plan.args) args.push_back(conformance::materialize(a));
    if (spec.requires_grad) require_grad(args, schema);
    std::string d = describe(args, names);
    return Sample(std::move(args), std::move(d));
  }
};

void validate_spec(const GenerateSpec& spec) {
  OPCONFORM_CHECK(!spec.devices.empty(), ErrorCode::kInvalidArgument, "GenerateSpec::devices is empty");
  OPCONFORM_CHECK(spec.large_percent >= 0 && spec.large_percent <= 100 &&
                      (spec.large_percent == 0 || spec.large_max_numel >= 1),
                  ErrorCode::kInvalidArgument,
                  "GenerateSpec needs 0 <= large_percent <= 100 and large_max_numel >= 1 when the large tier is on");
  OPCONFORM_CHECK(spec.max_rank >= 0 && spec.max_dim_size >= 1, ErrorCode::kInvalidArgument,
                  "GenerateSpec needs max_rank >= 0 and max_dim_size >= 1");
}

// The sample dtypes: the spec's, else the op's declared ones, else float32 and float64.
std::vector<DType> op_dtypes_of(const std::vector<DType>& declared) {
  return declared.empty() ? std::vector<DType>{DType::Float32, DType::Float64} : declared;
}
std::vector<DType> sample_dtypes_of(const GenerateSpec& spec, const std::vector<DType>& declared) {
  return spec.dtypes.empty() ? op_dtypes_of(declared) : spec.dtypes;
}

std::shared_ptr<const Generator> make_generator(const FunctionSchema& schema, const InputConstraints& constraints,
                                                const GenerateSpec& spec) {
  validate_constraints(schema, constraints);
  validate_spec(spec);
  auto g = std::make_shared<Generator>();
  g->schema = schema;
  g->constraints = constraints;
  g->spec = spec;
  g->sample_dtypes = sample_dtypes_of(spec, constraints.dtypes);
  g->op_dtypes = op_dtypes_of(constraints.dtypes);
  g->slots.resize(schema.arguments.size());
  for (size_t i = 0; i < schema.arguments.size(); ++i) {
    g->names.push_back(schema.arguments[i].name);
    if (g->is_tensorish(schema.arguments[i])) {
      g->slots[i] = g->make_slot(i);
      g->order.push_back(i);
    }
  }
  for (size_t i = 0; i < schema.arguments.size(); ++i)
    if (!g->slots[i]) g->order.push_back(i);
  // Fail now, not in the middle of a run, for types that cannot be generated and bad ranges.
  SamplePlan empty_plan;
  empty_plan.args.resize(schema.arguments.size());
  for (size_t i = 0; i < schema.arguments.size(); ++i) {
    if (!g->slots[i]) (void)g->other_arg_gen(i, empty_plan);
    else {
      for (DType d : g->sample_dtypes) (void)range_of(d, g->slots[i]->values);
      for (DType d : g->slots[i]->dtypes) (void)range_of(d, g->slots[i]->values);
    }
  }
  return g;
}

rc::Gen<SamplePlan> plan_gen(std::shared_ptr<const Generator> g) {
  return rc::gen::exec([g]() { return g->generate(); });
}

// ---- sample builders ----
//
// Note [Builder plans]: a builder's plan is the list of its draws as plain data (a tensor as its
// TensorPlan); materializing re-runs the builder on them, which makes new tensors (Note [Plans,
// then tensors]). While drawing, each draw is a RapidCheck Shrinkable (a Choice) keyed by what
// was asked (the range, the sizes...). A shrink replaces one choice by one of its shrinks and
// re-runs the builder, which takes every other choice back where the same thing is asked at the
// same position (else a fresh one, from that position's random). Unlike gen::exec, which
// regenerates the draws after a shrunk one and never revisits those before it, this keeps what
// was shrunk: a tensor is two choices, its style (layout, value mode) and its values, so that a
// non-contiguous layout survives its shape shrinking.

struct TensorStyle {
  int layout = 0;  // index into the allowed layouts, simplest first
  int offset = 1;
  int mode = 0;  // ValueMode
};

using Drawn = std::variant<int64_t, double, bool, DType, std::vector<int64_t>, TensorPlan>;
using ChoiceValue = std::variant<int64_t, double, bool, DType, std::vector<int64_t>, TensorStyle, std::vector<double>>;

struct Choice {
  std::string key;  // what was asked
  rc::Shrinkable<ChoiceValue> value;
};
using Choices = std::vector<Choice>;

struct BuilderPlan {
  Device device;
  bool large = false;  // the large tier (Note [The large tier])
  std::vector<Drawn> draws;
  std::optional<Error> error;  // the builder failed while drawing; materializing throws it
};

// The state of one drawing run.
struct Drawing {
  const Choices* given;  // the choices to take back where they fit
  rc::Random random;     // split once per position, as gen::exec does
  int size;
  Choices made;

  // The choice at the next position: the given one when it was asked the same, else a fresh
  // one from make_gen(), a Gen<T>.
  template <typename T, typename MakeGen>
  T choose(std::string key, MakeGen make_gen) {
    const rc::Random r = random.split();
    const size_t at = made.size();
    const bool fits = given && at < given->size() && (*given)[at].key == key;
    rc::Shrinkable<ChoiceValue> value =
        fits ? (*given)[at].value
             : rc::gen::map(rc::Gen<T>(make_gen()), [](T v) { return ChoiceValue(std::in_place_type<T>, std::move(v)); })(r, size);
    made.push_back({std::move(key), value});
    return std::get<T>(value.value());
  }
};

// A key naming a request exactly: each part and ':', doubles in hex as std::hexfloat writes them
// (Note [concat without a stream]: a key is made for every draw).
template <typename... Args>
std::string key_of(const Args&... args) {
  std::string key;
  auto add = [&key](const auto& part) {
    if constexpr (std::is_floating_point_v<std::decay_t<decltype(part)>>) {
      double v = static_cast<double>(part);
      if (std::signbit(v) && !std::isnan(v)) key.push_back('-'), v = -v;
      if (std::isfinite(v)) key.append("0x");
      char buffer[40];
      key.append(buffer, std::to_chars(buffer, buffer + sizeof buffer, v, std::chars_format::hex).ptr);
    } else {
      opconform::detail::append_part(key, part);
    }
    key.push_back(':');
  };
  (add(args), ...);
  return key;
}

std::string key_of_constraint(const ValueConstraint& vc) {
  return key_of(vc.min.value_or(-INFINITY), vc.max.value_or(INFINITY), vc.positive, vc.allow_nan, vc.allow_inf);
}

// Draws (drawing != null: recording into `record`) or replays (`replay`, in order) a builder's draws.
class BuilderDraw final : public SampleDraw {
 public:
  BuilderDraw(const GenerateSpec& spec, const std::vector<DType>& sample_dtypes, Device device, bool large,
              Drawing* drawing, std::vector<Drawn>* record, const std::vector<Drawn>* replay)
      : spec_(spec), sample_dtypes_(sample_dtypes), device_(device), large_(large), drawing_(drawing), record_(record),
        replay_(replay) {}

  int64_t integer(int64_t lo, int64_t hi) override {
    OPCONFORM_CHECK(lo <= hi && lo > std::numeric_limits<int64_t>::min() && hi < std::numeric_limits<int64_t>::max(),
                    ErrorCode::kInvalidArgument, "integer(", lo, ", ", hi, "): an empty range (or int64's extremes)");
    return next<int64_t>("integer", key_of("i", lo, hi), [&] { return rc::gen::resize(kFullSize, int_in(lo, hi)); });
  }

  bool coin(int percent_true) override {
    const int p = std::clamp(percent_true, 0, 100);
    return next<bool>("coin", key_of("c", p), [&] {
      return rc::gen::map(choice({100 - p, p}), [](int k) { return k == 1; });
    });
  }

  double real(double lo, double hi) override {
    OPCONFORM_CHECK(std::isfinite(lo) && std::isfinite(hi) && lo <= hi, ErrorCode::kInvalidArgument, "real(", lo, ", ",
                    hi, "): needs finite lo <= hi");
    return next<double>("real", key_of("r", lo, hi),
                        [&] { return ordinary_value(DType::Float64, Range{lo, hi, false, std::clamp(0.0, lo, hi)}); });
  }

  DType dtype(const std::vector<DType>& allowed) override {
    std::vector<DType> options;
    for (DType d : allowed)
      if (std::find(spec_.dtypes.begin(), spec_.dtypes.end(), d) != spec_.dtypes.end()) options.push_back(d);
    if (options.empty()) options = allowed.empty() ? sample_dtypes_ : allowed;
    std::string key = "d:";
    for (DType d : options) key += key_of(static_cast<int>(d));
    return next<DType>("dtype", key, [&] {
      return rc::gen::map(choice(std::vector<int>(options.size(), 1)), [options](int k) { return options[k]; });
    });
  }

  std::vector<int64_t> shape(int min_rank, int max_rank, int64_t min_size, bool allow_empty) override {
    OPCONFORM_CHECK(0 <= min_rank && min_rank <= max_rank && min_size >= 0, ErrorCode::kInvalidArgument, "shape(",
                    min_rank, ", ", max_rank, ", ", min_size, "): needs 0 <= min_rank <= max_rank and min_size >= 0");
    if (!spec_.include_scalars && min_rank == 0 && max_rank > 0) min_rank = 1;
    max_rank = std::max(min_rank, std::min(max_rank, spec_.max_rank));
    const int64_t max_size = std::max<int64_t>(min_size, spec_.max_dim_size);
    if (large_ && max_rank >= 1) {
      large_ = false;  // the first shape only
      return large_shape(std::max(min_rank, 1), max_rank, min_size, max_size);
    }
    const bool empty = allow_empty && spec_.include_empty;
    return next<std::vector<int64_t>>("shape", key_of("s", min_rank, max_rank, min_size, max_size, empty), [&] {
      // As tensor_gen's picks: max_rank sizes, rank r takes the last r (leading dims drop first).
      auto picks = rc::gen::tuple(
          rc::gen::resize(kFullSize, rc::gen::inRange(min_rank, max_rank + 1)),
          rc::gen::container<std::vector<int64_t>>(
              max_rank, rc::gen::resize(kFullSize, rc::gen::inRange<int64_t>(min_size, max_size + 1))),
          empty ? choice({92, 8}) : rc::gen::just(0), rc::gen::resize(kFullSize, rc::gen::inRange(0, std::max(max_rank, 1))));
      return rc::gen::map(picks, [](const std::tuple<int, std::vector<int64_t>, int, int>& t) {
        const auto& [rank, sizes, empty_pick, empty_dim] = t;
        std::vector<int64_t> out(sizes.end() - rank, sizes.end());
        if (empty_pick && rank > 0) out[empty_dim % rank] = 0;
        return out;
      });
    });
  }

  int64_t size(bool allow_empty) override {
    if (allow_empty && spec_.include_empty && coin(10)) return 0;
    return integer(1, std::max<int64_t>(1, spec_.max_dim_size));
  }

  Device device_value() override {
    auto devices = device_values(spec_, device_);
    return devices[static_cast<size_t>(integer(0, static_cast<int64_t>(devices.size()) - 1))];
  }

  Tensor tensor(const std::vector<int64_t>& sizes, DType dtype, const ValueConstraint& values,
                bool mutable_input) override {
    return tensor_draw("tensor", sizes, dtype, values, spec_.include_special_values, !mutable_input);
  }

  Tensor index_tensor(const std::vector<int64_t>& sizes, int64_t lo, int64_t hi) override {
    const bool empty = std::find(sizes.begin(), sizes.end(), 0) != sizes.end();
    OPCONFORM_CHECK(lo <= hi || empty, ErrorCode::kInvalidArgument, "index_tensor: no index in [", lo, ", ", hi,
                    "] for a non-empty tensor");
    OPCONFORM_CHECK(lo > std::numeric_limits<int64_t>::min() && hi < std::numeric_limits<int64_t>::max(),
                    ErrorCode::kInvalidArgument, "index_tensor: int64's extremes are not indices");
    hi = std::max(lo, hi);  // an empty tensor has no values to constrain
    ValueConstraint vc;
    vc.min = static_cast<double>(lo);
    vc.max = static_cast<double>(hi);
    vc.allow_nan = vc.allow_inf = false;
    return tensor_draw("index_tensor", sizes, DType::Int64, vc, false, true, std::pair{lo, hi});
  }

  // Replaying: every recorded draw was used.
  void finish() const {
    OPCONFORM_CHECK(!replay_ || used_ == replay_->size(), ErrorCode::kInvalidArgument, "it drew ", used_,
                    " values where ", replay_->size(), " were recorded: a builder must be a pure function of its draws");
  }

 private:
  // A shape of the large tier: sizes as shape() draws them, one of them from kLargeSizes.
  std::vector<int64_t> large_shape(int min_rank, int max_rank, int64_t min_size, int64_t max_size) {
    const int64_t max_numel = spec_.large_max_numel;
    return next<std::vector<int64_t>>("shape", key_of("large", min_rank, max_rank, min_size, max_size, max_numel), [&] {
      auto picks = rc::gen::tuple(
          rc::gen::resize(kFullSize, rc::gen::inRange(min_rank, max_rank + 1)),
          rc::gen::container<std::vector<int64_t>>(
              max_rank, rc::gen::resize(kFullSize, rc::gen::inRange<int64_t>(min_size, max_size + 1))),
          rc::gen::resize(kFullSize, rc::gen::inRange(0, kLargeSizeCount)),
          rc::gen::resize(kFullSize, rc::gen::inRange(0, max_rank)));
      return rc::gen::map(picks, [max_numel, min_size](const std::tuple<int, std::vector<int64_t>, int, int>& t) {
        const auto& [rank, sizes, big, big_dim] = t;
        std::vector<int64_t> out(sizes.end() - rank, sizes.end());
        make_large(out, static_cast<size_t>(big_dim % rank), big, max_numel, min_size);
        return out;
      });
    });
  }

  // The next recorded draw, when replaying.
  template <typename T>
  const T& replayed(const char* what) {
    OPCONFORM_CHECK(used_ < replay_->size() && std::holds_alternative<T>((*replay_)[used_]), ErrorCode::kInvalidArgument,
                    "its draw ", used_ + 1, " (", what, ") is not the recorded one: a builder must be a pure function "
                    "of its draws");
    return std::get<T>((*replay_)[used_++]);
  }

  // A draw whose choice is its value. make_gen is only called for a fresh choice.
  template <typename T, typename MakeGen>
  T next(const char* what, std::string key, MakeGen make_gen) {
    if (!drawing_) return replayed<T>(what);
    T v = drawing_->choose<T>(std::move(key), make_gen);
    record_->emplace_back(std::in_place_type<T>, v);
    return v;
  }

  // indices: values uniform over [lo, hi] (every index, the last included, from the first
  // samples on), shrinking toward the one closest to 0.
  Tensor tensor_draw(const char* what, const std::vector<int64_t>& sizes, DType dtype, const ValueConstraint& values,
                     bool specials, bool expandable, std::optional<std::pair<int64_t, int64_t>> indices = {}) {
    for (int64_t s : sizes) OPCONFORM_CHECK(s >= 0, ErrorCode::kInvalidArgument, what, ": a negative size ", s);
    (void)range_of(dtype, values);  // an unsatisfiable constraint throws here
    if (!drawing_) {
      const TensorPlan& p = replayed<TensorPlan>(what);
      OPCONFORM_CHECK(p.sizes == sizes && p.dtype == dtype, ErrorCode::kInvalidArgument, "its draw ", used_, " (", what,
                      ") is not the recorded one: a builder must be a pure function of its draws");
      return make_tensor_from(p);
    }
    std::vector<TensorLayout> layouts = {TensorLayout::contiguous};
    if (spec_.include_non_contiguous) {
      layouts.insert(layouts.end(), {TensorLayout::offset, TensorLayout::sliced, TensorLayout::transposed});
      if (expandable) layouts.push_back(TensorLayout::expanded);
    }
    std::vector<int> weights;
    for (auto l : layouts) weights.push_back(kLayoutWeights[static_cast<int>(l)]);
    const TensorStyle style = drawing_->choose<TensorStyle>(key_of("style", layouts.size()), [&] {
      return rc::gen::map(rc::gen::tuple(choice(weights), rc::gen::inRange(1, 4), choice({5, 75, 20})),
                          [](const std::tuple<int, int, int>& t) {
                            return TensorStyle{std::get<0>(t), std::get<1>(t), std::get<2>(t)};
                          });
    });
    TensorPlan p;
    p.dtype = dtype;
    p.device = device_;
    p.sizes = sizes;
    p.layout = layouts[style.layout];
    p.offset = style.offset;
    const int64_t count = stored_count(p);
    const ValueMode mode = value_mode(style.mode, dtype, values, specials);
    p.values = drawing_->choose<std::vector<double>>(
        key_of("values", static_cast<int>(dtype), count, static_cast<int>(mode), indices.has_value(),
               key_of_constraint(values)),
        [&]() -> rc::Gen<std::vector<double>> {
          if (!indices || mode == ValueMode::zeros) return values_gen(dtype, values, mode, count);
          if (count > kSeededValuesAbove) {
            const int64_t lo = indices->first, span = indices->second - indices->first + 1;
            return seeded_values(count, [lo, span](uint64_t r) {
              return static_cast<double>(lo + static_cast<int64_t>(r % static_cast<uint64_t>(span)));
            });
          }
          auto index = rc::gen::resize(kFullSize, int_in(indices->first, indices->second));
          return rc::gen::container<std::vector<double>>(count, rc::gen::cast<double>(index));
        });
    record_->emplace_back(std::in_place_type<TensorPlan>, p);
    return make_tensor_from(p);
  }

  const GenerateSpec& spec_;
  const std::vector<DType>& sample_dtypes_;
  Device device_;
  bool large_;  // the next shape() with a rank >= 1 is the large tier's
  Drawing* drawing_;
  std::vector<Drawn>* record_;
  const std::vector<Drawn>* replay_;
  size_t used_ = 0;
};

struct BuilderGenerator {
  std::string op_name;
  SampleBuilder builder;
  GenerateSpec spec;
  std::vector<DType> sample_dtypes;
  std::vector<std::string> names;
  FunctionSchema schema;

  // The builder's arguments, drawn (drawing != null, recorded into `record`) or replayed from
  // plan.draws. Errors name the op.
  Stack run(const BuilderPlan& plan, Drawing* drawing, std::vector<Drawn>* record) const {
    try {
      BuilderDraw draw(spec, sample_dtypes, plan.device, plan.large, drawing, record, drawing ? nullptr : &plan.draws);
      Stack args = builder(draw);
      OPCONFORM_CHECK(args.size() == names.size(), ErrorCode::kInvalidArgument, "it returned ", args.size(),
                      " arguments where the schema has ", names.size());
      draw.finish();
      return args;
    } catch (const Error& e) {
      Error named(e.code(), concat("the sample builder of ", op_name, ": ", e.message()));
      for (const auto& line : e.context()) named.add_context(line);
      throw named;
    } catch (const std::exception& e) {
      throw Error(ErrorCode::kInvalidArgument, concat("the sample builder of ", op_name, " threw: ", e.what()));
    }
  }

  // One drawing run: the device, then the builder's draws (Note [Builder plans]).
  std::pair<BuilderPlan, Choices> draw(const Choices& given, const rc::Random& random, int size) const {
    Drawing drawing{&given, random, size, {}};
    BuilderPlan plan;
    try {
      plan.large = drawing.choose<bool>(key_of("tier", spec.large_percent), [this] {
        return rc::gen::map(tier_gen(spec), [](int k) { return k == 1; });
      });
      const size_t n = spec.devices.size();
      plan.device = spec.devices[drawing.choose<int64_t>(key_of("device", n), [n] {
        return rc::gen::map(choice(std::vector<int>(n, 1)), [](int k) { return int64_t{k}; });
      })];
      (void)run(plan, &drawing, &plan.draws);
    } catch (const Error& e) {
      plan.error = e;  // thrown when materialized, not inside RapidCheck
    }
    return {std::move(plan), std::move(drawing.made)};
  }

  Sample materialize(const BuilderPlan& plan) const {
    if (plan.error) throw *plan.error;
    Stack args = run(plan, nullptr, nullptr);
    // A builder may compute a tensor (a mean, indices, offsets) on the host where it drew the
    // others on the plan's device: a sample lives on one device, so it moves there (on an H200,
    // ATen's CUDA kernels refused samples of five ops with "offsets is on cpu"), keeping its
    // layout (Note [A copy on another device keeps the layout], sample.h).
    if (!plan.device.is_cpu()) {
      bool on_host = false;
      for (const IValue& v : args)
        for (const Tensor& t : tensors_in(v)) on_host = on_host || (t.device().is_cpu() && !t.is_meta_data());
      if (on_host) args = clone_args(args, plan.device);
    }
    if (spec.requires_grad) require_grad(args, schema);
    std::string d = describe(args, names);
    return Sample(std::move(args), std::move(d));
  }
};

std::shared_ptr<const BuilderGenerator> make_builder_generator(const FunctionSchema& schema, std::string op_name,
                                                               const OpData& data, const GenerateSpec& spec) {
  validate_spec(spec);
  auto g = std::make_shared<BuilderGenerator>();
  g->op_name = std::move(op_name);
  g->builder = data.sample_builder;
  g->spec = spec;
  g->sample_dtypes = sample_dtypes_of(spec, data.constraints.dtypes);
  g->names = argument_names(schema);
  g->schema = schema;
  return g;
}

// A drawn plan whose shrinks replace one choice each (any choice, first to last).
rc::Shrinkable<BuilderPlan> plan_node(std::shared_ptr<const BuilderGenerator> g, const Choices& given,
                                      const rc::Random& random, int size) {
  auto [plan, made] = g->draw(given, random, size);
  if (plan.error) return rc::shrinkable::just(std::move(plan));
  auto choices = std::make_shared<const Choices>(std::move(made));
  auto shrinks = rc::seq::mapcat(rc::seq::range<size_t>(0, choices->size()), [=](size_t i) {
    return rc::seq::map((*choices)[i].value.shrinks(), [=](rc::Shrinkable<ChoiceValue>&& shrunk) {
      Choices next = *choices;
      next[i].value = std::move(shrunk);
      return plan_node(g, next, random, size);
    });
  });
  return rc::shrinkable::just(std::move(plan), std::move(shrinks));
}

rc::Gen<BuilderPlan> plan_gen(std::shared_ptr<const BuilderGenerator> g) {
  return rc::Gen<BuilderPlan>([g](const rc::Random& random, int size) { return plan_node(g, {}, random, size); });
}

// The name an op is known by: op_name, else the schema's.
std::string op_name_of(const FunctionSchema& schema, std::string_view op_name) {
  return op_name.empty() ? schema.full_name() : std::string(op_name);
}

// RapidCheck's spread of sizes over a run (every size in [0, max] used about equally).
int size_for(int i, int count) {
  const int sizes = kFullSize + 1;
  return count <= sizes ? (i * kFullSize) / std::max(count - 1, 1) : i % sizes;
}

// RapidCheck loads its global configuration (RC_PARAMS) on first use and prints it on stderr,
// once per process. We pass our own parameters, so load it early with stderr muted. (stderr is
// muted process-wide for that instant; a message another thread writes then is lost.)
void load_rapidcheck_configuration_quietly() {
  static std::once_flag once;
  std::call_once(once, [] {
    std::ostringstream sink;
    std::streambuf* old = std::cerr.rdbuf(sink.rdbuf());
    try {
      (void)rc::detail::configuration();
    } catch (...) {
      // A malformed RC_PARAMS: RapidCheck reports it when it needs the configuration.
    }
    std::cerr.rdbuf(old);
  });
}

bool is_failure(Outcome o) { return o == Outcome::failed || o == Outcome::crashed; }

// Counts accepted shrinks; prints nothing (RapidCheck's default listener writes to stderr).
class QuietListener : public rc::detail::TestListener {
 public:
  void onTestCaseFinished(const rc::detail::CaseDescription&) override {}
  void onShrinkTried(const rc::detail::CaseDescription&, bool accepted) override { shrinks += accepted; }
  void onTestFinished(const rc::detail::TestMetadata&, const rc::detail::TestResult&) override {}
  int shrinks = 0;
};

// The search both generators share: RapidCheck runs the property on spec.count plans and shrinks
// the first failing one. An Error while making a sample (a builder's) ends it and is rethrown.
//
// Note [A shrink candidate runs once]: RapidCheck tries every shrink of every choice of a plan,
// and most make a sample the search has run already (a shrunk value seed of an empty tensor, a
// layout of a one-element one, two paths to the same sizes): counted over the ATen 1.13 check's
// 1,641 searches, 182,818 of 228,469 shrink runs (80%) were of a sample run before in the same
// search. So each sample's outcome is kept by its sample_key(), and a sample met again takes it
// instead of running the check again. A candidate still counts toward max_shrink_runs, so the
// search ends where it did and finds the same minimal sample (for kernels that give the same
// result for the same input: a flaky failure is not tried twice on one sample).
template <typename Plan, typename Materialize>
std::optional<GeneratedFailure> search(rc::Gen<Plan> plans, Materialize materialize, const std::string& shown_name,
                                       const SampleProperty& property, const GenerateSpec& spec) {
  const uint64_t seed = resolve_seed(spec);

  // The last failing plan is the minimal one: RapidCheck accepts a shrink only when it fails,
  // and stops after a full round of shrinks that all pass.
  struct State {
    std::optional<Plan> failing;
    CheckResult result;
    std::optional<Error> error;
    std::optional<Sample> faulted_on;  // the sample after which the device faulted
    int runs = 0;
    bool searching = true;  // false once shrinking started
    std::map<std::string, std::optional<CheckResult>> outcomes;  // by sample_key: the failure, or none for a pass
  };
  auto state = std::make_shared<State>();
  auto testable = [plans, materialize, state, &property, &spec]() -> bool {
    if (state->error || state->faulted_on) return true;  // shrinking an unbuildable sample, or on a lost device, is pointless
    Plan plan = *plans;
    if (!state->searching && state->runs >= spec.max_shrink_runs) return true;  // shrink budget spent
    ++state->runs;
    Sample sample;
    try {
      sample = materialize(plan);
    } catch (const Error& e) {
      state->error = e;
      return false;
    }
    std::string key = sample_key(sample.args);  // Note [A shrink candidate runs once]
    if (const auto seen = state->outcomes.find(key); seen != state->outcomes.end()) {
      if (!seen->second) return true;
      state->searching = false;
      state->failing = std::move(plan);
      state->result = *seen->second;
      return false;
    }
    CheckResult r;
    try {
      r = property(sample);
    } catch (const std::exception& e) {
      r.outcome = Outcome::failed;
      r.message = concat("the property threw: ", e.what());
    }
    if (const auto fault = cuda::device_fault()) {  // Note [A CUDA fault ends the search] (opcheck.cpp)
      if (!is_failure(r.outcome)) r.outcome = Outcome::crashed, r.message = concat("a CUDA kernel faulted: ", *fault);
      state->faulted_on = std::move(sample);
    }
    state->outcomes.emplace(std::move(key), is_failure(r.outcome) ? std::optional<CheckResult>(r) : std::nullopt);
    if (!is_failure(r.outcome)) return true;
    if (state->searching) state->runs = 0;  // count shrink runs from here
    state->searching = false;
    state->failing = std::move(plan);
    state->result = std::move(r);
    return false;
  };

  rc::detail::TestParams params;
  params.seed = seed;
  params.maxSuccess = spec.count;
  params.maxSize = kFullSize;
  rc::detail::TestMetadata metadata;
  metadata.id = "opconform:" + shown_name;
  metadata.description = metadata.id;
  QuietListener listener;
  load_rapidcheck_configuration_quietly();
  const auto outcome = rc::detail::checkTestable(testable, metadata, params, listener);

  if (state->error) throw *state->error;
  if (outcome.template is<rc::detail::SuccessResult>()) return std::nullopt;
  rc::detail::FailureResult failure;
  if (!outcome.match(failure) || !state->failing) {
    std::ostringstream why;
    rc::detail::printResultMessage(outcome, why);
    throw Error(ErrorCode::kInternal, concat("generating samples for ", shown_name, " failed: ", why.str()));
  }
  GeneratedFailure out;
  out.seed = seed;
  out.minimal = state->faulted_on ? std::move(*state->faulted_on) : materialize(*state->failing);
  out.replay = concat("OPCONFORM_SEED=", seed, " ", spec.replay_command.empty() ? program_path() : spec.replay_command);
  out.samples_tried = failure.numSuccess + 1;
  out.shrinks = listener.shrinks;
  out.result = state->result;
  out.result.minimal_input = out.minimal.description;
  out.result.repro = out.replay;
  return out;
}

}  // namespace

std::string program_path() {
  std::ifstream cmdline("/proc/self/cmdline");
  std::string argv0;
  if (cmdline && std::getline(cmdline, argv0, '\0') && !argv0.empty()) return argv0;
  return "<this program>";
}

uint64_t resolve_seed(const GenerateSpec& spec) {
  if (const char* env = std::getenv("OPCONFORM_SEED"); env && *env) {
    char* end = nullptr;
    errno = 0;
    unsigned long long v = std::strtoull(env, &end, 10);
    OPCONFORM_CHECK(errno == 0 && end && *end == '\0', ErrorCode::kInvalidArgument, "OPCONFORM_SEED='", env,
                    "' is not an unsigned integer");
    if (v != 0) return v;
  }
  if (spec.seed != 0) return spec.seed;
  std::random_device rd;
  uint64_t seed = 0;
  while (seed == 0) seed = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  std::cerr << "opconform: generating samples with seed " << seed << " (OPCONFORM_SEED=" << seed << " replays)\n";
  return seed;
}

rc::Gen<Sample> sample_gen(const FunctionSchema& schema, const InputConstraints& constraints, const GenerateSpec& spec) {
  auto g = make_generator(schema, constraints, spec);
  return rc::gen::map(plan_gen(g), [g](const SamplePlan& p) { return g->materialize(p); });
}

std::vector<Sample> generate_samples(const FunctionSchema& schema, const InputConstraints& constraints,
                                     const GenerateSpec& spec) {
  return detail::take_samples(sample_gen(schema, constraints, spec), spec);
}

namespace detail {

rc::Gen<Sample> op_sample_gen(const FunctionSchema& schema, std::string_view op_name, const OpData& data,
                              const GenerateSpec& spec) {
  const std::string name = op_name_of(schema, op_name);
  if (data.sample_builder) {
    auto g = make_builder_generator(schema, name, data, spec);
    return rc::gen::map(plan_gen(g), [g](const BuilderPlan& p) { return g->materialize(p); });
  }
  return sample_gen(schema, data.constraints, spec);
}

std::vector<Sample> take_samples(const rc::Gen<Sample>& gen, const GenerateSpec& spec) {
  rc::Random random(resolve_seed(spec));
  std::vector<Sample> out;
  out.reserve(std::max(spec.count, 0));
  for (int i = 0; i < spec.count; ++i) out.push_back(gen(random.split(), size_for(i, spec.count)).value());
  return out;
}

}  // namespace detail

rc::Gen<Sample> sample_gen(const OperatorHandle& op, const GenerateSpec& spec) {
  return detail::op_sample_gen(op.schema(), op.name(), *op.data(), spec);
}

std::vector<Sample> generate_samples(const OperatorHandle& op, const GenerateSpec& spec) {
  return detail::take_samples(sample_gen(op, spec), spec);
}

std::optional<GeneratedFailure> find_failure(const OperatorHandle& op, const SampleProperty& property,
                                             const GenerateSpec& spec) {
  const auto data = op.data();
  if (data->sample_builder) {
    auto g = make_builder_generator(op.schema(), op.name(), *data, spec);
    return search(plan_gen(g), [g](const BuilderPlan& p) { return g->materialize(p); }, op.name(), property, spec);
  }
  return find_failure(op.schema(), data->constraints, op.name(), property, spec);
}

std::optional<GeneratedFailure> find_failure(const FunctionSchema& schema, const InputConstraints& constraints,
                                             const std::string& op_name, const SampleProperty& property,
                                             const GenerateSpec& spec) {
  auto g = make_generator(schema, constraints, spec);
  return search(plan_gen(g), [g](const SamplePlan& p) { return g->materialize(p); }, op_name_of(schema, op_name),
                property, spec);
}

}  // namespace opconform::conformance
