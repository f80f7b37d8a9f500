// Listener: the one interface through which a run's results reach writers (console progress,
// files written at the end). The harness calls on_run_start once, on_case_done after each case
// (op x device x dtype, all its checks), on_running about twice a second while checks run in
// workers, on_run_end once with the complete report.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "opconform/reports/report.h"

namespace opconform::reports {

// A check running now and for how long (Listener::on_running).
struct RunningCheck {
  std::string op, check, device, dtype;
  double seconds = 0;
};

class Listener {
 public:
  virtual ~Listener() = default;
  virtual void on_run_start(const RunInfo& info, size_t total_cases) { (void)info, (void)total_cases; }
  // `results`: the case's results (one per check); done counts cases finished so far.
  virtual void on_case_done(const std::vector<CaseResult>& results, size_t done, size_t total) {
    (void)results, (void)done, (void)total;
  }
  // The checks running now, the longest-running first (empty: none).
  virtual void on_running(const std::vector<RunningCheck>& running) { (void)running; }
  virtual void on_run_end(const Report& report) { (void)report; }
};

// Forwards every event to each listener in order.
class Listeners : public Listener {
 public:
  void add(Listener& listener) { listeners_.push_back(&listener); }
  void on_run_start(const RunInfo& info, size_t total) override {
    for (auto* l : listeners_) l->on_run_start(info, total);
  }
  void on_case_done(const std::vector<CaseResult>& results, size_t done, size_t total) override {
    for (auto* l : listeners_) l->on_case_done(results, done, total);
  }
  void on_running(const std::vector<RunningCheck>& running) override {
    for (auto* l : listeners_) l->on_running(running);
  }
  void on_run_end(const Report& report) override {
    for (auto* l : listeners_) l->on_run_end(report);
  }

 private:
  std::vector<Listener*> listeners_;
};

}  // namespace opconform::reports
