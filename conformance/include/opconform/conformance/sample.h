// Sample: one set of arguments for an operator, in schema order (keyword-only ones included,
// at their schema positions), with a short description for messages.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "opconform/core/ivalue.h"
#include "opconform/core/schema.h"

namespace opconform::conformance {

struct Sample {
  Stack args;
  std::string description;  // "x: float32[2, 3] (transposed), alpha: 2" — filled by describe() when empty

  Sample() = default;
  Sample(Stack a, std::string d = "") : args(std::move(a)), description(std::move(d)) {}
};

// "x: float32[2, 3] strides [1, 2], alpha: 2" — argument names from the schema when given.
std::string describe(const Stack& args, const std::vector<std::string>& names = {});

// A deep copy: tensors are cloned and keep requires_grad; other values are copied. Checks run on
// clones so the caller's sample is never touched. A clone keeps each tensor's sizes, strides and
// storage offset, and the sharing of storages between arguments; with `to`, on that device.
//
// Note [A copy on another device keeps the layout]: reference_agreement runs the reference, and
// device_consistency the library's CPU kernel, on CPU copies of a CUDA sample. Those copies used
// to be contiguous (Tensor::to), so an op that observes the layout saw another input: on an H100,
// ATen's sym_stride.int and sym_storage_offset failed both checks on every dtype ("2 vs 1"), and
// a kernel given overlapping or stride-0 input on the GPU was compared with one given dense input.
Stack clone_args(const Stack& args, std::optional<Device> to = std::nullopt);

// A key equal for two samples when they hold the same arguments: what describe() shows (types,
// shapes, layouts, devices, requires_grad, scalars), a 128-bit hash of the bytes of every storage
// (holes and what lies past a view included; read through the host), and which tensors share one. Note [A shrink candidate runs
// once] (generate.cpp).
std::string sample_key(const Stack& args);

// Helpers the checks share.
// Every defined tensor a value holds (a Tensor; the elements of Tensor[], Tensor?[] and generic
// lists), in order.
std::vector<Tensor> tensors_in(const IValue& value);
// (map_tensors, which applies a function to each of them, is in opconform/core/ivalue.h.)
// The schema's argument names, in order.
std::vector<std::string> argument_names(const FunctionSchema& schema);
// What messages call the sample: its description, else describe() with the schema's names.
std::string description_of(const Sample& sample, const FunctionSchema& schema);

}  // namespace opconform::conformance
