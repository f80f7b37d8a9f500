// Walks N strided operands of the same shape together, calling f(offsets) for every element,
// where offsets[k] is the element offset of operand k (in elements, from its first element).
// The innermost dimension is the last; offsets advance incrementally (no index multiplication).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

namespace opconform::detail {

template <size_t N, typename F>
void strided_loop(std::span<const int64_t> sizes, const std::array<std::span<const int64_t>, N>& strides,
                  F&& f) {
  const size_t ndim = sizes.size();
  for (int64_t s : sizes) {
    if (s == 0) return;
  }
  std::array<int64_t, N> offsets{};
  if (ndim == 0) {
    f(offsets);
    return;
  }
  // The index of the current element, outer dimensions only (inline for the usual ranks).
  std::array<int64_t, 16> inline_counter{};
  std::vector<int64_t> heap_counter(ndim > 16 ? ndim : 0, 0);
  int64_t* counter = ndim > 16 ? heap_counter.data() : inline_counter.data();
  const size_t inner = ndim - 1;
  const int64_t inner_size = sizes[inner];
  // Offsets never step past a dimension's last element: a size-1 dimension may have any stride
  // (INT64_MAX too), and one step past it would overflow (found by fuzz/dlpack).
  while (true) {
    for (int64_t i = 1; i < inner_size; ++i) {
      f(offsets);
      for (size_t k = 0; k < N; ++k) offsets[k] += strides[k][inner];
    }
    f(offsets);
    for (size_t k = 0; k < N; ++k) offsets[k] -= strides[k][inner] * (inner_size - 1);
    // Carry into the outer dimensions.
    size_t d = inner;
    while (true) {
      if (d == 0) return;
      --d;
      if (++counter[d] < sizes[d]) {
        for (size_t k = 0; k < N; ++k) offsets[k] += strides[k][d];
        break;
      }
      for (size_t k = 0; k < N; ++k) offsets[k] -= strides[k][d] * (sizes[d] - 1);
      counter[d] = 0;
    }
  }
}

}  // namespace opconform::detail
