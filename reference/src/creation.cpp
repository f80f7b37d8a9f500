// Creation operators: full, arange, empty, scalar_tensor, the random factories, and the "_like"
// / fill ops that make a new tensor shaped like an input.
//
// Factories have no tensor argument to dispatch on: a BackendSelect kernel adds the backend key
// of their Device argument (CPU when None) and dispatches on, as core's custom_op does for
// factories. Their kernels allocate with core's empty/empty_strided, which make fake tensors
// under a FakeTensorMode, so a fake kernel is the same allocation without writing values.
//
// Note [Uninitialised memory]: empty and empty_strided fill their result with NaN (floating and
// complex), the dtype's largest value (integers) or true, as PyTorch does under
// torch.use_deterministic_algorithms(True) with fill_uninitialized_memory. A reference kernel
// must be deterministic; garbage would be a different answer on every call.
#include <cmath>
#include <limits>
#include <numeric>

#include "opconform/core/backend_select.h"
#include "opconform/core/fake_tensor.h"
#include "opconform/core/generator.h"
#include "opconform/reference/detail/calls.h"
#include "opconform/reference/detail/elementwise.h"
#include "opconform/reference/detail/op_builder.h"
#include "opconform/reference/detail/op_support.h"
#include "opconform/reference/reference.h"

namespace opconform::reference {
namespace {

using namespace detail;
using Grads = std::vector<Tensor>;
using Ints = std::vector<int64_t>;


// ---- dispatch and options ----

// The BackendSelect kernel of a factory (core/backend_select.h): the backend of argument
// `device_index` (a Device?).
void backend_select(Library& lib, const std::string& op, size_t device_index) {
  lib.impl(op, backend_select_kernel(device_index), DispatchKey::BackendSelect);
}

void check_sizes(std::string_view op, const Ints& size) {
  for (int64_t s : size) {
    OPCONFORM_CHECK(s >= 0, ErrorCode::kInvalidArgument, op, ": argument 'size' has a negative dimension ", s, " in ",
                    shape_string(size));
  }
}

// ---- values ----

// The finite values of a dtype (of its real part, for complex), as doubles.
std::pair<double, double> value_range(DType d) {
  if (is_floating(d) || is_complex(d)) return {-max_finite(d), max_finite(d)};
  const auto [lo, hi] = integer_range(d);
  return {static_cast<double>(lo), static_cast<double>(hi)};
}

// c10::overflows: whether `value` does not fit dtype d, as PyTorch's fill_ decides (integers
// may wrap from negative values into unsigned types; infinities fit floating types; NaN fits no
// integer type; a complex value with an imaginary part does not fit a real type).
bool overflows(const Scalar& value, DType d) {
  // Every value converts to bool (nonzero is True): PyTorch's full(..., 6, dtype=bool),
  // scalar_tensor(-5, dtype=bool) and constant_pad_nd(bool, value=2.0) give True.
  if (d == DType::Bool) return false;
  const bool floating = is_floating(d) || is_complex(d);
  // Not a structured binding: clang 14 (the fuzz preset) cannot capture one in a lambda.
  const std::pair<double, double> range = value_range(d);
  const double lo = range.first, hi = range.second;
  auto real_overflows = [&](double v) {
    if (floating && std::isinf(v)) return false;
    if (!floating && std::isnan(v)) return true;
    return v < lo || v > hi;
  };
  switch (value.kind()) {
    case Scalar::Kind::Bool: return false;
    case Scalar::Kind::Int: {
      const int64_t v = value.to_int();
      if (floating) return real_overflows(static_cast<double>(v));
      if (d == DType::Int64) return false;
      const auto low = static_cast<int64_t>(lo), high = static_cast<int64_t>(hi);
      // Unsigned types (bool too) accept negative values down to -max (two's complement wrap).
      if (low == 0) return v > high || (v < 0 && -static_cast<uint64_t>(v) > static_cast<uint64_t>(high));
      return v < low || v > high;
    }
    case Scalar::Kind::Float: return real_overflows(value.to_double());
    case Scalar::Kind::Complex: {
      const complex128 c = value.to<complex128>();
      return (!is_complex(d) && c.imag() != 0) || real_overflows(c.real()) || real_overflows(c.imag());
    }
  }
  return false;
}

// Fills t with value after PyTorch's overflow check (checked_convert).
const Tensor& checked_fill(std::string_view op, const Tensor& t, const Scalar& value) {
  OPCONFORM_CHECK(!overflows(value, t.dtype()), ErrorCode::kInvalidArgument, op, ": value ", value,
                  " cannot be converted to type ", name(t.dtype()), " without overflow");
  return t.fill_(value);
}

// Note [Uninitialised memory]: the whole storage is filled (overlapping strides allowed).
void fill_uninitialised(const Tensor& t) {
  const Tensor memory = t.as_strided(Ints{static_cast<int64_t>(t.storage()->nbytes() / t.itemsize())}, Ints{1}, 0);
  if (is_floating(t.dtype()) || is_complex(t.dtype()))
    memory.fill_(std::numeric_limits<double>::quiet_NaN());
  else if (t.dtype() == DType::Bool)
    memory.fill_(true);
  else
    memory.fill_(integer_range(t.dtype()).second);
}

// ---- sample building ----

Ints draw_size(SampleDraw& draw) { return draw.shape(0, 4); }
std::optional<DType> draw_optional_dtype(SampleDraw& draw, int percent_given = 70) {
  if (draw.coin(percent_given)) return draw.dtype();
  return std::nullopt;
}
IValue dtype_value(std::optional<DType> d) { return d ? IValue(*d) : IValue(); }
// A fill value that fits dtype d (or, for None, of any kind).
Scalar draw_fill_value(SampleDraw& draw, std::optional<DType> d) {
  if (!d) {
    switch (draw.integer(0, 3)) {
      case 0: return Scalar(draw.integer(-10, 10));
      case 1: return Scalar(draw.real(-10, 10));
      case 2: return Scalar(draw.coin());
      default: return Scalar(complex128(draw.real(-10, 10), draw.real(-10, 10)));
    }
  }
  if (*d == DType::Bool) return draw.coin() ? Scalar(draw.coin()) : Scalar(draw.integer(0, 1));
  if (is_complex(*d) && draw.coin()) return Scalar(complex128(draw.real(-10, 10), draw.real(-10, 10)));
  if ((is_floating(*d) || is_complex(*d)) && draw.coin(70)) {
    if (draw.coin(10)) return Scalar(std::numeric_limits<double>::infinity());
    return Scalar(draw.real(-10, 10));
  }
  return Scalar(*d == DType::UInt8 ? draw.integer(0, 255) : draw.integer(-10, 10));
}
// The trailing factory arguments: layout=None, device (None or any device of this machine),
// pin_memory=None.
void push_factory_options(Stack& args, SampleDraw& draw) {
  args.emplace_back();
  args.push_back(draw.coin() ? IValue(draw.device_value()) : IValue());
  args.emplace_back();
}

// ---- the ops ----

void register_full(Library& lib, const std::string& fam) {
  OpBuilder b(lib,
              "aten::full(SymInt[] size, Scalar fill_value, *, ScalarType? dtype=None, Layout? layout=None, "
              "Device? device=None, bool? pin_memory=None) -> Tensor",
              fam, "a tensor of sizes `size` holding fill_value (dtype: the value's kind when None)");
  auto kernel = [name = b.name()](Ints size, const Scalar& value, std::optional<DType> dtype,
                                  std::optional<Layout> layout, std::optional<Device> device,
                                  std::optional<bool> pin_memory) {
    check_strided(name, layout, pin_memory);
    check_sizes(name, size);
    Tensor out = empty(size, TensorOptions(dtype.value_or(value.default_dtype()), device.value_or(Device::cpu())));
    checked_fill(name, out, value);  // metadata only on fake tensors
    return out;
  };
  b.composite_explicit(kernel).fake(kernel).dtypes(kAll);
  backend_select(lib, b.name(), 4);
  b.samples([](SampleDraw& draw) {
    Ints size = draw_size(draw);
    std::optional<DType> dtype = draw_optional_dtype(draw);
    Stack args{IValue(size), IValue(draw_fill_value(draw, dtype)), dtype_value(dtype)};
    push_factory_options(args, draw);
    return args;
  });
}

void register_fill_and_full_like(Library& lib, const std::string& fam) {
  Registry& r = lib.registry();
  {
    OpBuilder b(lib, "aten::fill.Scalar(Tensor self, Scalar value) -> Tensor", fam,
                "a new tensor like self (same layout) holding value everywhere");
    // A tensor like self (empty_like's layout); self's values are never read.
    auto kernel = [name = b.name()](const Tensor& self, const Scalar& value) {
      Tensor out = new_like(self, MemoryFormat::Preserve, self.options(), name);
      checked_fill(name, out, value);  // metadata only on fake tensors
      return out;
    };
    b.composite_explicit(kernel).fake(kernel).dtypes(kAll);
    // The value replaces self everywhere: no gradient reaches self.
    b.autograd([ops = Ops(r)](autograd::AutogradContext&, const Grads& g) -> Grads {
      return {ops.mul(g[0], 0), Tensor()};  // zero, recorded: double backward holds
    });
    b.vmap([ops = Ops(r)](const VmapInfo&, const Stack& inputs, const std::vector<std::optional<int64_t>>& in_dims) {
      return std::make_pair(ops.call("aten::fill.Scalar", inputs), std::vector<std::optional<int64_t>>{in_dims[0]});
    });
    b.samples([](SampleDraw& draw) {
      Tensor self = draw.tensor(draw.shape(0, 4), draw.dtype());
      return Stack{IValue(self), IValue(draw_fill_value(draw, self.dtype()))};
    });
  }
  OpBuilder b(lib,
              "aten::full_like(Tensor self, Scalar fill_value, *, ScalarType? dtype=None, Layout? layout=None, "
              "Device? device=None, bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor",
              fam, "a tensor shaped like self (layout per memory_format) holding fill_value; not differentiable");
  auto kernel = [name = b.name(), ops = Ops(r)](const Tensor& self, const Scalar& value, std::optional<DType> dtype,
                                                std::optional<Layout> layout, std::optional<Device> device,
                                                std::optional<bool> pin_memory, std::optional<MemoryFormat> format) {
    check_strided(name, layout, pin_memory);
    Tensor out = ops.tensor("aten::_to_copy", {self, dtype_value(dtype), IValue(), device ? IValue(*device) : IValue(),
                                               IValue(), IValue(false), format ? IValue(*format) : IValue()});
    checked_fill(name, out, value);
    return out;
  };
  b.composite_explicit(kernel).fake(kernel).dtypes(kAll);
  // As PyTorch: the result does not require grad (a factory shaped like its input).
  b.autograd([](autograd::AutogradContext&, const Grads&) -> Grads { return Grads(7); },
             [](autograd::AutogradContext& ctx, const Stack&, const Stack& outputs) {
               ctx.mark_non_differentiable({outputs[0].to_tensor()});
             });
  b.samples([](SampleDraw& draw) {
    Tensor self = draw.tensor(draw.shape(0, 5), draw.dtype());
    std::optional<DType> dtype = draw_optional_dtype(draw, 30);
    // device stays None (self's): error_inputs passes a meta self and takes a CPU result for an
    // explicit device=cpu as a silent answer to invalid input.
    Stack args{IValue(self), IValue(draw_fill_value(draw, dtype.value_or(self.dtype()))), dtype_value(dtype),
               IValue(), IValue(), IValue()};
    IValue format;
    if (draw.coin(30)) format = IValue(draw.coin() ? MemoryFormat::Contiguous : MemoryFormat::Preserve);
    if (self.dim() == 4 && draw.coin(20)) format = IValue(MemoryFormat::ChannelsLast);
    args.push_back(format);
    return args;
  });
}

// arange's arguments: real numbers, a dtype the kernel has (no bool, no complex).
void check_arange_args(std::string_view op, const Scalar& start, const Scalar& end, const Scalar& step, DType dtype) {
  OPCONFORM_CHECK(!start.is_complex() && !end.is_complex() && !step.is_complex(), ErrorCode::kInvalidArgument, op,
                  ": complex start, end or step are not supported");
  OPCONFORM_CHECK(dtype != DType::Bool && !is_complex(dtype), ErrorCode::kNotImplemented, op, ": dtype ", name(dtype),
                  " is not supported");
}

DType arange_dtype(const Scalar& start, const Scalar& end, const Scalar& step, std::optional<DType> dtype) {
  if (dtype) return *dtype;
  const bool floating = start.is_floating() || end.is_floating() || step.is_floating();
  return floating ? DType::Float32 : DType::Int64;
}

// arange's length as PyTorch computes it (compute_arange_size): in int64 for an int64 result only,
// else ceil((end - start) / step) in double, also for the narrower integer dtypes (ATen 1.13 and
// 2.11 give int32 arange(-0.005, 0.995) one element, int64 none).
int64_t arange_length(std::string_view op, const Scalar& start, const Scalar& end, const Scalar& step, DType dtype) {
  auto check_range = [&](auto xstart, auto xend, auto xstep) {
    OPCONFORM_CHECK(xstep != 0, ErrorCode::kInvalidArgument, op, ": argument 'step' must be nonzero");
    OPCONFORM_CHECK(std::isfinite(static_cast<double>(xstart)) && std::isfinite(static_cast<double>(xend)),
                    ErrorCode::kInvalidArgument, op, ": unsupported range: ", xstart, " -> ", xend);
    OPCONFORM_CHECK((xstep > 0 && xend >= xstart) || (xstep < 0 && xend <= xstart), ErrorCode::kInvalidArgument, op,
                    ": upper bound and larger bound inconsistent with step sign");
  };
  double size;
  if (dtype == DType::Int64) {
    const int64_t xstart = start.to_int(), xend = end.to_int(), xstep = step.to_int();
    check_range(xstart, xend, xstep);
    const int64_t sign = xstep > 0 ? 1 : -1;
    size = static_cast<double>((xend - xstart + xstep - sign) / xstep);
  } else {
    check_range(start.to_double(), end.to_double(), step.to_double());
    size = std::ceil((end.to_double() - start.to_double()) / step.to_double());
  }
  OPCONFORM_CHECK(size >= 0 && size <= 0x1p63, ErrorCode::kInvalidArgument, op, ": invalid size, possible overflow?");
  return static_cast<int64_t>(size);
}

void register_arange(Library& lib, const std::string& fam) {
  OpBuilder b(lib,
              "aten::arange.start_step(Scalar start, Scalar end, Scalar step=1, *, ScalarType? dtype=None, "
              "Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor",
              fam, "start, start+step, ... up to end (excluded); int64 for integral arguments, else float32");
  const std::string name = b.name();
  auto allocate = [name](const Scalar& start, const Scalar& end, const Scalar& step, std::optional<DType> dtype,
                         std::optional<Layout> layout, std::optional<Device> device, std::optional<bool> pin_memory) {
    check_strided(name, layout, pin_memory);
    const DType d = arange_dtype(start, end, step, dtype);
    check_arange_args(name, start, end, step, d);
    return empty(Ints{arange_length(name, start, end, step, d)}, TensorOptions(d, device.value_or(Device::cpu())));
  };
  // out[i] = start + step * i in the accumulation type, rounded once to the dtype.
  b.composite_explicit([allocate](const Scalar& start, const Scalar& end, const Scalar& step,
                                  std::optional<DType> dtype, std::optional<Layout> layout,
                                  std::optional<Device> device, std::optional<bool> pin_memory) {
    Tensor out = allocate(start, end, step, dtype, layout, device, pin_memory);
    Tensor values = empty(out.sizes(), TensorOptions(wide_dtype(out.dtype())));
    const bool half_precision = out.dtype() == DType::Float16 || out.dtype() == DType::BFloat16;
    visit_wide<Domain::Real>("aten::arange.start_step", out.dtype(), [&](auto tag) {
      using W = typename decltype(tag)::type;
      W* v = values.mutable_data_ptr<W>();
      for (int64_t i = 0; i < out.numel(); ++i) {
        if constexpr (std::is_same_v<W, double>) {
          // float16/bfloat16 accumulate in float, as PyTorch's acc_type on CPU
          v[i] = half_precision ? static_cast<double>(start.to<float>() + step.to<float>() * static_cast<float>(i))
                                : start.to_double() + step.to_double() * static_cast<double>(i);
        } else {
          v[i] = start.to_int() + step.to_int() * i;
        }
      }
    });
    out.copy_(values);
    return out;
  });
  b.fake(allocate).dtypes(kReal);
  backend_select(lib, name, 5);
  b.samples([](SampleDraw& draw) {
    const bool floating = draw.coin(40);
    auto number = [&](double lo, double hi) {
      return floating && draw.coin() ? Scalar(draw.real(lo, hi))
                                     : Scalar(draw.integer(static_cast<int64_t>(lo), static_cast<int64_t>(hi)));
    };
    Scalar start = number(-5, 5);
    Scalar step = draw.coin(70) ? number(1, 3) : Scalar(-draw.integer(1, 3));
    if (step.to_double() == 0) step = Scalar(int64_t{1});
    const double length = static_cast<double>(draw.integer(0, 6));
    Scalar end = Scalar(start.to_double() + step.to_double() * length);
    if (start.is_integral() && step.is_integral())
      end = Scalar(start.to_int() + step.to_int() * static_cast<int64_t>(length));
    std::optional<DType> dtype = draw_optional_dtype(draw);
    if (dtype && *dtype == DType::UInt8) {  // non-negative values for unsigned
      start = Scalar(draw.integer(0, 5));
      step = Scalar(draw.integer(1, 3));
      end = Scalar(start.to_int() + step.to_int() * static_cast<int64_t>(length));
    }
    Stack args{IValue(start), IValue(end), IValue(step), dtype_value(dtype)};
    push_factory_options(args, draw);
    return args;
  });
}

void register_empty(Library& lib, const std::string& fam) {
  {
    OpBuilder b(lib,
                "aten::empty_strided(SymInt[] size, SymInt[] stride, *, ScalarType? dtype=None, Layout? layout=None, "
                "Device? device=None, bool? pin_memory=None) -> Tensor",
                fam, "a new tensor with the given sizes and strides (values: Note [Uninitialised memory])");
    auto kernel = [name = b.name()](Ints size, Ints stride, std::optional<DType> dtype, std::optional<Layout> layout,
                                    std::optional<Device> device, std::optional<bool> pin_memory) {
      check_strided(name, layout, pin_memory);
      check_sizes(name, size);
      OPCONFORM_CHECK(size.size() == stride.size(), ErrorCode::kInvalidArgument, name, ": argument 'size' has ",
                      size.size(), " entries but 'stride' has ", stride.size());
      return empty_strided(size, stride, TensorOptions(dtype.value_or(DType::Float32), device.value_or(Device::cpu())));
    };
    b.composite_explicit([kernel](Ints size, Ints stride, std::optional<DType> dtype, std::optional<Layout> layout,
                                  std::optional<Device> device, std::optional<bool> pin_memory) {
      Tensor out = kernel(std::move(size), std::move(stride), dtype, layout, device, pin_memory);
      fill_uninitialised(out);
      return out;
    });
    b.fake(kernel).dtypes(kAll);
    backend_select(lib, b.name(), 4);
    b.samples([](SampleDraw& draw) {
      Ints size = draw_size(draw);
      Ints stride(size.size());
      for (auto& s : stride) s = draw.integer(0, 6);
      Stack args{IValue(size), IValue(stride), dtype_value(draw_optional_dtype(draw))};
      push_factory_options(args, draw);
      return args;
    });
  }
  OpBuilder b(
      lib,
      "aten::empty.memory_format(SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, "
      "bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor",
      fam, "a new tensor, contiguous or channels-last (values: Note [Uninitialised memory])");
  auto kernel = [name = b.name()](Ints size, std::optional<DType> dtype, std::optional<Layout> layout,
                                  std::optional<Device> device, std::optional<bool> pin_memory,
                                  std::optional<MemoryFormat> format) {
    check_strided(name, layout, pin_memory);
    check_sizes(name, size);
    const TensorOptions options(dtype.value_or(DType::Float32), device.value_or(Device::cpu()));
    const MemoryFormat f = format.value_or(MemoryFormat::Contiguous);
    OPCONFORM_CHECK(f != MemoryFormat::Preserve, ErrorCode::kInvalidArgument, name,
                    ": preserve memory format is unsupported (argument 'memory_format')");
    if (f == MemoryFormat::Contiguous) return empty(size, options);
    const size_t rank = f == MemoryFormat::ChannelsLast ? 4 : 5;
    OPCONFORM_CHECK(size.size() == rank, ErrorCode::kInvalidArgument, name, ": required rank ", rank, " tensor to use ",
                    to_string(f), " format, got size ", shape_string(size));
    // Channels-last: a contiguous tensor with the channel dim last, seen in the logical order.
    Ints channels_inner{size[0]}, order{0, static_cast<int64_t>(rank) - 1};
    channels_inner.insert(channels_inner.end(), size.begin() + 2, size.end());
    channels_inner.push_back(size[1]);
    for (int64_t d = 1; d < static_cast<int64_t>(rank) - 1; ++d) order.push_back(d);
    return empty(channels_inner, options).permute(order);
  };
  b.composite_explicit([kernel](Ints size, std::optional<DType> dtype, std::optional<Layout> layout,
                                std::optional<Device> device, std::optional<bool> pin_memory,
                                std::optional<MemoryFormat> format) {
    Tensor out = kernel(std::move(size), dtype, layout, device, pin_memory, format);
    fill_uninitialised(out);
    return out;
  });
  b.fake(kernel).dtypes(kAll);
  backend_select(lib, b.name(), 3);
  b.samples([](SampleDraw& draw) {
    Ints size = draw.shape(0, 5);
    Stack args{IValue(size), dtype_value(draw_optional_dtype(draw))};
    push_factory_options(args, draw);
    IValue format;
    if (draw.coin(30)) format = IValue(MemoryFormat::Contiguous);
    if (size.size() == 4 && draw.coin(40)) format = IValue(MemoryFormat::ChannelsLast);
    if (size.size() == 5 && draw.coin(40)) format = IValue(MemoryFormat::ChannelsLast3d);
    args.push_back(format);
    return args;
  });
}

void register_scalar_tensor(Library& lib, const std::string& fam) {
  OpBuilder b(lib,
              "aten::scalar_tensor(Scalar s, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, "
              "bool? pin_memory=None) -> Tensor",
              fam, "a 0-d tensor holding s (float32 unless dtype says otherwise, as PyTorch)");
  auto kernel = [name = b.name()](const Scalar& s, std::optional<DType> dtype, std::optional<Layout> layout,
                                  std::optional<Device> device, std::optional<bool> pin_memory) {
    check_strided(name, layout, pin_memory);
    Tensor out = empty(Ints{}, TensorOptions(dtype.value_or(DType::Float32), device.value_or(Device::cpu())));
    checked_fill(name, out, s);
    return out;
  };
  b.composite_explicit(kernel).fake(kernel).dtypes(kAll);
  backend_select(lib, b.name(), 3);
  b.samples([](SampleDraw& draw) {
    std::optional<DType> dtype = draw_optional_dtype(draw);
    Stack args{IValue(draw_fill_value(draw, dtype.value_or(DType::Float32))), dtype_value(dtype)};
    push_factory_options(args, draw);
    return args;
  });
}

// ---- random factories (Tag::nondeterministic_seeded; they draw from default_generator()) ----

// Mantissa bits of a floating dtype: a uniform draw k / 2^bits lies in [0, 1) exactly.
int mantissa_bits(DType d) {
  switch (d) {
    case DType::Float16: return 11;
    case DType::BFloat16: return 8;
    case DType::Float32:
    case DType::Complex64: return 24;
    default: return 53;
  }
}

// A random factory: `draw` gives one value per real number (complex: real then imaginary part).
template <typename Draw>
void register_random(Library& lib, const std::string& fam, const char* schema, const char* doc, Draw draw_value) {
  OpBuilder b(lib, schema, fam, doc, {Tag::nondeterministic_seeded});
  auto allocate = [name = b.name()](Ints size, std::optional<DType> dtype, std::optional<Layout> layout,
                                    std::optional<Device> device, std::optional<bool> pin_memory) {
    check_strided(name, layout, pin_memory);
    check_sizes(name, size);
    const DType d = dtype.value_or(DType::Float32);
    OPCONFORM_CHECK(is_floating(d) || is_complex(d), ErrorCode::kNotImplemented, name, ": dtype ", opconform::name(d),
                    " is not supported (floating and complex only)");
    return empty(size, TensorOptions(d, device.value_or(Device::cpu())));
  };
  b.composite_explicit([allocate, draw_value](Ints size, std::optional<DType> dtype, std::optional<Layout> layout,
                                              std::optional<Device> device, std::optional<bool> pin_memory) {
    Tensor out = allocate(std::move(size), dtype, layout, device, pin_memory);
    const int bits = mantissa_bits(out.dtype());
    Generator& gen = default_generator();
    Tensor values = empty(out.sizes(), TensorOptions(is_complex(out.dtype()) ? DType::Complex128 : DType::Float64));
    if (is_complex(out.dtype())) {
      complex128* v = values.mutable_data_ptr<complex128>();
      for (int64_t i = 0; i < out.numel(); ++i) {
        const double re = draw_value(gen, bits, true);
        v[i] = complex128(re, draw_value(gen, bits, true));
      }
    } else {
      double* v = values.mutable_data_ptr<double>();
      for (int64_t i = 0; i < out.numel(); ++i) v[i] = draw_value(gen, bits, false);
    }
    out.copy_(values);
    return out;
  });
  b.fake(allocate).dtypes(concat_dtypes(kFloating, {DType::Complex64, DType::Complex128}));
  backend_select(lib, b.name(), 3);
  b.samples([](SampleDraw& draw) {
    Stack args{IValue(draw_size(draw)), dtype_value(draw_optional_dtype(draw))};
    push_factory_options(args, draw);
    return args;
  });
}

void register_randperm(Library& lib, const std::string& fam) {
  OpBuilder b(lib,
              "aten::randperm(SymInt n, *, ScalarType? dtype=4, Layout? layout=None, Device? device=None, "
              "bool? pin_memory=None) -> Tensor",
              fam, "a random permutation of 0..n-1 (int64 by default)", {Tag::nondeterministic_seeded});
  auto allocate = [name = b.name()](int64_t n, std::optional<DType> dtype, std::optional<Layout> layout,
                                    std::optional<Device> device, std::optional<bool> pin_memory) {
    check_strided(name, layout, pin_memory);
    OPCONFORM_CHECK(n >= 0, ErrorCode::kInvalidArgument, name, ": argument 'n' must be non-negative, got ", n);
    const DType d = dtype.value_or(DType::Int64);
    OPCONFORM_CHECK(d != DType::Bool && !is_complex(d), ErrorCode::kNotImplemented, name, ": dtype ",
                    opconform::name(d), " is not supported");
    // Every value 0..n-1 must be representable (PyTorch's check_supported_max_int_with_precision).
    OPCONFORM_CHECK(!overflows(Scalar(std::max<int64_t>(n - 1, 0)), d), ErrorCode::kInvalidArgument, name, ": n ", n,
                    " is too large for result type ", opconform::name(d));
    OPCONFORM_CHECK(!is_floating(d) || n <= (int64_t{1} << mantissa_bits(d)) + 1, ErrorCode::kInvalidArgument, name,
                    ": n ", n, " is too large for the precision of ", opconform::name(d));
    return empty(Ints{n}, TensorOptions(d, device.value_or(Device::cpu())));
  };
  // Fisher-Yates from the front, as PyTorch's CPU kernel: swap i with i + below(n - i).
  b.composite_explicit([allocate](int64_t n, std::optional<DType> dtype, std::optional<Layout> layout,
                                  std::optional<Device> device, std::optional<bool> pin_memory) {
    Tensor out = allocate(n, dtype, layout, device, pin_memory);
    std::vector<int64_t> perm(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) perm[static_cast<size_t>(i)] = i;
    Generator& gen = default_generator();
    for (int64_t i = 0; i + 1 < n; ++i) {
      const auto z = static_cast<int64_t>(gen.below(static_cast<uint64_t>(n - i)));
      std::swap(perm[static_cast<size_t>(i)], perm[static_cast<size_t>(i + z)]);
    }
    out.copy_(from_vector(perm, {n}));
    return out;
  });
  b.fake(allocate).dtypes(kReal);
  backend_select(lib, b.name(), 3);
  b.samples([](SampleDraw& draw) {
    const DType d = draw.dtype();
    const int64_t max = d == DType::UInt8 || d == DType::Int8 ? 100 : 40;
    Stack args{IValue(draw.integer(0, max)), IValue(d)};
    push_factory_options(args, draw);
    return args;
  });
}

}  // namespace

void register_creation(Library& lib) {
  const std::string fam = "creation";
  register_full(lib, fam);
  register_fill_and_full_like(lib, fam);
  register_arange(lib, fam);
  register_empty(lib, fam);
  register_scalar_tensor(lib, fam);
  register_random(lib, fam,
                  "aten::rand(SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, "
                  "bool? pin_memory=None) -> Tensor",
                  "uniform random values in [0, 1) (complex: both parts), float32 by default",
                  [](Generator& gen, int bits, bool) {
                    return std::ldexp(static_cast<double>(gen.below(uint64_t{1} << bits)), -bits);
                  });
  register_random(lib, fam,
                  "aten::randn(SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, "
                  "bool? pin_memory=None) -> Tensor",
                  "standard normal random values (complex: each part with variance 1/2), float32 by default",
                  [](Generator& gen, int, bool complex_part) {
                    return complex_part ? gen.normal() * std::sqrt(0.5) : gen.normal();
                  });
  register_randperm(lib, fam);
}

}  // namespace opconform::reference
