#include "core/progress.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <fmt/format.h>

#include "core/log.hpp"

namespace braid {
namespace {
int g_force_terminal = -1;
constexpr double kTerminalRedrawSeconds = 0.1;
constexpr int kBarWidth = 24;
}  // namespace

void Progress::force_terminal(int mode) { g_force_terminal = mode; }

std::string format_rate(double per_second, const std::string& unit) {
  const char* suffix = "";
  double v = per_second;
  if (v >= 1e9) { v /= 1e9; suffix = "G"; }
  else if (v >= 1e6) { v /= 1e6; suffix = "M"; }
  else if (v >= 1e3) { v /= 1e3; suffix = "k"; }
  return fmt::format("{:.3g} {}{}/s", v, suffix, unit.empty() ? "" : unit);
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  if (seconds < 10) return fmt::format("{:.2f}s", seconds);
  auto s = static_cast<long long>(std::llround(seconds));
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
}

Progress::Progress(std::string label, std::uint64_t total, std::string unit, double plain_interval_s)
    : label_(std::move(label)),
      unit_(std::move(unit)),
      total_(total),
      enabled_(log::level() >= log::Level::info),
      terminal_(g_force_terminal >= 0 ? g_force_terminal == 1 : ::isatty(STDERR_FILENO) == 1),
      plain_interval_s_(plain_interval_s),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

Progress::~Progress() {
  if (!finished_) finish();
}

double Progress::elapsed_seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void Progress::advance(std::uint64_t n) {
  done_ += n;
  maybe_draw(false);
}

void Progress::set(std::uint64_t done) {
  done_ = done;
  maybe_draw(false);
}

void Progress::set_total(std::uint64_t total) { total_ = total; }

void Progress::set_status(std::string status) { status_ = std::move(status); }

std::string Progress::render(bool final_line) const {
  const double t = elapsed_seconds();
  const double rate = t > 0 ? static_cast<double>(done_) / t : 0.0;
  std::string line = label_ + " ";
  if (total_ > 0 && terminal_ && !final_line) {
    const double frac = std::min(1.0, static_cast<double>(done_) / static_cast<double>(total_));
    const int fill = static_cast<int>(frac * kBarWidth);
    line += "[" + std::string(fill, '#') + std::string(kBarWidth - fill, '.') + "] ";
  }
  line += total_ > 0 ? fmt::format("{}/{}", done_, total_) : fmt::format("{}", done_);
  if (!unit_.empty()) line += " " + unit_;
  if (final_line) {
    line += fmt::format(" in {} ({})", format_duration(t), format_rate(rate, unit_));
  } else {
    line += fmt::format(", {}", format_rate(rate, unit_));
    if (total_ > 0 && rate > 0 && done_ < total_) {
      line += ", ETA " + format_duration(static_cast<double>(total_ - done_) / rate);
    }
  }
  if (!status_.empty()) line += ", " + status_;
  return line;
}

void Progress::maybe_draw(bool force) {
  if (!enabled_ || finished_) return;
  const auto now = std::chrono::steady_clock::now();
  const double since = std::chrono::duration<double>(now - last_draw_).count();
  const double interval = terminal_ ? kTerminalRedrawSeconds : plain_interval_s_;
  if (!force && since < interval) return;
  last_draw_ = now;
  ++draws_;
  if (terminal_) {
    const std::string line = "\r" + log::tool_name() + ": " + render(false) + "\x1b[K";
    std::fputs(line.c_str(), stderr);
    std::fflush(stderr);
  } else {
    log::write(log::Level::info, "", render(false));
  }
}

void Progress::finish() {
  if (finished_) return;
  finished_ = true;
  if (!enabled_) return;
  if (terminal_) {
    std::fputs("\r\x1b[K", stderr);
  }
  log::write(log::Level::info, "", render(true));
}

}  // namespace braid
