#include "sched/svg.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <tuple>

namespace braid::sched {
namespace {

constexpr double kWidth = 1400, kLeft = 70, kRight = 20, kRow = 20, kTop = 30, kMemHeight = 170, kGap = 40;
// (forward, backward) colour per model; repeats after six models.
constexpr const char* kColours[][2] = {{"#9ecae1", "#2171b5"}, {"#fcbba1", "#cb181d"}, {"#a1d99b", "#238b45"},
                                       {"#dadaeb", "#6a51a3"}, {"#fdd0a2", "#d94801"}, {"#d9d9d9", "#525252"}};

std::string escape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch == '<') out += "&lt;";
    else if (ch == '>') out += "&gt;";
    else if (ch == '&') out += "&amp;";
    else out += ch;
  }
  return out;
}

}  // namespace

std::string schedule_svg(const Problem& p, const Order& order, const Timing& timing, double serial_peak) {
  const double span = std::max(timing.makespan, 1e-12);
  const double plot_w = kWidth - kLeft - kRight;
  const double timeline_h = kRow * p.devices;
  const double mem_top = kTop + timeline_h + kGap;
  const double height = mem_top + kMemHeight + 50;
  auto x_of = [&](double t) { return kLeft + t / span * plot_w; };

  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" font-family=\"sans-serif\" "
      "font-size=\"10\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      kWidth, height);
  svg += fmt::format("<text x=\"{}\" y=\"18\" font-size=\"13\">makespan {:.6g}, peak activation memory {:.6g}", kLeft,
                     timing.makespan, timing.peak_memory);
  for (std::size_t m = 0; m < p.spec.models.size(); ++m) {
    svg += fmt::format("  \u25A0 {}", escape(p.spec.models[m].name));
  }
  svg += "</text>\n";
  for (std::size_t m = 0; m < p.spec.models.size(); ++m) {
    svg += fmt::format("<rect x=\"{:.0f}\" y=\"8\" width=\"10\" height=\"10\" fill=\"{}\"/>\n", kWidth - kRight - 120 + 60.0 * static_cast<double>(m),
                       kColours[m % 6][1]);
    svg += fmt::format("<text x=\"{:.0f}\" y=\"17\">{}</text>\n", kWidth - kRight - 106 + 60.0 * static_cast<double>(m),
                       escape(p.spec.models[m].name.substr(0, 8)));
  }

  for (int d = 0; d < p.devices; ++d) {
    const double y = kTop + kRow * d;
    svg += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">dev {}</text>\n", kLeft - 6, y + kRow * 0.7, d);
    for (int i = 0; i < p.per_device; ++i) {
      const auto t = static_cast<std::size_t>(order[static_cast<std::size_t>(d * p.per_device + i)]);
      const double x0 = x_of(timing.start[t]), x1 = x_of(timing.end[t]);
      const bool fwd = p.kind[t] == Kind::F;
      const auto m = static_cast<std::size_t>(p.model[t]);
      svg += fmt::format("<rect x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.1f}\" fill=\"{}\" stroke=\"white\" "
                         "stroke-width=\"0.5\"><title>{} r{} s{} mb{} {} [{:.6g}, {:.6g}]</title></rect>\n",
                         x0, y + 1, std::max(0.1, x1 - x0), kRow - 2, kColours[m % 6][fwd ? 0 : 1],
                         escape(p.spec.models[m].name), p.replica[t], p.stage[t], p.micro_batch[t], fwd ? "F" : "B",
                         timing.start[t], timing.end[t]);
      if (x1 - x0 >= 12) {
        svg += fmt::format("<text x=\"{:.2f}\" y=\"{:.1f}\" text-anchor=\"middle\" fill=\"{}\" font-size=\"9\">{}</text>\n",
                           (x0 + x1) / 2, y + kRow * 0.68, fwd ? "black" : "white", p.micro_batch[t]);
      }
    }
  }

  // Memory: events per device (a device runs one subtask at a time, so at equal
  // times a B's release comes before the next F's claim).
  std::vector<std::tuple<double, int, int, double>> events;  // time, release-first flag, device, delta
  for (std::size_t t = 0; t < static_cast<std::size_t>(p.num_tasks); ++t) {
    if (p.kind[t] == Kind::F) events.emplace_back(timing.start[t], 1, p.device[t], p.mem_delta[t]);
    else events.emplace_back(timing.end[t], 0, p.device[t], p.mem_delta[t]);
  }
  std::sort(events.begin(), events.end());
  std::vector<double> level(static_cast<std::size_t>(p.devices), 0.0);
  std::vector<std::pair<double, double>> curve{{0.0, 0.0}};
  for (const auto& [time, flag, dev, delta] : events) {
    (void)flag;
    level[static_cast<std::size_t>(dev)] += delta;
    curve.emplace_back(time, *std::max_element(level.begin(), level.end()));
  }
  const double top_mem = std::max({timing.peak_memory, serial_peak, 1e-12}) * 1.1;
  auto y_of = [&](double v) { return mem_top + kMemHeight - v / top_mem * kMemHeight; };
  svg += fmt::format("<text x=\"{}\" y=\"{:.0f}\" font-size=\"11\">activation memory (highest device)</text>\n", kLeft,
                     mem_top - 8);
  svg += fmt::format("<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{:.0f}\" y2=\"{:.1f}\" stroke=\"black\"/>\n", kLeft,
                     mem_top + kMemHeight, kWidth - kRight, mem_top + kMemHeight);
  svg += fmt::format("<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"black\"/>\n", kLeft, mem_top, kLeft,
                     mem_top + kMemHeight);
  std::string path = fmt::format("M{:.2f},{:.2f}", x_of(0), y_of(0));
  double last = 0;
  for (const auto& [time, value] : curve) {
    path += fmt::format(" L{:.2f},{:.2f} L{:.2f},{:.2f}", x_of(time), y_of(last), x_of(time), y_of(value));
    last = value;
  }
  svg += fmt::format("<path d=\"{}\" fill=\"none\" stroke=\"#2171b5\" stroke-width=\"1.5\"/>\n", path);
  if (serial_peak > 0) {
    svg += fmt::format("<line x1=\"{}\" y1=\"{:.2f}\" x2=\"{:.0f}\" y2=\"{:.2f}\" stroke=\"red\" stroke-dasharray=\"4,3\"/>\n",
                       kLeft, y_of(serial_peak), kWidth - kRight, y_of(serial_peak));
    svg += fmt::format("<text x=\"{:.0f}\" y=\"{:.2f}\" text-anchor=\"end\" fill=\"red\">serial 1F1B peak {:.6g}</text>\n",
                       kWidth - kRight, y_of(serial_peak) - 3, serial_peak);
  }
  svg += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{:.4g}</text>\n", kLeft - 4, y_of(top_mem / 1.1) + 3,
                     top_mem / 1.1);
  svg += fmt::format("<text x=\"{:.0f}\" y=\"{:.0f}\" text-anchor=\"end\">time {:.6g}</text>\n", kWidth - kRight,
                     mem_top + kMemHeight + 16, timing.makespan);
  svg += "</svg>\n";
  return svg;
}

}  // namespace braid::sched
