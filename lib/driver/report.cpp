#include "driver/report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iterator>
#include <system_error>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/log.hpp"
#include "driver/prediction.hpp"
#include "sched/schedule.hpp"
#include "sched/schedule_json.hpp"
#include "sched/svg.hpp"

namespace braid::driver {
namespace {

namespace fs = std::filesystem;

std::optional<json> read_json_if_there(const fs::path& p) {
  std::error_code ec;
  if (!fs::is_regular_file(p, ec)) return std::nullopt;
  return load_json_file(p.string());
}

// A number of a JSON object, or null.
ordered_json number_or_null(const json& obj, const std::string& key) {
  const auto it = obj.find(key);
  if (it == obj.end() || !it->is_number()) return nullptr;
  return it->get<double>();
}

// --- the picture -------------------------------------------------------------

constexpr double kWidth = 960, kPanelW = 450, kPanelH = 190, kGapX = 30, kMargin = 15;
constexpr double kPlotLeft = 55, kPlotRight = 15, kPlotTop = 28, kPlotBottom = 30;
constexpr const char* kStageColours[] = {"#4292c6", "#fd8d3c", "#74c476", "#9e9ac8"};

std::string esc(const std::string& s) {
  std::string out;
  for (char ch : s) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += ch;
    }
  }
  return out;
}

std::string num(double v) { return fmt::format("{:.2f}", v); }

// A tick label: three significant digits at most.
std::string tick(double v) { return std::abs(v) >= 1000 ? fmt::format("{:.0f}", v) : fmt::format("{:.3g}", v); }

struct Panel {
  double x, y, w, h;
  double plot_x() const { return x + kPlotLeft; }
  double plot_y() const { return y + kPlotTop; }
  double plot_w() const { return w - kPlotLeft - kPlotRight; }
  double plot_h() const { return h - kPlotTop - kPlotBottom; }
};

struct Range {
  double lo = 0, hi = 1;
};

// The frame, title, y ticks and x ticks of a chart over iterations [x0, x1].
void frame(std::string& s, const Panel& p, const std::string& title, Range y, int x0, int x1,
           const char* x_label = "iteration") {
  s += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"13\" font-weight=\"bold\">{}</text>\n", num(p.x + 4), num(p.y + 16),
                   esc(title));
  s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#bbb\"/>\n", num(p.plot_x()),
                   num(p.plot_y()), num(p.plot_w()), num(p.plot_h()));
  for (int k = 0; k <= 4; ++k) {
    const double v = y.lo + (y.hi - y.lo) * k / 4.0;
    const double py = p.plot_y() + p.plot_h() * (1 - k / 4.0);
    s += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#eee\"/>\n", num(p.plot_x()), num(py),
                     num(p.plot_x() + p.plot_w()), num(py));
    s += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"10\" text-anchor=\"end\">{}</text>\n", num(p.plot_x() - 4),
                     num(py + 3), esc(tick(v)));
  }
  const int span = std::max(1, x1 - x0);
  const int step = std::max(1, static_cast<int>(std::ceil(span / 10.0)));
  for (int i = x0; i <= x1; i += step) {
    const double px = p.plot_x() + p.plot_w() * (i - x0) / span;
    s += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"10\" text-anchor=\"middle\">{}</text>\n", num(px),
                     num(p.plot_y() + p.plot_h() + 13), i);
  }
  s += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"10\" text-anchor=\"middle\" fill=\"#555\">{}</text>\n",
                   num(p.plot_x() + p.plot_w() / 2), num(p.plot_y() + p.plot_h() + 26), x_label);
}

struct Point {
  int iteration;
  double value;
};

std::vector<Point> series_of(const ordered_json& rows, const std::string& key) {
  std::vector<Point> pts;
  for (const auto& r : rows) {
    const auto it = r.find(key);
    if (it != r.end() && it->is_number()) pts.push_back({r["iteration"].get<int>(), it->get<double>()});
  }
  return pts;
}

Range range_of(const std::vector<Point>& pts, std::optional<Range> fixed) {
  if (fixed) return *fixed;
  Range r{0, 0};
  bool first = true;
  for (const auto& pt : pts) {
    if (first) r = {pt.value, pt.value};
    r.lo = std::min(r.lo, pt.value);
    r.hi = std::max(r.hi, pt.value);
    first = false;
  }
  if (r.lo > 0) r.lo = 0;  // non-negative figures from 0, so that a rise reads as one
  if (r.hi - r.lo < 1e-9) r.hi = r.lo + 1;
  r.hi += (r.hi - r.lo) * 0.05;
  return r;
}

// A line chart of one series; its <g id="chart-KEY"> holds a <path class="series"> whose
// data-series is KEY and a circle per point.
void line_chart(std::string& s, const Panel& p, const std::string& title, const std::string& key,
                const ordered_json& rows, int x0, int x1, const char* colour, std::optional<Range> fixed = std::nullopt) {
  const auto pts = series_of(rows, key);
  const Range y = range_of(pts, fixed);
  s += fmt::format("<g id=\"chart-{}\">\n", esc(key));
  frame(s, p, title, y, x0, x1);
  if (pts.empty()) {
    s += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"11\" fill=\"#999\" text-anchor=\"middle\">not measured</text>\n",
                     num(p.plot_x() + p.plot_w() / 2), num(p.plot_y() + p.plot_h() / 2));
  } else {
    const int span = std::max(1, x1 - x0);
    auto px = [&](int i) { return p.plot_x() + p.plot_w() * (i - x0) / span; };
    auto py = [&](double v) { return p.plot_y() + p.plot_h() * (1 - (v - y.lo) / (y.hi - y.lo)); };
    std::string d;
    for (std::size_t k = 0; k < pts.size(); ++k) {
      d += fmt::format("{}{} {}", k == 0 ? "M" : " L", num(px(pts[k].iteration)), num(py(pts[k].value)));
    }
    s += fmt::format("<path class=\"series\" data-series=\"{}\" d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"/>\n",
                     esc(key), d, colour);
    for (const auto& pt : pts) {
      s += fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"2.5\" fill=\"{}\"><title>iteration {}: {}</title></circle>\n",
                       num(px(pt.iteration)), num(py(pt.value)), colour, pt.iteration, esc(fmt::format("{:.4g}", pt.value)));
    }
  }
  s += "</g>\n";
}

// Held-out pass@k against k, one curve per evaluated iteration (lighter for the earlier):
// <g id="chart-pass-at-k"> with a <path class="series"> per iteration (data-series "iteration N").
void pass_at_k_chart(std::string& s, const Panel& p, const ordered_json& rows) {
  std::vector<std::pair<int, std::vector<double>>> curves;
  std::size_t n = 1;
  for (const auto& r : rows) {
    if (!r.contains("heldout_pass_at_k")) continue;
    curves.emplace_back(r["iteration"].get<int>(), r["heldout_pass_at_k"].get<std::vector<double>>());
    n = std::max(n, curves.back().second.size());
  }
  s += "<g id=\"chart-pass-at-k\">\n";
  frame(s, p, "held-out pass@k against k (later iterations darker)", Range{0, 1}, 1,
        static_cast<int>(std::max<std::size_t>(n, 2)), "k");
  const double span = double(std::max<std::size_t>(n, 2) - 1);
  for (std::size_t c = 0; c < curves.size(); ++c) {
    const double shade = curves.size() > 1 ? double(c) / double(curves.size() - 1) : 1.0;
    const std::string colour = fmt::format("rgb({},{},{})", int(200 - 150 * shade), int(200 - 170 * shade), int(230 - 80 * shade));
    std::string d;
    for (std::size_t k = 0; k < curves[c].second.size(); ++k) {
      d += fmt::format("{}{} {}", k == 0 ? "M" : " L", num(p.plot_x() + p.plot_w() * double(k) / span),
                       num(p.plot_y() + p.plot_h() * (1 - curves[c].second[k])));
    }
    s += fmt::format("<path class=\"series\" data-series=\"iteration {}\" d=\"{}\" fill=\"none\" stroke=\"{}\" "
                     "stroke-width=\"2\"><title>iteration {}</title></path>\n",
                     curves[c].first, d, colour, curves[c].first);
  }
  s += "</g>\n";
}

// Whether a stage of this row is drawn inside the one before it instead of on top: the
// scoring of a fused rollout ran inside the generation's wall time.
bool nested_stage(const ordered_json& row, std::string_view stage) {
  return stage == "score" && row.value("rollout", "") == "fused";
}

// Each iteration's stage seconds as a stacked bar (generate, score, train, eval); a fused
// rollout's score is drawn hatched inside its generate bar, not added to it.
void stage_chart(std::string& s, const Panel& p, const ordered_json& rows, int x0, int x1) {
  double top = 0;
  for (const auto& r : rows) {
    double sum = 0;
    for (const char* st : kReportStages) {
      if (nested_stage(r, st)) continue;
      if (r["seconds"].contains(st) && r["seconds"][st].is_number()) sum += r["seconds"][st].get<double>();
    }
    top = std::max(top, sum);
  }
  const Range y{0, top > 0 ? top * 1.05 : 1};
  s += "<g id=\"chart-seconds\">\n";
  frame(s, p, "seconds by stage", y, x0, x1);
  const int span = std::max(1, x1 - x0);
  const double bar = std::max(2.0, p.plot_w() / (span + 1) * 0.6);
  for (const auto& r : rows) {
    const int i = r["iteration"].get<int>();
    const double cx = p.plot_x() + p.plot_w() * (i - x0) / span;
    double base = 0;
    for (std::size_t k = 0; k < std::size(kReportStages); ++k) {
      const char* st = kReportStages[k];
      if (!r["seconds"].contains(st) || !r["seconds"][st].is_number()) continue;
      const bool nested = nested_stage(r, st);
      // Nested: the top v seconds of the bar so far (the scoring ends the fused rollout).
      const double v = nested ? std::min(r["seconds"][st].get<double>(), base) : r["seconds"][st].get<double>();
      const double bottom = nested ? base - v : base;
      const double y1 = p.plot_y() + p.plot_h() * (1 - (bottom + v) / y.hi);
      const double hgt = p.plot_h() * v / y.hi;
      s += fmt::format("<rect class=\"stage-{}{}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"{}><title>iteration {} "
                       "{}: {:.2f} s{}</title></rect>\n",
                       st, nested ? " nested" : "", num(cx - bar / 2), num(y1), num(nested ? bar / 2 : bar), num(hgt),
                       kStageColours[k], nested ? " fill-opacity=\"0.7\" stroke=\"#fff\"" : "", i, st,
                       r["seconds"][st].get<double>(), nested ? " (inside the fused rollout's generate time)" : "");
      if (!nested) base += v;
    }
  }
  // Legend.
  double lx = p.x + p.w - 4 * 64;
  for (std::size_t k = 0; k < std::size(kReportStages); ++k) {
    s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{}\"/><text x=\"{}\" y=\"{}\" "
                     "font-size=\"10\">{}</text>\n",
                     num(lx), num(p.y + 8), kStageColours[k], num(lx + 13), num(p.y + 17), kReportStages[k]);
    lx += 64;
  }
  s += "</g>\n";
}

// Each iteration's wall time (its rollout and training steps as braid run ran them) beside
// the prediction of the way it ran: two series in one chart, the prediction dashed.
void prediction_chart(std::string& s, const Panel& p, const ordered_json& rows, int x0, int x1) {
  const auto measured = series_of(rows, "iteration_seconds");
  const auto predicted = series_of(rows, "iteration_predicted");
  std::vector<Point> both = measured;
  both.insert(both.end(), predicted.begin(), predicted.end());
  const Range y = range_of(both, std::nullopt);
  s += "<g id=\"chart-iteration_seconds\">\n";
  frame(s, p, "iteration seconds: measured, predicted (dashed)", y, x0, x1);
  const int span = std::max(1, x1 - x0);
  auto px = [&](int i) { return p.plot_x() + p.plot_w() * (i - x0) / span; };
  auto py = [&](double v) { return p.plot_y() + p.plot_h() * (1 - (v - y.lo) / (y.hi - y.lo)); };
  for (const auto& [key, pts, dash] : {std::tuple{"iteration_seconds", &measured, ""},
                                       std::tuple{"iteration_predicted", &predicted, " stroke-dasharray=\"5,3\""}}) {
    if (pts->empty()) continue;
    std::string d;
    for (std::size_t k = 0; k < pts->size(); ++k) {
      d += fmt::format("{}{} {}", k == 0 ? "M" : " L", num(px((*pts)[k].iteration)), num(py((*pts)[k].value)));
    }
    s += fmt::format("<path class=\"series\" data-series=\"{}\" d=\"{}\" fill=\"none\" stroke=\"#252525\" "
                     "stroke-width=\"2\"{}/>\n",
                     key, d, dash);
    for (const auto& pt : *pts) {
      s += fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"2.5\" fill=\"#252525\"><title>iteration {} {}: {:.3f} s</title>"
                       "</circle>\n",
                       num(px(pt.iteration)), num(py(pt.value)), pt.iteration, key, pt.value);
    }
  }
  if (measured.empty() && predicted.empty()) {
    s += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"11\" fill=\"#999\" text-anchor=\"middle\">not measured</text>\n",
                     num(p.plot_x() + p.plot_w() / 2), num(p.plot_y() + p.plot_h() / 2));
  }
  s += "</g>\n";
}

// One ablation: a row per variant, its measured stage times stacked, its predicted total
// as an outlined bar beneath.
double ablation_panel(std::string& s, double y0, const ordered_json& ab) {
  const auto& variants = ab["variants"];
  const double row = 34, left = 170, right = 60;
  double top = 0;
  for (const auto& v : variants) {
    top = std::max(top, v["measured"].value("total", 0.0));
    if (v.contains("predicted")) top = std::max(top, v["predicted"].value("total", 0.0));
  }
  if (top <= 0) top = 1;
  const double w = kWidth - 2 * kMargin - left - right;
  const double h = 40 + row * static_cast<double>(variants.size()) + 20;
  s += fmt::format("<g id=\"ablation-{}\" class=\"ablation\">\n", ab.value("iteration", 0));
  s += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"13\" font-weight=\"bold\">ablation, iteration {}: stage times "
                   "measured with each fusion on and off (filled; grey: start-up, loads, files), predicted (outlined)</text>\n",
                   num(kMargin + 4), num(y0 + 16), ab.value("iteration", 0));
  double y = y0 + 30;
  for (const auto& v : variants) {
    const std::string name = v.value("name", "?");
    s += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"end\">{}</text>\n", num(kMargin + left - 6),
                     num(y + 12), esc(name));
    double base = 0;
    const auto& m = v["measured"];
    for (std::size_t k = 0; k < std::size(kReportStages); ++k) {
      const char* st = kReportStages[k];
      if (!m.contains(st)) continue;
      const double t = m[st].get<double>();
      s += fmt::format("<rect class=\"measured stage-{}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"16\" fill=\"{}\"><title>{} "
                       "{}: {:.2f} s</title></rect>\n",
                       st, num(kMargin + left + w * base / top), num(y), num(w * t / top), kStageColours[k], esc(name), st, t);
      base += t;
    }
    const double total = m.value("total", base);
    if (total > base) {
      // What the steps took beyond the tools' own times: process start, loads, files.
      s += fmt::format("<rect class=\"measured other\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"16\" fill=\"#d9d9d9\"><title>{} "
                       "start-up, loads and files: {:.2f} s</title></rect>\n",
                       num(kMargin + left + w * base / top), num(y), num(w * (total - base) / top), esc(name), total - base);
    }
    s += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"10\">{:.2f} s</text>\n", num(kMargin + left + w * total / top + 4),
                     num(y + 12), total);
    if (v.contains("predicted") && v["predicted"].contains("total")) {
      const double pt = v["predicted"]["total"].get<double>();
      s += fmt::format("<rect class=\"predicted\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"8\" fill=\"none\" stroke=\"#333\" "
                       "stroke-dasharray=\"3,2\"><title>{} predicted: {:.2f} s</title></rect>\n",
                       num(kMargin + left), num(y + 18), num(w * pt / top), esc(name), pt);
    }
    y += row;
  }
  s += "</g>\n";
  return h;
}

// The first tag's height="N" of an SVG document (0 when absent).
double svg_height(const std::string& svg) {
  const auto open = svg.find("<svg");
  const auto at = svg.find("height=\"", open == std::string::npos ? 0 : open);
  if (at == std::string::npos) return 0;
  return std::atof(svg.c_str() + at + 8);
}
double svg_width(const std::string& svg) {
  const auto open = svg.find("<svg");
  const auto at = svg.find("width=\"", open == std::string::npos ? 0 : open);
  if (at == std::string::npos) return 0;
  return std::atof(svg.c_str() + at + 7);
}

// A rerun of a finished run touches no file: the report is rewritten only when it differs.
void write_if_changed(const fs::path& path, const std::string& text) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec) && fs::file_size(path, ec) == text.size() && read_text_file(path.string()) == text) return;
  write_text_file(path.string(), text);
}

void check_seconds(Checker& c, const json& obj, const std::string& where, bool need_total) {
  if (!obj.is_object()) {
    c.fail(where, "expected an object of seconds");
    return;
  }
  for (const auto& [k, v] : obj.items()) {
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0) {
      c.fail(Checker::path(where, k), "expected seconds (a number, 0 or more)");
    }
  }
  if (need_total && !obj.contains("total")) c.fail(Checker::path(where, "total"), "missing (required)");
}

// The prediction of the way the run runs (OUT/prediction.json's variant of its fusions), or null.
ordered_json chosen_prediction(const RunSpec& spec, const Layout& layout) {
  const auto doc = read_json_if_there(prediction_file(layout.out()));
  if (!doc || !doc->contains("variants") || !(*doc)["variants"].is_array()) return nullptr;
  const std::string name = fusions_name(fusions_of(spec));
  for (const auto& v : (*doc)["variants"]) {
    if (v.is_object() && v.value("name", "") == name) return ordered_json::parse(v.dump());
  }
  return nullptr;
}

}  // namespace

fs::path step_times_file(const Layout& layout, int i) { return layout.iteration_dir(i) / "steps.json"; }

void write_step_times(const Layout& layout, int i, double rollout, double train) {
  const ordered_json j = {{"rollout", rollout}, {"train", train}};
  write_text_file(step_times_file(layout, i).string(), j.dump() + "\n");
}

ordered_json step_times(const Layout& layout, int i) {
  try {
    const auto doc = read_json_if_there(step_times_file(layout, i));
    if (!doc || !doc->is_object()) return nullptr;
    for (const char* k : {"rollout", "train"}) {
      if (!doc->contains(k) || !(*doc)[k].is_number()) return nullptr;
    }
    return ordered_json{{"rollout", (*doc)["rollout"].get<double>()}, {"train", (*doc)["train"].get<double>()}};
  } catch (const InputError&) {
    return nullptr;  // a damaged file is no measurement
  }
}

ordered_json measured_calls(const Layout& layout, int i) {
  ordered_json out = ordered_json::object();
  for (const char* stage : {"generate", "score", "train"}) {
    std::optional<json> doc;
    try {
      doc = read_json_if_there(layout.stats_file(i, stage));
    } catch (const InputError&) {
      continue;
    }
    if (!doc || !doc->contains("calls") || !(*doc)["calls"].is_object()) continue;
    // braid-score sums its calls' seconds over its ranks: per rank, as a plan predicts them.
    double ranks = 1;
    if (std::string_view(stage) == "score" && doc->contains("ranks") && (*doc)["ranks"].is_array()) {
      ranks = std::max<double>(1, static_cast<double>((*doc)["ranks"].size()));
    }
    for (const auto& [name, call] : (*doc)["calls"].items()) {
      if (call.is_object() && call.contains("seconds") && call["seconds"].is_number()) {
        out[name] = call["seconds"].get<double>() / ranks;
      }
    }
  }
  return out;
}

ordered_json read_ablation(const fs::path& path) {
  const json doc = load_json_file(path.string());
  Checker c(path.string());
  c.format(doc, kAblationFormat, kReportVersion);
  if (!doc.is_object()) c.check();
  c.no_unknown_keys(doc, "", {"format", "version", "iteration", "settings", "prediction", "variants"});
  c.integer(doc, "", "iteration", {.min = 0});
  const auto variants = c.array_items(doc, "", "variants");
  if (doc.contains("variants") && variants.empty()) c.fail("variants", "is empty: give at least one variant");
  for (const auto& [where, v] : variants) {
    c.no_unknown_keys(*v, where, {"name", "fusions", "measured", "predicted", "calls"});
    if (v->contains("calls")) {
      const json& calls = (*v)["calls"];
      const std::string cw = Checker::path(where, "calls");
      if (!calls.is_object()) c.fail(cw, "expected an object: measured and predicted seconds per call");
      for (const char* k : {"measured", "predicted"}) {
        if (calls.is_object() && calls.contains(k)) check_seconds(c, calls[k], Checker::path(cw, k), false);
      }
    }
    c.string(*v, where, "name");
    if (v->contains("fusions") && !(*v)["fusions"].is_array()) c.fail(Checker::path(where, "fusions"), "expected an array of names");
    if (!v->contains("measured")) {
      c.fail(Checker::path(where, "measured"), "missing (required)");
    } else {
      check_seconds(c, (*v)["measured"], Checker::path(where, "measured"), true);
    }
    if (v->contains("predicted")) check_seconds(c, (*v)["predicted"], Checker::path(where, "predicted"), true);
  }
  c.check();
  return ordered_json::parse(doc.dump());
}

std::optional<std::string> schedule_file_svg(const fs::path& schedule, std::string* why) {
  try {
    const json doc = load_json_file(schedule.string());
    const sched::LoadedSchedule s = sched::load_schedule(doc, schedule.string());
    // The compute order of each device is its F and B instructions, in stream order.
    sched::Order order;
    for (const auto& stream : s.lowered.streams) {
      for (const auto& in : stream) {
        if (in.op == sched::Op::F || in.op == sched::Op::B) order.push_back(in.task);
      }
    }
    const sched::Timing timing = sched::evaluate(s.problem, order);
    if (!timing.valid) throw std::runtime_error(timing.problem);
    double serial_peak = 0;
    if (doc.contains("baselines") && doc["baselines"].contains("serial_1f1b")) {
      serial_peak = doc["baselines"]["serial_1f1b"].value("peak_memory", 0.0);
    }
    return sched::schedule_svg(s.problem, order, timing, serial_peak);
  } catch (const std::exception& e) {
    if (why != nullptr) *why = e.what();
    return std::nullopt;
  }
}

ordered_json build_report(const RunSpec& spec, const Layout& layout, int last) {
  ordered_json report;
  report["format"] = kReportFormat;
  report["version"] = kReportVersion;
  report["run"] = spec.file.string();
  report["algorithm"] = spec.algorithm;
  report["iterations_planned"] = spec.iterations;
  if (spec.eval) {
    ordered_json h;
    h["prompts"] = spec.eval->heldout_split ? layout.data_file("heldout").string() : spec.eval->policy.prompts;
    h["samples_per_prompt"] = spec.eval->policy.samples;
    h["greedy"] = spec.eval->policy.temperature <= 0;
    h["every"] = spec.eval->every;
    const auto& p = spec.eval->policy;
    h["reward"] = p.reward_rule.empty() ? ordered_json{{"command", p.reward_cmd}} : ordered_json{{"rule", p.reward_rule}};
    report["heldout"] = h;
  }
  const ordered_json predicted = chosen_prediction(spec, layout);
  if (const auto doc = read_json_if_there(prediction_file(layout.out()))) {
    report["prediction"] = ordered_json::parse(doc->dump());
  }
  ordered_json rows = ordered_json::array();
  for (int i = 0; i <= last; ++i) {
    ordered_json row;
    row["iteration"] = i;
    const auto metrics = i > 0 ? read_json_if_there(layout.iteration_metrics(i)) : std::nullopt;
    const auto ev = read_json_if_there(layout.eval_file(i));
    if (!metrics && !ev) continue;
    const json m = metrics.value_or(json::object());
    row["mean_reward"] = number_or_null(m, "mean_reward");
    row["kl"] = number_or_null(m, "kl");
    row["heldout_accuracy"] = ev ? number_or_null(*ev, "accuracy") : ordered_json(nullptr);
    if (ev && spec.eval && spec.eval->policy.samples > 1) {
      row["heldout_pass_at_n"] = number_or_null(*ev, fmt::format("pass@{}", spec.eval->policy.samples));
      for (const char* key : {"pass_at_k", "maj_at_k"}) {
        if (ev->contains(key) && (*ev)[key].is_array()) row[std::string("heldout_") + key] = (*ev)[key];
      }
    }
    row["mean_response_length"] = number_or_null(m, "mean_response_length");
    row["entropy"] = m.contains("train") ? number_or_null(m["train"], "actor_train.entropy") : ordered_json(nullptr);
    ordered_json seconds = ordered_json::object();
    if (m.contains("seconds") && m["seconds"].is_object()) {
      for (const auto& [k, v] : m["seconds"].items()) {
        if (v.is_number()) seconds[k] = v;
      }
    }
    if (ev && ev->contains("seconds") && (*ev)["seconds"].is_number()) seconds["eval"] = (*ev)["seconds"];
    row["seconds"] = seconds;
    if (m.contains("rollout") && m["rollout"].is_string()) row["rollout"] = m["rollout"];
    if (i > 0) {
      // The iteration's wall time and each call's, beside the prediction of the way it ran.
      const ordered_json steps = step_times(layout, i);
      if (steps.is_object()) {
        row["steps"] = steps;
        row["iteration_seconds"] = steps["rollout"].get<double>() + steps["train"].get<double>();
      }
      const ordered_json calls = measured_calls(layout, i);
      if (!calls.empty()) row["calls"] = calls;
      if (predicted.is_object()) {
        row["predicted"] = {{"iteration", predicted["iteration"]}, {"steps", predicted["steps"]},
                            {"calls", predicted["calls"]}};
        row["iteration_predicted"] = predicted["iteration"];
      }
    }
    rows.push_back(row);
  }
  report["iterations"] = rows;
  if (spec.schedule) {
    ordered_json sj;
    sj["file"] = spec.schedule->string();
    sj["ranks"] = spec.ranks;
    try {
      const json doc = load_json_file(spec.schedule->string());
      sj["makespan"] = number_or_null(doc, "makespan");
      if (doc.contains("spec")) sj["devices"] = doc["spec"].value("devices", 0);
    } catch (const std::exception& e) {
      sj["problem"] = e.what();
    }
    report["schedule"] = sj;
  }
  ordered_json ablations = ordered_json::array();
  for (int i = 1; i <= last; ++i) {
    std::error_code ec;
    if (!fs::is_regular_file(layout.ablation_file(i), ec)) continue;
    try {
      ablations.push_back(read_ablation(layout.ablation_file(i)));
    } catch (const InputError& e) {
      log::warn("the report leaves out {}: {}", layout.ablation_file(i).string(), e.what());
    }
  }
  if (!ablations.empty()) report["ablation"] = ablations;
  return report;
}

std::string report_svg(const ordered_json& report, const std::string& schedule_svg) {
  const ordered_json& rows = report.at("iterations");
  int x0 = 0, x1 = 1;
  if (!rows.empty()) {
    x0 = rows.front()["iteration"].get<int>();
    x1 = std::max(x0 + 1, rows.back()["iteration"].get<int>());
  }
  std::string body;
  const double col2 = kMargin + kPanelW + kGapX;
  double y = 40;
  auto panel = [&](int k) { return Panel{k % 2 == 0 ? kMargin : col2, y + (k / 2) * (kPanelH + 10), kPanelW, kPanelH}; };
  line_chart(body, panel(0), "mean reward (training samples)", "mean_reward", rows, x0, x1, "#08519c");
  line_chart(body, panel(1), "held-out accuracy (pass@1)", "heldout_accuracy", rows, x0, x1, "#a50f15", Range{0, 1});
  line_chart(body, panel(2), "KL to the reference (per token)", "kl", rows, x0, x1, "#54278f");
  line_chart(body, panel(3), "mean response length (tokens)", "mean_response_length", rows, x0, x1, "#006d2c");
  line_chart(body, panel(4), "policy entropy (per token)", "entropy", rows, x0, x1, "#8c510a");
  stage_chart(body, panel(5), rows, x0, x1);
  prediction_chart(body, panel(6), rows, x0, x1);
  if (std::any_of(rows.begin(), rows.end(), [](const auto& r) { return r.contains("heldout_pass_at_k"); })) {
    pass_at_k_chart(body, panel(7), rows);
  }
  y += 4 * (kPanelH + 10) + 10;
  if (!schedule_svg.empty()) {
    const auto at = schedule_svg.find("<svg");
    const std::string inner = at == std::string::npos ? schedule_svg : schedule_svg.substr(at);
    const double w = svg_width(inner), h = svg_height(inner);
    const double scale = w > 0 ? (kWidth - 2 * kMargin) / w : 1.0;
    body += fmt::format("<g id=\"schedule\"><text x=\"{}\" y=\"{}\" font-size=\"13\" font-weight=\"bold\">the fused "
                        "training schedule (braid-schedgen): timeline per device, activation memory</text>\n",
                        num(kMargin + 4), num(y + 16));
    body += fmt::format("<g transform=\"translate({} {}) scale({:.4f})\">\n{}</g></g>\n", num(kMargin), num(y + 24), scale,
                        inner);
    y += 24 + h * scale + 10;
  }
  if (report.contains("ablation")) {
    for (const auto& ab : report["ablation"]) y += ablation_panel(body, y, ab) + 10;
  }
  std::string title = fmt::format("braid run report: {} ({}), iterations {}..{} of {}", report.value("run", ""),
                                  report.value("algorithm", ""), rows.empty() ? 0 : x0,
                                  rows.empty() ? 0 : rows.back()["iteration"].get<int>(), report.value("iterations_planned", 0));
  std::string s = fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" "
                              "font-family=\"sans-serif\" viewBox=\"0 0 {:.0f} {:.0f}\">\n",
                              kWidth, y + 10, kWidth, y + 10);
  s += fmt::format("<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"{}\" y=\"24\" font-size=\"15\" "
                   "font-weight=\"bold\">{}</text>\n",
                   num(kMargin), esc(title));
  s += body;
  s += "</svg>\n";
  return s;
}

void write_report(const RunSpec& spec, const Layout& layout, int last) {
  const ordered_json report = build_report(spec, layout, last);
  std::string schedule;
  if (spec.schedule) {
    std::string why;
    if (auto svg = schedule_file_svg(*spec.schedule, &why)) {
      schedule = *svg;
    } else {
      log::warn("the report draws no schedule: {}", why);
    }
  }
  write_if_changed(layout.report_json(), report.dump(2) + "\n");
  write_if_changed(layout.report_svg(), report_svg(report, schedule));
}

}  // namespace braid::driver
