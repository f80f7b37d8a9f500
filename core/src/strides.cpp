// Dense strides (strides.h): Note [Dense strides].
#include "opconform/core/strides.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <optional>

#include "opconform/core/error.h"
#include "opconform/core/tensor.h"  // shape_string

namespace opconform {
namespace {

// stride * size for the next dim out (Note [Dense strides]). A concrete int64 product saturates
// instead of wrapping (undefined behaviour; found by fuzz/plugin_value).
int64_t next_stride(int64_t stride, int64_t size, ZeroSizes zeros) {
  if (zeros == ZeroSizes::as_one) size = std::max<int64_t>(size, 1);
  int64_t r;
  return __builtin_mul_overflow(stride, size, &r) ? std::numeric_limits<int64_t>::max() : r;
}

// SymInt arithmetic: a symbolic size is used as it is, a concrete overflow throws.
SymInt next_stride(const SymInt& stride, const SymInt& size, ZeroSizes zeros) {
  const std::optional<int64_t> concrete = size.maybe_as_int();
  if (concrete && zeros == ZeroSizes::as_one) return stride * std::max<int64_t>(*concrete, 1);
  return stride * size;
}

// The rule itself: dim_at(k) is the k-th innermost dim. A template over the order, so that the
// row-major case (every empty() call) needs no order vector. The outermost size is multiplied in
// too: SymInt sizes whose element count passes int64 are refused there.
template <StrideInt T, typename DimAt>
std::vector<T> strides_in_order(std::span<const T> sizes, DimAt dim_at, ZeroSizes zeros) {
  std::vector<T> strides(sizes.size());
  T stride = T(1);
  for (size_t k = 0; k < sizes.size(); ++k) {
    const auto d = static_cast<size_t>(dim_at(k));
    strides[d] = stride;
    stride = next_stride(stride, sizes[d], zeros);
  }
  return strides;
}

}  // namespace

template <StrideInt T>
std::vector<T> dense_strides(std::span<const T> sizes, std::span<const int64_t> order, ZeroSizes zeros) {
  std::vector<bool> seen(sizes.size(), false);
  bool permutation = order.size() == sizes.size();
  for (size_t k = 0; permutation && k < order.size(); ++k) {
    const int64_t d = order[k];
    permutation = d >= 0 && d < static_cast<int64_t>(sizes.size()) && !seen[static_cast<size_t>(d)];
    if (permutation) seen[static_cast<size_t>(d)] = true;
  }
  OPCONFORM_CHECK(permutation, ErrorCode::kInvalidArgument, "dense_strides: the dim order ",
                  shape_string(order), " is not a permutation of the ", sizes.size(), " dims");
  return strides_in_order(sizes, [&](size_t k) { return order[k]; }, zeros);
}

template std::vector<int64_t> dense_strides(std::span<const int64_t>, std::span<const int64_t>, ZeroSizes);
template std::vector<SymInt> dense_strides(std::span<const SymInt>, std::span<const int64_t>, ZeroSizes);

std::vector<int64_t> contiguous_strides(std::span<const int64_t> sizes) {
  return strides_in_order(sizes, [n = sizes.size()](size_t k) { return n - 1 - k; }, ZeroSizes::as_one);
}

std::vector<SymInt> contiguous_strides(std::span<const SymInt> sizes) {
  return strides_in_order(sizes, [n = sizes.size()](size_t k) { return n - 1 - k; }, ZeroSizes::as_one);
}

std::vector<int64_t> channels_last_order(int64_t rank) {
  OPCONFORM_CHECK(rank == 4 || rank == 5, ErrorCode::kInvalidArgument,
                  "channels-last strides need a 4-d or 5-d shape, got rank ", rank);
  std::vector<int64_t> order{1};
  for (int64_t d = rank - 1; d >= 2; --d) order.push_back(d);
  order.push_back(0);
  return order;
}

std::vector<int64_t> channels_last_strides(std::span<const int64_t> sizes) {
  return dense_strides(sizes, channels_last_order(static_cast<int64_t>(sizes.size())), ZeroSizes::as_zero);
}

std::vector<SymInt> channels_last_strides(std::span<const SymInt> sizes) {
  return dense_strides(sizes, channels_last_order(static_cast<int64_t>(sizes.size())), ZeroSizes::as_zero);
}

std::vector<int64_t> layout_order(std::span<const int64_t> sizes, std::span<const int64_t> strides) {
  OPCONFORM_CHECK(sizes.size() == strides.size(), ErrorCode::kInvalidArgument, "layout_order: ", sizes.size(),
                  " sizes but ", strides.size(), " strides");
  std::vector<int64_t> order(strides.size());
  std::iota(order.begin(), order.end(), int64_t{0});
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    if (strides[a] != strides[b]) return strides[a] < strides[b];
    if ((sizes[a] <= 1) != (sizes[b] <= 1)) return sizes[a] <= 1;
    return a > b;
  });
  return order;
}

}  // namespace opconform
