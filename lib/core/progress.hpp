// Progress of long work on stderr. On a terminal: one line redrawn in place
// (bar, count, rate, ETA, and a status text the caller sets), at most ~10 times
// a second. Not on a terminal (a log file, CI): a plain line every `interval`
// seconds and one at the end, so logs stay short. Quiet mode (-q): nothing.
//
//   Progress p("annealing", total_iters, "it");
//   for (...) { ...; p.advance(1); p.set_status(fmt::format("best {:.1f}", best)); }
//   p.finish();
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace braid {

class Progress {
 public:
  // total = 0 means unknown (no bar, no ETA).
  Progress(std::string label, std::uint64_t total, std::string unit = "",
           double plain_interval_s = 10.0);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void advance(std::uint64_t n = 1);
  void set(std::uint64_t done);
  void set_total(std::uint64_t total);
  void set_status(std::string status);
  // Prints the final line (elapsed time and mean rate). Called by the destructor if needed.
  void finish();

  std::uint64_t done() const noexcept { return done_; }
  double elapsed_seconds() const;

  // Whether stderr is a terminal (decides the style); tests may force either.
  static void force_terminal(int mode);  // -1: detect, 0: no, 1: yes

 private:
  void maybe_draw(bool force);
  std::string render(bool final_line) const;

  std::string label_;
  std::string unit_;
  std::string status_;
  std::uint64_t total_;
  std::uint64_t done_ = 0;
  bool enabled_;
  bool terminal_;
  bool finished_ = false;
  double plain_interval_s_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
  std::uint64_t draws_ = 0;
};

// "1.2 k/s", "3m05s" style helpers, also used by tools' summaries.
std::string format_rate(double per_second, const std::string& unit);
std::string format_duration(double seconds);

}  // namespace braid
