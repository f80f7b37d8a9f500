// Dense strides: the strides of a tensor whose elements fill one block of memory, the dims laid
// out in a given order. This is PyTorch's one rule for the layout of a new tensor (c10's
// empty_tensor_restride and get_channels_last_strides), written once for concrete sizes (int64_t)
// and for symbolic ones (SymInt, symint.h), so that a kernel computing strides from
// Tensor::sym_sizes() gives a real tensor and a fake one with symbolic sizes the same layout.
//
//   contiguous_strides(std::vector<int64_t>{2, 3, 4})  -> [12, 4, 1]
//   contiguous_strides(x.sym_sizes())                  -> [s1*s2, s2, 1]
//   channels_last_strides(std::vector<int64_t>{2, 3, 4, 5})  -> [60, 1, 15, 3]
//   dense_strides(sizes, layout_order(t.sizes(), t.strides()))  -> t's dim order, over other sizes
//
// Note [Dense strides]: the dims are taken in an order, innermost first; the innermost gets stride
// 1 and each next one the previous stride times the previous size. How a size of 0 counts
// (ZeroSizes) is PyTorch's: as 1 for contiguous and layout-order strides (an empty tensor has the
// strides it would have with 1 there, so a 0 does not zero the strides of the dims outside it),
// as itself for channels-last (c10's get_channels_last_strides multiplies the sizes as they
// are). A symbolic size is multiplied as it is: backed symbols are >= 2, and an unbacked one
// (maybe 0) only matters when the tensor has elements. A concrete product past int64 follows the
// arithmetic of the type: int64_t strides saturate at INT64_MAX instead of wrapping (whatever
// allocates such a tensor refuses it: empty_strided), SymInt arithmetic throws (kInvalidArgument),
// for the element count too (compile/'s export relies on it to refuse such sizes).
#pragma once

#include <concepts>
#include <cstdint>
#include <span>
#include <vector>

#include "opconform/core/symint.h"

namespace opconform {

// The integer types strides are computed in.
template <typename T>
concept StrideInt = std::same_as<T, int64_t> || std::same_as<T, SymInt>;

// How a dim of size 0 counts in the strides of the dims outside it (Note [Dense strides]).
enum class ZeroSizes : uint8_t { as_one, as_zero };

// Dense strides of `sizes` with the dims in `order`, innermost first (a permutation of the dims;
// an error otherwise).
template <StrideInt T>
std::vector<T> dense_strides(std::span<const T> sizes, std::span<const int64_t> order,
                             ZeroSizes zeros = ZeroSizes::as_one);

// Row-major: the last dim innermost.
std::vector<int64_t> contiguous_strides(std::span<const int64_t> sizes);
std::vector<SymInt> contiguous_strides(std::span<const SymInt> sizes);

// Channels-last of a 4-d (N, C, H, W) or 5-d (N, C, D, H, W) shape: C innermost, then the
// spatial dims from the last, then N (c10's get_channels_last_strides_2d / _3d); other ranks are
// an error.
std::vector<int64_t> channels_last_order(int64_t rank);
std::vector<int64_t> channels_last_strides(std::span<const int64_t> sizes);
std::vector<SymInt> channels_last_strides(std::span<const SymInt> sizes);

// The dim order of an existing layout, innermost first: by increasing stride; among equal strides
// (which a dim of size 0 or 1 leaves to the next dim out) those dims first, then the later dim
// first. For a dense layout (ZeroSizes::as_one), dense_strides(sizes, layout_order(sizes, strides))
// gives back its strides; over other sizes (symbolic ones) it gives the same layout.
std::vector<int64_t> layout_order(std::span<const int64_t> sizes, std::span<const int64_t> strides);

extern template std::vector<int64_t> dense_strides(std::span<const int64_t>, std::span<const int64_t>, ZeroSizes);
extern template std::vector<SymInt> dense_strides(std::span<const SymInt>, std::span<const int64_t>, ZeroSizes);

}  // namespace opconform
