// Profiled costs on a grid, read back by linear interpolation (ReaL §5.1).
// Below the first grid point a value holds at the first point's value (small
// inputs cost at least a kernel's fixed overhead); beyond the last it grows
// along the last segment, since costs become linear in the input size there.
#pragma once

#include <vector>

#include "core/json.hpp"

namespace braid::plan {

struct Table1 {
  std::vector<double> x;  // strictly increasing
  std::vector<double> v;  // v[i] at x[i]
  double at(double q) const;
};

struct Table2 {
  std::vector<double> x;  // rows
  std::vector<double> y;  // columns
  std::vector<double> v;  // row-major, x.size() * y.size()
  double at(double qx, double qy) const;
  double& cell(std::size_t i, std::size_t j) { return v[i * y.size() + j]; }
  double cell(std::size_t i, std::size_t j) const { return v[i * y.size() + j]; }
};

ordered_json table_to_json(const Table1& t, const char* xname);
ordered_json table_to_json(const Table2& t, const char* xname, const char* yname);
// Reads what table_to_json wrote, checking shape and order.
Table1 table1_from_json(const json& j, Checker& c, const std::string& where, const char* xname);
Table2 table2_from_json(const json& j, Checker& c, const std::string& where, const char* xname, const char* yname);

// Powers of two from lo to hi inclusive.
std::vector<double> pow2_grid(double lo, double hi);

// The median of v: its middle value, the mean of the middle two for an even count; 0 for none.
double median(std::vector<double> v);

}  // namespace braid::plan
