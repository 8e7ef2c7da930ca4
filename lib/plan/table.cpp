#include "plan/table.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace braid::plan {
namespace {

// Index i with x[i] <= q < x[i+1] clamped to [0, n-2], and the weight of x[i+1].
std::pair<std::size_t, double> bracket(const std::vector<double>& x, double q, bool extrapolate) {
  if (x.size() < 2) return {0, 0.0};
  if (q <= x.front()) return {0, 0.0};
  auto it = std::upper_bound(x.begin(), x.end(), q);
  std::size_t i = it == x.end() ? x.size() - 2 : static_cast<std::size_t>(it - x.begin()) - 1;
  double w = (q - x[i]) / (x[i + 1] - x[i]);
  if (!extrapolate) w = std::min(w, 1.0);
  return {i, w};
}

bool increasing(const std::vector<double>& x) {
  for (std::size_t i = 1; i < x.size(); ++i) {
    if (!(x[i] > x[i - 1])) return false;
  }
  return !x.empty();
}

std::vector<double> numbers(const json& j, Checker& c, const std::string& where, const char* key) {
  std::vector<double> out;
  const std::string field = Checker::path(where, key);
  if (!j.is_object() || !j.contains(key)) {
    c.fail(field, "missing (required)");
    return out;
  }
  const json& a = j[key];
  if (!a.is_array()) {
    c.fail(field, "expected an array of numbers");
    return out;
  }
  for (const auto& e : a) {
    if (!e.is_number()) {
      c.fail(field, "expected an array of numbers");
      return {};
    }
    out.push_back(e.get<double>());
  }
  return out;
}

}  // namespace

double Table1::at(double q) const {
  if (v.empty()) return 0.0;
  if (v.size() == 1) return v[0];
  auto [i, w] = bracket(x, q, true);
  return std::max(0.0, v[i] + w * (v[i + 1] - v[i]));
}

double Table2::at(double qx, double qy) const {
  if (v.empty()) return 0.0;
  auto [i, wi] = x.size() < 2 ? std::pair<std::size_t, double>{0, 0.0} : bracket(x, qx, true);
  auto [j, wj] = y.size() < 2 ? std::pair<std::size_t, double>{0, 0.0} : bracket(y, qy, true);
  const std::size_t i1 = x.size() < 2 ? i : i + 1, j1 = y.size() < 2 ? j : j + 1;
  const double a = cell(i, j) + wj * (cell(i, j1) - cell(i, j));
  const double b = cell(i1, j) + wj * (cell(i1, j1) - cell(i1, j));
  return std::max(0.0, a + wi * (b - a));
}

ordered_json table_to_json(const Table1& t, const char* xname) {
  ordered_json j;
  j[xname] = t.x;
  j["seconds"] = t.v;
  return j;
}

ordered_json table_to_json(const Table2& t, const char* xname, const char* yname) {
  ordered_json j;
  j[xname] = t.x;
  j[yname] = t.y;
  ordered_json rows = ordered_json::array();
  for (std::size_t i = 0; i < t.x.size(); ++i) {
    rows.push_back(std::vector<double>(t.v.begin() + static_cast<std::ptrdiff_t>(i * t.y.size()),
                                       t.v.begin() + static_cast<std::ptrdiff_t>((i + 1) * t.y.size())));
  }
  j["seconds"] = rows;
  return j;
}

Table1 table1_from_json(const json& j, Checker& c, const std::string& where, const char* xname) {
  Table1 t;
  t.x = numbers(j, c, where, xname);
  t.v = numbers(j, c, where, "seconds");
  if (!t.x.empty() && !increasing(t.x)) c.fail(Checker::path(where, xname), "must be strictly increasing");
  if (t.x.size() != t.v.size()) {
    c.fail(Checker::path(where, "seconds"), fmt::format("has {} values for {} grid points", t.v.size(), t.x.size()));
    t.v.assign(t.x.size(), 0.0);
  }
  return t;
}

Table2 table2_from_json(const json& j, Checker& c, const std::string& where, const char* xname,
                        const char* yname) {
  Table2 t;
  t.x = numbers(j, c, where, xname);
  t.y = numbers(j, c, where, yname);
  if (!t.x.empty() && !increasing(t.x)) c.fail(Checker::path(where, xname), "must be strictly increasing");
  if (!t.y.empty() && !increasing(t.y)) c.fail(Checker::path(where, yname), "must be strictly increasing");
  t.v.assign(t.x.size() * t.y.size(), 0.0);
  const std::string field = Checker::path(where, "seconds");
  const json* rows = j.is_object() && j.contains("seconds") ? &j["seconds"] : nullptr;
  if (rows == nullptr || !rows->is_array() || rows->size() != t.x.size()) {
    c.fail(field, fmt::format("expected {} rows of {} numbers", t.x.size(), t.y.size()));
    return t;
  }
  for (std::size_t i = 0; i < t.x.size(); ++i) {
    const json& r = (*rows)[i];
    if (!r.is_array() || r.size() != t.y.size()) {
      c.fail(fmt::format("{}[{}]", field, i), fmt::format("expected {} numbers", t.y.size()));
      continue;
    }
    for (std::size_t k = 0; k < t.y.size(); ++k) {
      if (!r[k].is_number()) {
        c.fail(fmt::format("{}[{}][{}]", field, i, k), "expected a number");
        continue;
      }
      t.cell(i, k) = r[k].get<double>();
    }
  }
  return t;
}

std::vector<double> pow2_grid(double lo, double hi) {
  std::vector<double> g;
  for (double v = lo; v <= hi; v *= 2) g.push_back(v);
  return g;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace braid::plan
