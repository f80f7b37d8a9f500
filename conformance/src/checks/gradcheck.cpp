// gradcheck and gradgradcheck (CHECKS.md, "Gradients"), and their Check wrappers.
//
// Note [One Jacobian checker for both orders]: both checks compare the Jacobian of some function
// F(inputs) -> outputs, computed twice: numerically (central differences of F evaluated without a
// graph) and analytically (backward through a recorded F). gradcheck's F is the op itself;
// gradgradcheck's F is (inputs, grad_outputs) -> backward(grad_outputs). So one checker
// (check_jacobian) takes a Problem with two evaluators and does the slow/fast comparison, the
// reentrancy, zero-grad_outputs and shape/dtype checks; each check only builds its Problem.
//
// Note [Points where the op is not differentiable]: at a kink (|x| at 0) or a jump (floor at an
// integer) within eps of the sample, the central difference is no derivative at all. So a
// numerical entry that disagrees with the analytical one is looked at more closely:
//   - within the rounding noise of the difference quotient (a few ulps of |f| over the step), the
//     analytical value is as right as the estimate can tell;
//   - from f at x -/+ eps/2 too: when the quotient changes with the step, f jumps (or bends too
//     fast) within eps and any analytical value is accepted (a convention, such as 0 for floor);
//     when the one-sided differences disagree, f has a kink there and an analytical value between
//     them (a subgradient) is accepted, one outside them fails;
//   - a last look with a ten times wider step, where rounding noise (extreme values, strong
//     cancellation) is ten times smaller: a wrong formula disagrees at every step.
// Samples holding NaN or infinity (in an input, or in the output at the sample), values too
// large for the step, or a step that leaves the op's domain have no finite differences: the
// check is skipped for them, with the reason.
//
// Everything works on float64 values held as std::vector<double> (the perturbations need exact
// control of every element), turned into fresh tensors for each evaluation: the sample is never
// touched, and no saved tensor of a recorded graph is ever written to.
#include "opconform/conformance/gradcheck.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <iomanip>
#include <limits>
#include <optional>
#include <random>
#include <sstream>
#include <variant>

#include "opconform/conformance/detail/builtin_checks.h"
#include "opconform/conformance/detail/check_kit.h"
#include "opconform/conformance/detail/missing_backward.h"
#include "opconform/conformance/sample.h"
#include "opconform/conformance/tolerance.h"
#include "opconform/core/autograd.h"

namespace opconform::conformance {
namespace {

using autograd::NoGradGuard;
using opconform::detail::concat;

std::string fmt(double v) {
  std::ostringstream out;
  out << std::setprecision(10) << v;
  return out.str();
}

// The row-major multi-index of a flat element index (what messages show).
std::vector<int64_t> unravel(int64_t flat, const std::vector<int64_t>& sizes) {
  std::vector<int64_t> index(sizes.size());
  for (size_t d = sizes.size(); d-- > 0;) {
    index[d] = sizes[d] ? flat % sizes[d] : 0;
    flat = sizes[d] ? flat / sizes[d] : 0;
  }
  return index;
}

int64_t numel_of(const std::vector<int64_t>& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

// One value F is differentiated with respect to (an input of the op, or a grad_output).
struct Variable {
  std::string name;  // "input 'x' (argument 0)" / "grad_output 0"
  std::vector<int64_t> sizes;
  Device device;
  std::vector<double> values;  // row-major
  DType dtype = DType::Float64;  // what the op sees (GradcheckOptions::dtype)
  std::string subject;           // for causes: "x" (the argument), "grad_output of output 0"

  Tensor make(const std::vector<double>& v) const { return from_vector<double>(v, sizes).to(dtype, device); }
  Tensor make() const { return make(values); }
};

// What check_jacobian checks (Note [One Jacobian checker for both orders]).
struct Problem {
  std::string check;    // "gradcheck" / "gradgradcheck"
  std::string op_name;
  std::string sample;   // the sample's description, for messages
  std::vector<Variable> inputs;
  std::vector<std::string> output_names;  // one per output of F
  std::vector<std::string> output_subjects;  // for causes: "output 0", "the gradient of x"
  // F on plain tensors (no graph needed): one tensor per output, any floating dtype.
  std::function<std::vector<Tensor>(const std::vector<Tensor>&)> evaluate;
  // F recorded for backward on leaves that require grad. An output that does not require grad is
  // a constant of the inputs (its analytical Jacobian is zero).
  std::function<std::vector<Tensor>(const std::vector<Tensor>&)> record;
};

CheckResult result(const Problem& p, Outcome outcome, std::string message, std::optional<Cause> cause) {
  CheckResult r;
  r.check = p.check;
  r.outcome = outcome;
  r.message = std::move(message);
  r.cause = std::move(cause);
  if (outcome == Outcome::failed) r.repro = ::opconform::conformance::detail::repro_line(p.check, p.op_name, p.sample);
  return r;
}

CheckResult passed(const Problem& p) { return result(p, Outcome::passed, "", std::nullopt); }

// Why a sample cannot judge the gradient: not_applicable, `title` without values.
CheckResult skipped(const Problem& p, std::string message, std::string subject, std::string title) {
  return result(p, Outcome::skipped, std::move(message),
                Cause{FindingKind::not_applicable, std::move(subject), std::move(title)});
}

CheckResult failed(const Problem& p, FindingKind kind, std::string subject, std::string title, std::string message) {
  return result(p, Outcome::failed, std::move(message), Cause{kind, std::move(subject), std::move(title)});
}

// The cause of a wrong gradient of output k with respect to input i.
CheckResult wrong_gradient(const Problem& p, size_t k, size_t i, std::string message) {
  return failed(p, FindingKind::wrong_gradient, p.inputs[i].subject,
                concat("the gradient of ", p.output_subjects.at(k), " with respect to ", p.inputs[i].subject, " is wrong"),
                std::move(message));
}

std::vector<double> values_of(const Tensor& t) {
  return t.defined() ? t.detach().to(DType::Float64, Device::cpu()).contiguous().to_vector<double>() : std::vector<double>{};
}

std::vector<int64_t> sizes_of(const Tensor& t) { return {t.sizes().begin(), t.sizes().end()}; }

// The gradients of `outputs` w.r.t. `leaves` for one set of grad_outputs (an undefined result
// stays undefined: the input is unused). Outputs that do not require grad are left out.
std::vector<Tensor> backward(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs,
                             const std::vector<Tensor>& leaves) {
  std::vector<Tensor> outs, gos;
  for (size_t k = 0; k < outputs.size(); ++k) {
    if (outputs[k].requires_grad()) {
      outs.push_back(outputs[k]);
      gos.push_back(grad_outputs[k]);
    }
  }
  return autograd::grad(outs, leaves, gos, /*retain_graph=*/true, /*create_graph=*/false, /*allow_unused=*/true);
}

// A gradient must look like its input: same shape, float64 (the inputs are float64 copies).
// Runs the same backward again: a different result means the backward keeps state between
// calls (reentrancy). `which` says which grad_outputs were used, for the message.
std::optional<CheckResult> reentrancy_problem(const Problem& p, const std::vector<Tensor>& grads,
                                              const std::vector<Tensor>& outputs, const std::vector<Tensor>& gos,
                                              const std::vector<Tensor>& leaves, const std::string& which) {
  std::vector<Tensor> again = backward(outputs, gos, leaves);
  for (size_t i = 0; i < grads.size(); ++i) {
    // Bitwise: a NaN gradient computed twice is the same result (NaN != NaN as a double).
    if (grads[i].defined() != again[i].defined() ||
        (grads[i].defined() && !bitwise_equal(grads[i], again[i]))) {
      return failed(p, FindingKind::nondeterminism, p.inputs[i].subject,
                    concat("backward is not reentrant: the same grad_outputs give different gradients of ", p.inputs[i].subject),
                    concat(p.check, " of '", p.op_name, "': backward is not reentrant: the same grad_outputs (", which,
                    ") gave different gradients of ", p.inputs[i].name,
                    " on a second backward. Backward must be a pure function of its saved values and grad_outputs "
                    "(no counters, no state kept between calls). Sample: ", p.sample, "."));
    }
  }
  return std::nullopt;
}

std::optional<CheckResult> check_gradient_metadata(const Problem& p, const std::vector<Tensor>& grads,
                                                   const std::vector<Tensor>& leaves, bool check_dtype) {
  for (size_t i = 0; i < grads.size(); ++i) {
    if (!grads[i].defined()) continue;
    if (sizes_of(grads[i]) != sizes_of(leaves[i])) {
      return failed(p, FindingKind::shape_mismatch, p.inputs[i].subject,
                    concat("the gradient of ", p.inputs[i].subject, " is not shaped like it"),
                    concat(p.check, " of '", p.op_name, "': the gradient of ", p.inputs[i].name, " has shape ",
                           shape_string(sizes_of(grads[i])), " but the input has shape ", shape_string(sizes_of(leaves[i])),
                           "; backward must return one gradient per argument, shaped like it."));
    }
    if (check_dtype && grads[i].dtype() != leaves[i].dtype()) {
      return failed(p, FindingKind::dtype_mismatch, p.inputs[i].subject,
                    concat("the gradient of ", p.inputs[i].subject, " has another dtype than it"),
                    concat(p.check, " of '", p.op_name, "': the gradient of ", p.inputs[i].name, " has dtype ",
                           name(grads[i].dtype()), " but the input has dtype ", name(leaves[i].dtype()), "."));
    }
  }
  return std::nullopt;
}

// Zeros, or a unit vector at `hot`, for one grad_output shaped like `like`.
Tensor grad_output_like(const Tensor& like, std::optional<int64_t> hot) {
  std::vector<double> v(static_cast<size_t>(like.numel()), 0.0);
  if (hot) v[static_cast<size_t>(*hot)] = 1.0;
  return from_vector<double>(v, like.sizes()).to(like.dtype(), like.device());
}

// Whether the gradient of input i is itself infinite or NaN at the sample (grad_outputs all
// ones): then zero grad_outputs give 0 * inf = NaN without the backward being wrong.
bool gradient_overflows(const std::vector<Tensor>& outputs, const std::vector<Tensor>& leaves, size_t i) {
  std::vector<Tensor> ones;
  for (const Tensor& out : outputs) {
    ones.push_back(from_vector<double>(std::vector<double>(static_cast<size_t>(out.numel()), 1.0), out.sizes())
                       .to(out.dtype(), out.device()));
  }
  for (double g : values_of(backward(outputs, ones, leaves).at(i)))
    if (std::isinf(g)) return true;  // NaN is no overflow: a backward making NaN is a finding
  return false;
}

std::vector<double> random_unit(std::mt19937_64& rng, size_t n) {
  std::normal_distribution<double> normal;
  std::vector<double> v(n);
  double norm = 0;
  for (auto& x : v) {
    x = normal(rng);
    norm += x * x;
  }
  norm = std::sqrt(norm);
  for (auto& x : v) x = norm > 0 ? x / norm : 0;
  return v;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) s += a[i] * b[i];
  return s;
}

std::vector<Tensor> make_inputs(const Problem& p) {
  std::vector<Tensor> ts;
  for (const auto& v : p.inputs) ts.push_back(v.make());
  return ts;
}

std::vector<Tensor> make_leaves(const Problem& p) {
  std::vector<Tensor> leaves = make_inputs(p);
  for (auto& l : leaves) l.set_requires_grad(true);
  return leaves;
}

// The outputs of F at `inputs`, as values (the shape comes from the recorded run).
std::vector<std::vector<double>> evaluate_values(const Problem& p, const std::vector<Tensor>& inputs) {
  std::vector<std::vector<double>> out;
  for (const Tensor& t : p.evaluate(inputs)) out.push_back(values_of(t));
  return out;
}

// gradcheck's own pair (not the dtype defaults: the values are float64 finite differences).
Tolerance tolerance_of(const GradcheckOptions& o) {
  Tolerance t;
  t.rtol = o.rtol;
  t.atol = o.atol;
  return t;
}

// f around one point, for one numerical Jacobian entry: at x - eps, x, x + eps, and (only when
// the central difference disagrees with the analytical value) at x -/+ eps/2.
struct Stencil {
  double minus, base, plus;
  std::optional<double> half_minus, half_plus;
};

bool close_enough(double analytical, double numerical, const GradcheckOptions& o) {
  return std::abs(analytical - numerical) <= o.atol + o.rtol * std::abs(numerical);
}

// |x| * kLostStep / eps above 1 means x + eps is within a thousand ulps of x: the step is lost.
constexpr double kLostStep = 1.0 / (1e3 * std::numeric_limits<double>::epsilon());

enum class Smoothness { smooth, kink, jump };

// What f looks like around the point, from a full stencil (half steps included).
Smoothness classify(const Stencil& s, double eps) {
  // A smooth f changes these by O(eps f''), small next to the bounds for |f''| well under 1e3.
  auto differ = [](double a, double b) { return std::abs(a - b) > 1e-3 * (1 + std::abs(a) + std::abs(b)); };
  const double central = (s.plus - s.minus) / (2 * eps), half_central = (*s.half_plus - *s.half_minus) / eps;
  // The quotient changes with the step: f jumps within eps, or bends too fast for the step (a
  // kink between eps/2 and eps away reads the same); finite differences say nothing there.
  if (differ(central, half_central)) return Smoothness::jump;
  const double left = (s.base - s.minus) / eps, right = (s.plus - s.base) / eps;
  return differ(left, right) ? Smoothness::kink : Smoothness::smooth;
}

// The numerical value the analytical one is compared with (Note [Points where the op is not
// differentiable]): the central difference at smooth points; at a jump the analytical value,
// whatever convention it follows; at a kink the analytical value when it lies between the
// one-sided differences, else the central difference (which then fails).
double numerical_entry(const Stencil& s, double eps, double analytical, const GradcheckOptions& o) {
  const double central = (s.plus - s.minus) / (2 * eps);
  // The difference quotient is itself uncertain by the rounding of f: a few ulps of |f| over
  // the step. An analytical value within that of it is as right as the estimate can tell.
  const double rounding = 4 * std::numeric_limits<double>::epsilon() *
                          std::max({std::abs(s.plus), std::abs(s.minus), std::abs(s.base)}) / eps;
  if (std::abs(analytical - central) <= o.atol + o.rtol * std::abs(central) + rounding) return analytical;
  if (!s.half_minus || std::isnan(analytical)) return central;
  switch (classify(s, eps)) {
    case Smoothness::smooth: return central;  // the analytical value is wrong
    case Smoothness::jump: return analytical;
    case Smoothness::kink: break;
  }
  const double left = (s.base - s.minus) / eps, right = (s.plus - s.base) / eps;
  const double lo = std::min(left, right), hi = std::max(left, right);
  const double slack = o.atol + o.rtol * std::max(std::abs(lo), std::abs(hi));
  return analytical >= lo - slack && analytical <= hi + slack ? analytical : central;
}

bool all_finite(const std::vector<double>& values) {
  for (double v : values)
    if (!std::isfinite(v)) return false;
  return true;
}

// Skipped when f is finite at the sample but not a step away: the sample lies within eps of the
// edge of the op's domain (log near 0), where the difference quotient is undefined.
std::optional<CheckResult> domain_edge(const Problem& p, const GradcheckOptions& o,
                                       const std::vector<std::vector<double>>& f_minus,
                                       const std::vector<std::vector<double>>& f_plus, const std::string& what) {
  for (size_t k = 0; k < f_plus.size(); ++k) {
    if (all_finite(f_plus[k]) && all_finite(f_minus.at(k))) continue;
    return skipped(p,
                   concat(p.check, " of '", p.op_name, "': ", what, " lies within eps = ", fmt(o.eps),
                          " of where the op is undefined (NaN or infinity a step away). Sample: ", p.sample, "."),
                   "domain edge", "the sample lies within eps of where the op is undefined");
  }
  return std::nullopt;
}

// Compares one Jacobian block (rows: output elements, columns: input elements) with compare().
struct BlockVerdict {
  bool equal = true;
  bool mistrusted = false;
  std::string message;
};

BlockVerdict compare_block(const Problem& p, const GradcheckOptions& o, size_t k, size_t i,
                           const std::vector<int64_t>& out_sizes, const std::vector<double>& numerical,
                           const std::vector<double>& analytical) {
  const int64_t rows = numel_of(out_sizes), cols = numel_of(p.inputs[i].sizes);
  Comparison c = compare(from_vector<double>(analytical, {rows, cols}), from_vector<double>(numerical, {rows, cols}),
                         tolerance_of(o));
  BlockVerdict v{c.equal, c.mistrusted, {}};
  if (c.equal) return v;
  // compare() decided; find the first offending entry to name it in the caller's terms.
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t col = 0; col < cols; ++col) {
      double n = numerical[r * cols + col], a = analytical[r * cols + col];
      bool both_nan = std::isnan(n) && std::isnan(a);
      if (both_nan || std::abs(a - n) <= o.atol + o.rtol * std::abs(n)) continue;
      v.message = concat(
          p.check, " of '", p.op_name, "': the gradient of ", p.output_names[k], " with respect to ",
          p.inputs[i].name, " is wrong at input element ", shape_string(unravel(col, p.inputs[i].sizes)),
          ", output element ", shape_string(unravel(r, out_sizes)), ": numerical ", fmt(n), " (central differences, eps ",
          fmt(o.eps), ") vs analytical ", fmt(a), " (allowed |difference| <= ", fmt(o.atol), " + ", fmt(o.rtol),
          " * |numerical|). Check the backward formula for this input",
          p.check == "gradgradcheck" ? " (here: the derivative of the backward itself)" : "", ". Sample: ", p.sample,
          ".");
      return v;
    }
  }
  v.message = concat(p.check, " of '", p.op_name, "': the gradient of ", p.output_names[k],
                             " with respect to ", p.inputs[i].name, " differs: ", c.mismatch, ". Sample: ", p.sample, ".");
  return v;
}

// analytical[k][i]: rows of output k's elements, columns of input i's elements.
using Jacobians = std::vector<std::vector<std::vector<double>>>;

// Zero Jacobians, one block per (output, input).
Jacobians zero_jacobians(const Problem& p, const std::vector<Tensor>& outputs) {
  Jacobians j(outputs.size());
  for (size_t k = 0; k < outputs.size(); ++k) {
    for (const Variable& in : p.inputs) j[k].emplace_back(static_cast<size_t>(outputs[k].numel() * numel_of(in.sizes)), 0.0);
  }
  return j;
}

// The analytical Jacobian, one row (one output element) per backward; the failure when a
// gradient has the wrong metadata or the backward is not reentrant.
std::optional<CheckResult> analytical_jacobian(const Problem& p, const GradcheckOptions& o, const std::vector<Tensor>& leaves,
                                               const std::vector<Tensor>& outputs, Jacobians& analytical) {
  const size_t n_in = p.inputs.size(), n_out = outputs.size();
  for (size_t k = 0; k < n_out; ++k) {
    if (!outputs[k].requires_grad()) continue;  // a constant: its analytical rows stay zero
    for (int64_t m = 0; m < outputs[k].numel(); ++m) {
      std::vector<Tensor> gos;
      for (size_t q = 0; q < n_out; ++q) gos.push_back(grad_output_like(outputs[q], q == k ? std::optional(m) : std::nullopt));
      std::vector<Tensor> grads = backward(outputs, gos, leaves);
      if (auto bad = check_gradient_metadata(p, grads, leaves, o.check_grad_dtypes)) return bad;
      // Once per output is enough to see a backward that keeps state.
      if (o.check_reentrancy && m == 0) {
        if (auto bad = reentrancy_problem(p, grads, outputs, gos, leaves,
                                          concat("one-hot at element ", shape_string(unravel(m, sizes_of(outputs[k]))),
                                                 " of ", p.output_names[k]))) {
          return bad;
        }
      }
      for (size_t i = 0; i < n_in; ++i) {
        std::vector<double> row = values_of(grads[i]);
        const size_t cols = static_cast<size_t>(numel_of(p.inputs[i].sizes));
        for (size_t c = 0; c < row.size() && c < cols; ++c) analytical[k][i][static_cast<size_t>(m) * cols + c] = row[c];
      }
    }
  }
  return std::nullopt;
}

// Slow mode: every Jacobian entry. The analytical Jacobian comes one row (one output element)
// per backward, the numerical one column (one input element) per pair of forwards.
CheckResult check_slow(const Problem& p, const GradcheckOptions& o, const std::vector<Tensor>& leaves,
                       const std::vector<Tensor>& outputs) {
  const size_t n_in = p.inputs.size(), n_out = outputs.size();
  Jacobians analytical = zero_jacobians(p, outputs), numerical = zero_jacobians(p, outputs);
  std::vector<std::vector<int64_t>> out_sizes(n_out);
  for (size_t k = 0; k < n_out; ++k) out_sizes[k] = sizes_of(outputs[k]);
  if (auto bad = analytical_jacobian(p, o, leaves, outputs, analytical)) return *bad;

  std::vector<Tensor> inputs = make_inputs(p);
  const auto f_base = evaluate_values(p, inputs);
  for (size_t i = 0; i < n_in; ++i) {
    const Variable& var = p.inputs[i];
    const size_t cols = var.values.size();
    for (size_t j = 0; j < cols; ++j) {
      std::vector<double> plus = var.values, minus = var.values;
      plus[j] += o.eps;
      minus[j] -= o.eps;
      inputs[i] = var.make(plus);
      auto f_plus = evaluate_values(p, inputs);
      inputs[i] = var.make(minus);
      auto f_minus = evaluate_values(p, inputs);
      if (auto edge = domain_edge(p, o, f_minus, f_plus, concat(var.name, " element ", shape_string(unravel(static_cast<int64_t>(j), var.sizes))))) return *edge;
      // evaluated on a mismatch only
      std::vector<std::vector<double>> f_half_plus, f_half_minus, f_wide_plus, f_wide_minus;
      for (size_t k = 0; k < n_out; ++k) {
        if (f_plus.at(k).size() != static_cast<size_t>(outputs[k].numel())) {
          return failed(p, FindingKind::shape_mismatch, p.output_subjects[k],
                        concat(p.output_subjects[k], " has another number of elements without a graph than with one"),
                        concat(p.check, " of '", p.op_name, "': ", p.output_names[k], " has ", f_plus[k].size(),
                                       " elements without a graph but ", outputs[k].numel(), " with one."));
        }
        for (size_t r = 0; r < f_plus[k].size(); ++r) {
          const double a = analytical[k][i][r * cols + j];
          Stencil st{f_minus[k][r], f_base.at(k)[r], f_plus[k][r], {}, {}};
          if (!close_enough(a, (st.plus - st.minus) / (2 * o.eps), o)) {
            if (f_half_plus.empty()) {
              plus[j] = var.values[j] + o.eps / 2;
              minus[j] = var.values[j] - o.eps / 2;
              inputs[i] = var.make(plus);
              f_half_plus = evaluate_values(p, inputs);
              inputs[i] = var.make(minus);
              f_half_minus = evaluate_values(p, inputs);
            }
            st.half_plus = f_half_plus.at(k).at(r);
            st.half_minus = f_half_minus.at(k).at(r);
          }
          double n = numerical_entry(st, o.eps, a, o);
          if (!close_enough(a, n, o)) {
            // A last look with a ten times wider step: rounding noise (extreme values, strong
            // cancellation) shrinks tenfold there, while a wrong formula stays wrong at any step.
            if (f_wide_plus.empty()) {
              plus[j] = var.values[j] + 10 * o.eps;
              minus[j] = var.values[j] - 10 * o.eps;
              inputs[i] = var.make(plus);
              f_wide_plus = evaluate_values(p, inputs);
              inputs[i] = var.make(minus);
              f_wide_minus = evaluate_values(p, inputs);
            }
            const double wide = (f_wide_plus.at(k).at(r) - f_wide_minus.at(k).at(r)) / (20 * o.eps);
            if (close_enough(a, wide, o)) n = a;
          }
          numerical[k][i][r * cols + j] = n;
        }
      }
    }
    inputs[i] = var.make();
  }

  size_t blocks = 0, mistrusted = 0;
  for (size_t k = 0; k < n_out; ++k) {
    for (size_t i = 0; i < n_in; ++i) {
      BlockVerdict v = compare_block(p, o, k, i, out_sizes[k], numerical[k][i], analytical[k][i]);
      if (!v.equal) return wrong_gradient(p, k, i, v.message);
      ++blocks;
      mistrusted += v.mistrusted ? 1 : 0;
    }
  }
  if (blocks > 0 && mistrusted == blocks) {
    return result(p, Outcome::mistrusted,
                  concat(p.check, " of '", p.op_name, "': every Jacobian entry is zero (or NaN) both ways, ",
                                 "so the comparison proves nothing; use a sample where the output depends on the inputs. Sample: ",
                                 p.sample, "."),
                  Cause{FindingKind::inconclusive, "", "every Jacobian entry is zero (or NaN) both ways"});
  }
  return passed(p);
}

// How v^T f_k behaves along u around the sample (input i moved by t u for t in -eps, 0, eps and
// the half steps), judged against the disagreement it should explain. classify()'s fixed
// thresholds suit one Jacobian entry; along a random direction of a large input the values are
// small (|v^T J u| ~ 1/sqrt(n)), so what counts is whether the step (a jump) or the one-sided
// differences (a kink) move the quotient by a good part of the disagreement: for a smooth f both
// change it by O(eps f'') plus the rounding of f. Kinks on random u and v can cancel in the
// one-sided differences, so they are also measured along |u| weighted by |v|, where each kink of
// one kind (a slope that rises, as relu's at 0 or clamp's at min) adds up instead.
enum class AlongU { smooth, kink, jump, rounding };

AlongU smoothness_along(const Problem& p, const GradcheckOptions& o, std::vector<Tensor>& inputs, size_t i,
                        size_t k, const std::vector<double>& u, const std::vector<double>& v, double disagreement) {
  const Variable& var = p.inputs[i];
  auto output_at = [&](double t, const std::vector<double>& direction) {
    std::vector<double> moved = var.values;
    for (size_t j = 0; j < moved.size(); ++j) moved[j] += t * direction[j];
    inputs[i] = var.make(moved);
    auto f = evaluate_values(p, inputs).at(k);
    inputs[i] = var.make();
    return f;
  };
  std::vector<double> abs_u(u.size()), abs_v(v.size());
  for (size_t j = 0; j < u.size(); ++j) abs_u[j] = std::abs(u[j]);
  for (size_t j = 0; j < v.size(); ++j) abs_v[j] = std::abs(v[j]);
  const auto base = output_at(0, u);
  const Stencil s{dot(v, output_at(-o.eps, u)), dot(v, base), dot(v, output_at(o.eps, u)),
                  dot(v, output_at(-o.eps / 2, u)), dot(v, output_at(o.eps / 2, u))};
  const double abs_minus = dot(abs_v, output_at(-o.eps, abs_u)), abs_base = dot(abs_v, base),
               abs_plus = dot(abs_v, output_at(o.eps, abs_u));
  const double central = (s.plus - s.minus) / (2 * o.eps), half_central = (*s.half_plus - *s.half_minus) / o.eps;
  const double kink = std::max(std::abs((s.base - s.minus) - (s.plus - s.base)),
                               std::abs((abs_base - abs_minus) - (abs_plus - abs_base))) / o.eps;
  const double rounding = 16 * std::numeric_limits<double>::epsilon() *
                          std::max({std::abs(s.plus), std::abs(s.minus), std::abs(abs_plus), std::abs(abs_minus), 1.0}) /
                          o.eps;
  // Within the rounding of the quotient (huge values in the sample): as right as it can tell.
  if (disagreement <= rounding) return AlongU::rounding;
  if (std::abs(central - half_central) > 0.25 * disagreement) return AlongU::jump;
  return kink > 0.25 * disagreement ? AlongU::kink : AlongU::smooth;
}

// Fast mode: per output k and input i, v_k^T J u_i — numerically from one pair of forwards per
// input along u_i, analytically from one backward per output with grad_output v_k.
CheckResult check_fast(const Problem& p, const GradcheckOptions& o, const std::vector<Tensor>& leaves,
                       const std::vector<Tensor>& outputs) {
  std::mt19937_64 rng(o.seed);
  const size_t n_in = p.inputs.size(), n_out = outputs.size();
  std::vector<std::vector<double>> u(n_in), v(n_out);
  for (size_t i = 0; i < n_in; ++i) u[i] = random_unit(rng, p.inputs[i].values.size());
  for (size_t k = 0; k < n_out; ++k) v[k] = random_unit(rng, static_cast<size_t>(outputs[k].numel()));

  // analytical[k][i] = u_i . (J^T v_k)_i
  std::vector<std::vector<double>> analytical(n_out, std::vector<double>(n_in, 0.0));
  for (size_t k = 0; k < n_out; ++k) {
    if (!outputs[k].requires_grad()) continue;
    std::vector<Tensor> gos;
    for (size_t q = 0; q < n_out; ++q) {
      gos.push_back(q == k ? from_vector<double>(v[k], outputs[k].sizes()).to(outputs[k].dtype(), outputs[k].device())
                           : grad_output_like(outputs[q], std::nullopt));
    }
    std::vector<Tensor> grads = backward(outputs, gos, leaves);
    if (auto bad = check_gradient_metadata(p, grads, leaves, o.check_grad_dtypes)) return *bad;
    if (o.check_reentrancy) {
      if (auto bad = reentrancy_problem(p, grads, outputs, gos, leaves, concat("random ones for ", p.output_names[k]))) {
        return *bad;
      }
    }
    for (size_t i = 0; i < n_in; ++i) analytical[k][i] = dot(values_of(grads[i]), u[i]);
  }

  std::vector<Tensor> inputs = make_inputs(p);
  // The first pair a kink or a jump kept from being judged: the result when no other pair fails
  // (every pair is still compared, so a kink on one input cannot hide a wrong gradient of another).
  std::optional<CheckResult> unjudged;
  for (size_t i = 0; i < n_in; ++i) {
    const Variable& var = p.inputs[i];
    std::vector<double> plus = var.values, minus = var.values;
    for (size_t j = 0; j < plus.size(); ++j) {
      plus[j] += o.eps * u[i][j];
      minus[j] -= o.eps * u[i][j];
    }
    inputs[i] = var.make(plus);
    auto f_plus = evaluate_values(p, inputs);
    inputs[i] = var.make(minus);
    auto f_minus = evaluate_values(p, inputs);
    inputs[i] = var.make();
    if (auto edge = domain_edge(p, o, f_minus, f_plus, var.name)) return *edge;
    for (size_t k = 0; k < n_out; ++k) {
      // A disagreement along a random direction may come from elements at kinks or jumps,
      // which only the element-wise slow mode can tell apart (Note [Points where the op is not
      // differentiable]); it also names the element when the backward is wrong.
      const double numerical = dot(v[k], f_plus[k]) / (2 * o.eps) - dot(v[k], f_minus.at(k)) / (2 * o.eps);
      if (close_enough(analytical[k][i], numerical, o)) continue;
      // Past this size the slow mode's Jacobians (and one backward per output element) cost
      // too much: the fast-mode finding is reported as it is.
      int64_t in_elements = 0, out_elements = 0;
      for (const auto& in : p.inputs) in_elements += static_cast<int64_t>(in.values.size());
      for (const auto& out : outputs) out_elements += out.numel();
      // Small enough for slow mode to be cheap (2^16 Jacobian entries: about 10 ms on an
      // elementwise op): it judges every element, kinks and jumps included.
      const int64_t entries = in_elements * out_elements;
      if (out_elements <= 1024 && entries <= (int64_t{1} << 16)) return check_slow(p, o, leaves, outputs);
      // Too large for the element-wise look: classify f along u itself (Note [Points where the op
      // is not differentiable], along one direction). A kink or jump on the way (a large sample
      // of floor, relu, clamp almost always has some element within eps of one) means the
      // central difference is no derivative, and this sample cannot judge the backward; a smooth
      // f along u means the backward is wrong.
      const AlongU along_u = smoothness_along(p, o, inputs, i, k, u[i], v[k], std::abs(analytical[k][i] - numerical));
      if (along_u == AlongU::rounding) continue;
      if (along_u != AlongU::smooth) {
        if (unjudged) continue;
        unjudged = skipped(p,
                       concat(p.check, " (fast mode) of '", p.op_name, "': the op has a ",
                              along_u == AlongU::kink ? "kink" : "jump", " within eps = ", fmt(o.eps),
                              " of this sample along the random direction u for ", p.inputs[i].name,
                              " (one-sided differences disagree), where finite differences give no derivative; the ",
                              "sample is too large to check element by element. Sample: ", p.sample, "."),
                       "kink", "the op is not differentiable near this sample, which is too large to check element by element");
        continue;
      }
      // Smooth along u: the backward is wrong. Slow mode names the element where its cost is
      // bearable (seconds at 2^22 entries: only for a finding, never for a kink).
      if (out_elements <= 4096 && entries <= (int64_t{1} << 22)) return check_slow(p, o, leaves, outputs);
      return wrong_gradient(p, k, i,
                    concat(p.check, " (fast mode) of '", p.op_name, "': the gradient of ", p.output_names[k],
                           " with respect to ", p.inputs[i].name, " is wrong: v^T J u is ", fmt(numerical),
                           " numerically (central differences, eps ", fmt(o.eps), ") but ", fmt(analytical[k][i]),
                           " analytically (u, v random unit vectors, seed ", o.seed, "); the sample is too large ",
                           "to locate the element in slow mode. Sample: ", p.sample, "."));
    }
  }
  return unjudged ? *unjudged : passed(p);
}

// Note [One Jacobian checker for both orders]
CheckResult check_jacobian(const Problem& p, const GradcheckOptions& o) {
  try {
    // Past this magnitude a step of eps changes x by less than a thousand ulps: the difference
    // quotient is rounding noise.
    const double too_large = o.eps * kLostStep;
    for (const auto& var : p.inputs) {
      if (!all_finite(var.values)) {
        return skipped(p,
                       concat(p.check, " of '", p.op_name, "': ", var.name,
                              " holds NaN or infinity, where finite differences are undefined. Sample: ", p.sample, "."),
                       "non-finite input", "an input holds NaN or infinity");
      }
      for (double v : var.values) {
        if (std::abs(v) > too_large) {
          return skipped(p,
                         concat(p.check, " of '", p.op_name, "': ", var.name, " holds ", fmt(v),
                                ", too large for finite differences with eps ", fmt(o.eps), ". Sample: ", p.sample, "."),
                         "large input", "an input is too large for finite differences");
        }
      }
    }
    for (const auto& out : evaluate_values(p, make_inputs(p))) {
      // Outputs so large that the change a step of eps makes is lost in their rounding.
      bool huge = false;
      for (double v : out) huge = huge || std::abs(v) > o.eps * kLostStep;
      if (!all_finite(out) || huge) {
        return skipped(p,
                       concat(p.check, " of '", p.op_name, "': the output at this sample holds NaN, infinity or ",
                              "values too large for a step of eps to show, ",
                              "where finite differences are undefined. Sample: ", p.sample, "."),
                       "non-finite output", "the output holds NaN, infinity or values too large for finite differences");
      }
    }
    // Every input moved by +eps, then by -eps: NaN or infinity there means the sample lies within
    // eps of the edge of the op's domain (checked up front: the gradient there can be infinite).
    for (double step : {o.eps, -o.eps}) {
      std::vector<Tensor> moved;
      for (const auto& var : p.inputs) {
        std::vector<double> v = var.values;
        for (double& x : v) x += step;
        moved.push_back(var.make(v));
      }
      const auto f = evaluate_values(p, moved);
      if (auto edge = domain_edge(p, o, f, f, "the sample")) return *edge;
    }
    std::vector<Tensor> leaves = make_leaves(p);
    std::vector<Tensor> outputs = p.record(leaves);

    if (o.check_zero_grad_outputs) {
      std::vector<Tensor> zeros;
      for (const Tensor& out : outputs) zeros.push_back(grad_output_like(out, std::nullopt));
      std::vector<Tensor> grads = backward(outputs, zeros, leaves);
      if (auto bad = check_gradient_metadata(p, grads, leaves, o.check_grad_dtypes)) return *bad;
      for (size_t i = 0; i < grads.size(); ++i) {
        for (double g : values_of(grads[i])) {
          if (std::isnan(g) && gradient_overflows(outputs, leaves, i)) {
            return skipped(p,
                           concat(p.check, " of '", p.op_name, "': the gradient of ", p.inputs[i].name,
                                  " is not finite at this sample (it overflows), so 0 * gradient is NaN and no ",
                                  "difference quotient can match it. Sample: ", p.sample, "."),
                           "gradient overflow", "the gradient overflows at this sample");
          }
          if (g != 0) {
            return failed(p, FindingKind::wrong_gradient, p.inputs[i].subject,
                          concat("zero grad_outputs give a nonzero gradient of ", p.inputs[i].subject),
                          concat(p.check, " of '", p.op_name, "': zero grad_outputs gave a nonzero gradient of ",
                                         p.inputs[i].name, " (", fmt(g), "); backward must be linear in grad_outputs. ",
                                         "Sample: ", p.sample, "."));
          }
        }
      }
    }

    // Slow mode costs two forwards per input element and one backward per output element: many
    // outputs make it as costly as many inputs (an embedding of a large index tensor into a small
    // weight took 50 s of slow mode in one case).
    int64_t total = 0, out_total = 0;
    for (const auto& var : p.inputs) total += static_cast<int64_t>(var.values.size());
    for (const Tensor& out : outputs) out_total += out.numel();
    bool fast = o.fast_mode.value_or(total > o.fast_mode_threshold || out_total > 16 * o.fast_mode_threshold);
    return fast ? check_fast(p, o, leaves, outputs) : check_slow(p, o, leaves, outputs);
  } catch (const Error& e) {
    // A library that says its backward has no derivative of its own (kNotImplemented from a plugin's
    // second-order backward operator) does not support double backward: not a wrong one.
    if (p.check == "gradgradcheck" && e.code() == ErrorCode::kNotImplemented) {
      return skipped(p, concat("'", p.op_name, "' does not support double backward here: ", e.what()), "double backward",
                     "the op does not support double backward");
    }
    return failed(p, FindingKind::threw, detail::reason_subject(e), "the op or its backward throws",
                  concat(p.check, " of '", p.op_name, "': the op or its backward threw: ", e.what(),
                                 " Sample: ", p.sample, "."));
  }
}

// ---- gradcheck's F: the op ------------------------------------------------------------------

struct OpCall {
  OperatorHandle op;
  Stack args;                // floating tensors as float64 copies, the rest as given
  // Where each differentiated input goes: an argument, or an element of a Tensor[] argument.
  struct Slot {
    size_t arg;
    std::optional<size_t> element;
  };
  std::vector<Slot> slots;
};

// The tensors among the op's returns (Tensor, Tensor[] elements), with names for messages.
std::vector<std::pair<std::string, Tensor>> returned_tensors(const OperatorHandle& op, const Stack& returns) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (size_t j = 0; j < returns.size(); ++j) {
    std::string base = "output " + std::to_string(j);
    if (op.has_schema() && j < op.schema().returns.size() && !op.schema().returns[j].name.empty()) {
      base += " '" + op.schema().returns[j].name + "'";
    }
    if (returns[j].is_tensor()) {
      out.emplace_back(base, returns[j].to_tensor());
    } else if (returns[j].is_tensor_list()) {
      const auto& list = returns[j].to_tensor_list();
      for (size_t e = 0; e < list.size(); ++e) out.emplace_back(base + "[" + std::to_string(e) + "]", list[e]);
    }
  }
  return out;
}

// Puts the differentiated inputs into their places in the arguments.
void place(Stack& stack, const std::vector<OpCall::Slot>& slots, const std::vector<Tensor>& inputs) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    const OpCall::Slot& slot = slots[i];
    if (!slot.element) {
      stack[slot.arg] = IValue(inputs[i]);
      continue;
    }
    std::vector<Tensor> list = stack[slot.arg].to_tensor_list();
    list[*slot.element] = inputs[i];
    stack[slot.arg] = IValue(std::move(list));
  }
}

// The call's arguments for one evaluation: tensors the schema marks written are cloned, so an
// in-place or out= op starts every evaluation from the sample's values, not the last result.
Stack fresh_args(const OperatorHandle& op, const Stack& args) {
  Stack stack = args;
  if (!op.has_schema()) return stack;
  const auto& formals = op.schema().arguments;
  for (size_t a = 0; a < stack.size() && a < formals.size(); ++a) {
    if (formals[a].is_write() && stack[a].is_tensor() && stack[a].to_tensor().defined())
      stack[a] = IValue(stack[a].to_tensor().clone());
  }
  return stack;
}

std::vector<Tensor> run_op(const OpCall& call, const std::vector<Tensor>& inputs) {
  Stack stack = fresh_args(call.op, call.args);
  place(stack, call.slots, inputs);
  ::opconform::conformance::detail::run_boxed(call.op, stack);
  std::vector<Tensor> out;
  for (auto& [name, t] : returned_tensors(call.op, stack)) out.push_back(t);
  return out;
}

// Skipped before the Problem is made.
CheckResult skipped(std::string check, std::string why, std::string subject, std::string title) {
  CheckResult r;
  r.check = std::move(check);
  r.outcome = Outcome::skipped;
  r.message = std::move(why);
  r.cause = Cause{FindingKind::not_applicable, std::move(subject), std::move(title)};
  return r;
}

// Which outputs of gradcheck's F are differentiable: those a recorded call marks as requiring
// grad. Sets `diff_outputs` and the problem's output names; otherwise the skip/failure to return.
std::optional<CheckResult> differentiable_outputs(const OperatorHandle& op, const std::string& check,
                                                  const GradcheckOptions& options, Problem& problem, const OpCall& call,
                                                  std::vector<size_t>& diff_outputs) {
  // Which outputs are differentiable: those a recorded call marks as requiring grad.
  std::vector<Tensor> leaves;
  for (const auto& var : problem.inputs) leaves.push_back(var.make().set_requires_grad(true));
  std::vector<std::pair<std::string, Tensor>> named;
  try {
    Stack stack = fresh_args(op, call.args);
    place(stack, call.slots, leaves);
    ::opconform::conformance::detail::run_boxed(op, stack);
    named = returned_tensors(op, stack);
  } catch (const Error& e) {
    // A library without kernels in this dtype: not a wrong gradient (Note [Gradcheck below float64]).
    if (e.code() == ErrorCode::kNotImplemented) {
      return result(problem, Outcome::unsupported, concat(check, " of '", op.name(), "': the op does not take this sample in ",
                                                          name(options.dtype), ": ", e.what()),
                    detail::not_implemented_cause(e));
    }
    return failed(problem, FindingKind::threw, detail::reason_subject(e), "the op throws on inputs that require grad",
                  concat(check, " of '", op.name(), "': the op threw on ", name(options.dtype),
                         " inputs that require grad: ", e.what(), " Sample: ", problem.sample, "."));
  }
  for (size_t j = 0; j < named.size(); ++j) {
    const Tensor& t = named[j].second;
    if (t.defined() && is_floating(t.dtype()) && t.requires_grad()) {
      diff_outputs.push_back(j);
      problem.output_names.push_back(named[j].first);
      problem.output_subjects.push_back(detail::observable_subject(named[j].first));
    }
  }
  if (diff_outputs.empty()) {
    // Complex outputs are not differentiated here (gradcheck compares real Jacobians); say so
    // rather than blame the autograd kernel.
    const bool complex_output = std::any_of(named.begin(), named.end(), [](const auto& n) {
      return n.second.defined() && is_complex(n.second.dtype()) && n.second.requires_grad();
    });
    if (complex_output) {
      return skipped(check, concat("'", op.name(), "': its differentiable outputs are complex, which ", check,
                                   " does not differentiate yet (real Jacobians only): the gradient is untested here"),
                     "complex", "complex outputs are not differentiated yet");
    }
    return skipped(check, concat("'", op.name(), "' has no differentiable output for this sample (no floating ",
                                 "output requires grad: no autograd kernel, or only integer outputs)"),
                   "no differentiable output", "no differentiable output");
  }
  return std::nullopt;
}

// Prepares gradcheck's F. On success `problem` is set; otherwise the skip/failure to return.
std::optional<CheckResult> prepare(const OperatorHandle& op, const Stack& args, const std::string& check,
                                   const GradcheckOptions& options, Problem& problem, OpCall& call,
                                   std::vector<size_t>& diff_outputs) {
  const double eps = options.eps;
  call.args = args;
  // Each floating tensor (a Tensor argument, or an element of a Tensor[] one) becomes a float64
  // (options.dtype) copy detached from the caller's graph: differentiated when the sample's
  // tensor requires grad, held constant otherwise (in that dtype too, so mixed-dtype ops see one).
  auto widen = [&](const Tensor& t, size_t a, std::optional<size_t> element,
                   const std::string& label, const std::string& subject) -> std::variant<Tensor, CheckResult> {
    Tensor copy = t.detach().to(options.dtype).clone();
    // A constant argument so large that eps is lost next to it swallows the step too.
    const double too_large = eps * kLostStep;
    for (double v : values_of(copy)) {
      if (std::isfinite(v) && std::abs(v) > too_large) {
        return skipped(check, concat("'", op.name(), "': ", label, " holds ", fmt(v),
                                     ", too large for finite differences next to it"),
                       "large input", "an input is too large for finite differences");
      }
    }
    // An argument the op writes is held constant: differentiating it would need a recorded copy
    // of the leaf for every evaluation.
    const bool written = op.has_schema() && a < op.schema().arguments.size() && op.schema().arguments[a].is_write();
    if (t.requires_grad() && !written) {
      call.slots.push_back({a, element});
      problem.inputs.push_back(Variable{label, sizes_of(copy), copy.device(), values_of(copy), options.dtype, subject});
    }
    return copy;
  };
  for (size_t a = 0; a < args.size(); ++a) {
    const std::string arg = "input '" + detail::arg_name(op, a) + "'";
    if (args[a].is_tensor()) {
      const Tensor& t = args[a].to_tensor();
      if (!t.defined() || !is_floating(t.dtype())) continue;
      auto w = widen(t, a, std::nullopt, arg + " (argument " + std::to_string(a) + ")", detail::arg_name(op, a));
      if (auto* r = std::get_if<CheckResult>(&w)) return *r;
      call.args[a] = IValue(std::get<Tensor>(w));
    } else if (args[a].is_tensor_list()) {
      std::vector<Tensor> list = args[a].to_tensor_list();
      for (size_t e = 0; e < list.size(); ++e) {
        if (!list[e].defined() || !is_floating(list[e].dtype())) continue;
        auto w = widen(list[e], a, e, concat(arg, "[", e, "] (argument ", a, ")"), detail::arg_name(op, a));
        if (auto* r = std::get_if<CheckResult>(&w)) return *r;
        list[e] = std::get<Tensor>(w);
      }
      call.args[a] = IValue(std::move(list));
    }
  }
  problem.check = check;
  problem.op_name = op.name();
  problem.sample = describe(args, detail::arg_names(op));
  if (op.has_schema() && op.schema().kind() == SchemaKind::kOut) {
    return skipped(check, concat("'", op.name(), "' is an out= operator: those do not support automatic ",
                                 "differentiation (as in PyTorch); its functional overload is differentiated"),
                   "out=", "out= operators do not support automatic differentiation");
  }
  if (problem.inputs.empty()) {
    const bool complex_input = std::any_of(args.begin(), args.end(), [](const IValue& v) {
      return v.is_tensor() && v.to_tensor().defined() && is_complex(v.to_tensor().dtype()) && v.to_tensor().requires_grad();
    });
    if (complex_input) {
      return skipped(check, concat("'", op.name(), "': its inputs that require grad are complex, which ", check,
                                   " does not differentiate yet (real Jacobians only): the gradient is untested here"),
                     "complex", "complex inputs are not differentiated yet");
    }
    return skipped(check, concat("'", op.name(), "': no floating tensor argument of the sample requires grad"),
                   "requires_grad", "no floating tensor argument requires grad");
  }

  return differentiable_outputs(op, check, options, problem, call, diff_outputs);
}

// Note [Gradients as returned]: a gradient the engine converted to its argument's dtype passes
// on values alone; the audit saw it returned.
CheckResult audited(const Problem& problem, const autograd::GradientAudit& audit, CheckResult r) {
  if (audit.conversions().empty() || r.outcome == Outcome::failed) return r;
  const autograd::ConvertedGradient& c = audit.conversions().front();
  return failed(problem, FindingKind::dtype_mismatch, c.argument,
                concat("the backward returns a gradient of ", c.argument, " in another dtype than it"),
                concat(problem.check, " of '", problem.op_name, "': the backward of '", c.op, "' returned a ",
                       name(c.returned), " gradient for argument '", c.argument, "', which is ", name(c.expected),
                       " (the engine converts it, as PyTorch's does, so the values alone would pass a formula that ",
                       "computes in the wrong dtype). Sample: ", problem.sample, "."));
}

std::vector<Tensor> pick(const std::vector<Tensor>& all, const std::vector<size_t>& which) {
  std::vector<Tensor> out;
  for (size_t j : which) out.push_back(all.at(j));
  return out;
}

}  // namespace

CheckResult gradcheck(const OperatorHandle& op, const Stack& args, const GradcheckOptions& options) {
  autograd::GradientAudit audit;
  Problem problem;
  auto call = std::make_shared<OpCall>(OpCall{op, {}, {}});
  auto diff_outputs = std::make_shared<std::vector<size_t>>();
  if (auto early = prepare(op, args, "gradcheck", options, problem, *call, *diff_outputs)) return *early;
  problem.evaluate = [call, diff_outputs](const std::vector<Tensor>& inputs) {
    NoGradGuard no_grad;  // the numerical Jacobian needs values only
    return pick(run_op(*call, inputs), *diff_outputs);
  };
  problem.record = [call, diff_outputs](const std::vector<Tensor>& leaves) {
    return pick(run_op(*call, leaves), *diff_outputs);
  };
  return audited(problem, audit, check_jacobian(problem, options));
}

CheckResult gradgradcheck(const OperatorHandle& op, const Stack& args, const GradcheckOptions& options) {
  autograd::GradientAudit audit;
  Problem first;
  auto call = std::make_shared<OpCall>(OpCall{op, {}, {}});
  auto diff_outputs = std::make_shared<std::vector<size_t>>();
  if (auto early = prepare(op, args, "gradgradcheck", options, first, *call, *diff_outputs)) return *early;

  // F(inputs..., grad_outputs...) = the gradients of the inputs, one output per input.
  // grad_outputs are random (not one-hot) so every path through the backward is exercised.
  Problem second;
  second.check = "gradgradcheck";
  second.op_name = first.op_name;
  second.sample = first.sample;
  second.inputs = first.inputs;
  const size_t n_in = first.inputs.size();
  try {
    std::vector<Tensor> outputs;
    {
      std::vector<Tensor> leaves;
      for (const auto& var : first.inputs) leaves.push_back(var.make());
      NoGradGuard no_grad;
      outputs = pick(run_op(*call, leaves), *diff_outputs);
    }
    // Second derivatives at a sample where the op itself is not finite mean nothing (gradcheck
    // skips such samples too).
    for (size_t k = 0; k < outputs.size(); ++k) {
      if (!all_finite(values_of(outputs[k]))) {
        return skipped(second,
                       concat("gradgradcheck of '", op.name(), "': ", first.output_names[k],
                              " holds NaN or infinity at this sample. Sample: ", first.sample, "."),
                       "non-finite output", "the output holds NaN or infinity");
      }
    }
    std::mt19937_64 rng(options.seed + 1);
    std::normal_distribution<double> normal;
    for (size_t k = 0; k < outputs.size(); ++k) {
      std::vector<double> g(static_cast<size_t>(outputs[k].numel()));
      for (auto& x : g) x = normal(rng);
      second.inputs.push_back(Variable{"grad_output of " + first.output_names[k], sizes_of(outputs[k]),
                                       outputs[k].device(), g, options.dtype, "grad_output of " + first.output_subjects[k]});
    }
  } catch (const Error& e) {
    return failed(second, FindingKind::threw, detail::reason_subject(e), "the op throws",
                  concat("gradgradcheck of '", op.name(), "': the op threw: ", e.what()));
  }
  for (const auto& var : first.inputs) {
    second.output_names.push_back("the gradient of " + var.name);
    second.output_subjects.push_back("the gradient of " + var.subject);
  }

  // The first backward; with create_graph its result is recorded (second order). Inputs the
  // backward gives no gradient get zeros (a constant).
  auto first_backward = [call, diff_outputs, n_in](const std::vector<Tensor>& vars, bool create_graph) {
    std::vector<Tensor> xs(vars.begin(), vars.begin() + static_cast<std::ptrdiff_t>(n_in));
    std::vector<Tensor> gos(vars.begin() + static_cast<std::ptrdiff_t>(n_in), vars.end());
    if (!create_graph) {
      for (auto& x : xs) x = x.detach().set_requires_grad(true);
    }
    std::vector<Tensor> outs = pick(run_op(*call, xs), *diff_outputs);
    std::vector<Tensor> used_outs, used_gos;
    for (size_t k = 0; k < outs.size(); ++k) {
      if (outs[k].requires_grad()) {
        used_outs.push_back(outs[k]);
        used_gos.push_back(gos[k]);
      }
    }
    std::vector<Tensor> grads = autograd::grad(used_outs, xs, used_gos, /*retain_graph=*/true, create_graph,
                                               /*allow_unused=*/true);
    for (size_t i = 0; i < grads.size(); ++i) {
      if (!grads[i].defined()) grads[i] = zeros(xs[i].sizes(), xs[i].options());
    }
    return grads;
  };
  second.evaluate = [first_backward](const std::vector<Tensor>& vars) { return first_backward(vars, false); };
  second.record = [first_backward](const std::vector<Tensor>& vars) { return first_backward(vars, true); };

  // The claim: with create_graph, some gradient is itself recorded.
  try {
    std::vector<Tensor> leaves = make_leaves(second);
    bool recorded = false;
    for (const Tensor& g : second.record(leaves)) recorded = recorded || g.requires_grad();
    if (!recorded) {
      return skipped("gradgradcheck",
                     concat("'", op.name(), "' does not support double backward: with create_graph = true its ",
                            "backward returns gradients that do not require grad (write the backward with ",
                            "differentiable operators to claim it)"),
                     "double backward", "the op does not support double backward");
    }
  } catch (const Error& e) {
    return failed(second, FindingKind::threw, "backward", "backward with create_graph = true throws",
                  concat("gradgradcheck of '", op.name(), "': backward with create_graph = true threw: ", e.what(),
                                 " Sample: ", second.sample, "."));
  }
  return audited(second, audit, check_jacobian(second, options));
}

namespace detail {
namespace {

// Note [Gradcheck below float64]: finite differences need float64 to judge a gradient tightly,
// and PyTorch's gradcheck asks for it. A library with no float64 kernels (oneDNN, cuDNN: their
// CPU/GPU types stop at float32) would leave every backward formula unchecked, so the check runs
// again in float32 with a step and tolerances float32 can resolve — a central difference with step
// h carries a rounding error near u*|f|/h (u = 6e-8), 6e-5 relative at h = 1e-3 — and says so in
// its message. A wrong formula is still far outside them; a subtly wrong one may pass, which is
// why this is the fallback and not the rule. The rounding error grows with the outputs' size (a
// step of 1e-3 on an output near 100 is lost below float32's resolution there), so atol grows with
// the largest output: kRoundingUlps units of float32 rounding of it, divided by the step.
constexpr double kFloat32Eps = 1e-3, kFloat32Atol = 1e-3, kFloat32Rtol = 1e-2;
constexpr double kFloat32Unit = 0x1p-24, kRoundingUlps = 64;

// The largest finite |value| of the op's floating outputs on float32 copies of the sample (0 when
// it throws): the scale of float32's rounding in its finite differences.
double largest_float32_output(const OperatorHandle& op, const Stack& args) {
  Stack copies = clone_args(args);
  for (auto& v : copies) {
    v = map_tensors(v, [](const Tensor& t) {
      return t.defined() && is_floating(t.dtype()) ? t.detach().to(DType::Float32).clone() : t;
    });
  }
  double largest = 0;
  try {
    NoGradGuard no_grad;
    Stack returns = ::opconform::conformance::detail::call(op, copies);
    for (const IValue& r : returns) {
      map_tensors(r, [&](const Tensor& t) {
        if (t.defined() && is_floating(t.dtype()))
          for (double x : values_of(t))
            if (std::isfinite(x)) largest = std::max(largest, std::abs(x));
        return t;
      });
    }
  } catch (const Error&) {
  }
  return largest;
}

// gradcheck / gradgradcheck on ctx.sample. opcheck's atol/rtol, when given, replace gradcheck's
// own defaults (the dtype defaults do not apply: the comparison is of float64 finite differences).
class GradcheckCheck final : public Check {
 public:
  explicit GradcheckCheck(bool second_order) : second_order_(second_order) {}
  std::string_view name() const override { return second_order_ ? "gradgradcheck" : "gradcheck"; }
  CheckResult run(const CheckContext& ctx) const override {
    if (auto gap = missing_backward(ctx, name())) return *gap;  // Note [Inference-only libraries]
    GradcheckOptions options;
    if (ctx.tolerance.atol) options.atol = *ctx.tolerance.atol;
    if (ctx.tolerance.rtol) options.rtol = *ctx.tolerance.rtol;
    CheckResult r = run_with(ctx, options);
    if (r.outcome != Outcome::unsupported) return r;
    // Note [Gradcheck below float64]
    GradcheckOptions low = options;
    low.dtype = DType::Float32, low.eps = kFloat32Eps;
    const double rounding = kRoundingUlps * kFloat32Unit * largest_float32_output(ctx.op, ctx.sample.args) / low.eps;
    low.atol = ctx.tolerance.atol.value_or(std::max(kFloat32Atol, rounding));
    low.rtol = ctx.tolerance.rtol.value_or(kFloat32Rtol);
    CheckResult fallback = run_with(ctx, low);
    if (fallback.outcome == Outcome::unsupported) {  // not in float32 either: both reasons
      r.message = concat(r.message, "; in float32: ", fallback.message);
      return r;
    }
    const std::string how = concat("in float32 (float64 unsupported; Note [Gradcheck below float64]: eps ", low.eps,
                                   ", atol ", low.atol, ", rtol ", low.rtol, ")");
    fallback.message = fallback.message.empty() ? concat("checked ", how) : concat(fallback.message, " [", how, "]");
    return fallback;
  }

 private:
  CheckResult run_with(const CheckContext& ctx, const GradcheckOptions& options) const {
    return second_order_ ? gradgradcheck(ctx.op, ctx.sample.args, options) : gradcheck(ctx.op, ctx.sample.args, options);
  }
  bool second_order_;
};

}  // namespace

std::unique_ptr<Check> make_gradcheck() { return std::make_unique<GradcheckCheck>(false); }
std::unique_ptr<Check> make_gradgradcheck() { return std::make_unique<GradcheckCheck>(true); }

}  // namespace detail
}  // namespace opconform::conformance
