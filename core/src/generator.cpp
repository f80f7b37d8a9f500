#include "opconform/core/generator.h"

#include <cmath>
#include <numbers>

#include "opconform/core/error.h"

namespace opconform {

void Generator::manual_seed(uint64_t seed) {
  std::lock_guard lock(mutex_);
  engine_.seed(seed);
}

double Generator::uniform() {
  std::lock_guard lock(mutex_);
  return static_cast<double>(engine_() >> 11) * 0x1.0p-53;
}

double Generator::normal() {
  double u1 = uniform(), u2 = uniform();
  if (u1 < 0x1.0p-53) u1 = 0x1.0p-53;  // log(0) is not a number
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

uint64_t Generator::below(uint64_t n) {
  OPCONFORM_CHECK(n > 0, ErrorCode::kInvalidArgument, "Generator::below: n must be positive");
  std::lock_guard lock(mutex_);
  // Rejection sampling: no modulo bias.
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t v;
  do v = engine_();
  while (v >= limit);
  return v % n;
}

std::mt19937_64 Generator::state() const {
  std::lock_guard lock(mutex_);
  return engine_;
}

void Generator::set_state(const std::mt19937_64& state) {
  std::lock_guard lock(mutex_);
  engine_ = state;
}

Generator& default_generator() {
  static Generator* g = new Generator();  // never destroyed: used until exit
  return *g;
}

}  // namespace opconform
