// The default random generator (torch.manual_seed / torch.random.fork_rng): random operators
// draw from it, so a seeded run repeats exactly. Properties that compare two runs of a random
// operator restore its state between them (GeneratorStateGuard), as fork_rng does.
//
// Engine: std::mt19937_64, whose sequence the C++ standard fixes, so a seed gives the same
// numbers with every compiler. Thread-safety: one generator per process, guarded by a mutex.
#pragma once

#include <cstdint>
#include <mutex>
#include <random>

namespace opconform {

class Generator {
 public:
  explicit Generator(uint64_t seed = 67280421310721ull) : engine_(seed) {}
  void manual_seed(uint64_t seed);
  // Uniform in [0, 1) with 53 random bits.
  double uniform();
  // Standard normal (Box-Muller, one draw of two uniforms per value: no cached state).
  double normal();
  // Uniform integer in [0, n).
  uint64_t below(uint64_t n);

  // The whole engine state, to restore later (fork_rng).
  std::mt19937_64 state() const;
  void set_state(const std::mt19937_64& state);

 private:
  mutable std::mutex mutex_;
  std::mt19937_64 engine_;
};

// The process's default generator.
Generator& default_generator();
// torch.manual_seed.
inline void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

// Saves the default generator's state and restores it when the scope ends.
class GeneratorStateGuard {
 public:
  GeneratorStateGuard() : saved_(default_generator().state()) {}
  ~GeneratorStateGuard() { default_generator().set_state(saved_); }
  GeneratorStateGuard(const GeneratorStateGuard&) = delete;
  GeneratorStateGuard& operator=(const GeneratorStateGuard&) = delete;
  // Puts the saved state back now (the next run draws what the first one drew).
  void restore() const { default_generator().set_state(saved_); }

 private:
  std::mt19937_64 saved_;
};

}  // namespace opconform
