#include "core/option_schema.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

namespace braid::cli {

std::string_view type_name(OptionType t) {
  switch (t) {
    case OptionType::integer: return "integer";
    case OptionType::number: return "number";
    case OptionType::numbers: return "numbers";
    case OptionType::integers: return "integers";
    case OptionType::choice: return "choice";
    case OptionType::boolean: return "boolean";
    case OptionType::text: return "text";
    case OptionType::path: return "path";
  }
  return "text";
}

std::string OptionSpec::name() const {
  const auto comma = flag.rfind(',');
  return comma == std::string::npos ? flag : flag.substr(comma + 1);
}

namespace {

// "" when v is within b, else why not ("is 0, must be >= 1").
std::string bounds_problem(double v, const Bounds& b) {
  const bool below = b.min && (b.exclusive_min ? !(v > *b.min) : !(v >= *b.min));
  const bool above = b.max && !(v <= *b.max);
  if (!below && !above && std::isfinite(v)) return "";
  std::string range;
  if (b.min) range = fmt::format("{} {}", b.exclusive_min ? ">" : ">=", *b.min);
  if (b.max) range += fmt::format("{}<= {}", range.empty() ? "" : " and ", *b.max);
  return fmt::format("is {}, must be {}", v, range.empty() ? std::string("finite") : range);
}

// How --help names the range, as CLI11's own validators do (NONNEGATIVE, POSITIVE, [a - b]).
std::string describe(const Bounds& b, OptionType type) {
  const bool open_top = !b.max || *b.max >= kMaxCount;
  if (open_top && b.min && *b.min == 0) return b.exclusive_min ? "POSITIVE" : "NONNEGATIVE";
  if (open_top && b.min && *b.min == 1 && type == OptionType::integer && !b.exclusive_min) return "POSITIVE";
  if (!b.min) return fmt::format("<= {}", *b.max);
  if (open_top) return fmt::format("{} {}", b.exclusive_min ? ">" : ">=", *b.min);
  return fmt::format("{}{} - {}]", b.exclusive_min ? "(" : "[", *b.min, *b.max);
}

}  // namespace

CLI::Validator bounds_validator(const Bounds& b, OptionType type) {
  return CLI::Validator(
      [b](std::string& text) -> std::string {
        char* end = nullptr;
        errno = 0;
        const double v = std::strtod(text.c_str(), &end);
        if (end == text.c_str() || *end != '\0') return "";  // not a number: the option's own parse says so
        return bounds_problem(v, b);
      },
      describe(b, type));
}

std::optional<json> checked_setting(Checker& c, const json& obj, std::string_view where, const OptionSpec& spec,
                                    const Bounds& b) {
  switch (spec.type) {
    case OptionType::integer:
      if (auto v = c.integer(obj, where, spec.key, b)) return json(*v);
      return std::nullopt;
    case OptionType::number:
      if (auto v = c.number(obj, where, spec.key, b)) return json(*v);
      return std::nullopt;
    case OptionType::numbers:
    case OptionType::integers: {
      const auto it = obj.find(spec.key);
      const std::size_t count = it != obj.end() && it->is_array() ? it->size() : 1;
      if (count == 0) {
        c.fail(Checker::path(where, spec.key), "is empty, expected at least one number");
        return std::nullopt;
      }
      const auto v = c.number_or_list(obj, where, spec.key, count, b);
      if (!v) return std::nullopt;
      if (spec.type == OptionType::numbers) return json(*v);
      json out = json::array();
      for (const double x : *v) {
        if (x != std::floor(x)) {
          c.fail(Checker::path(where, spec.key), fmt::format("{} is not an integer", x));
          return std::nullopt;
        }
        out.push_back(static_cast<std::int64_t>(x));
      }
      return out;
    }
    case OptionType::boolean:
      if (auto v = c.boolean(obj, where, spec.key)) return json(*v);
      return std::nullopt;
    case OptionType::choice:
    case OptionType::text:
    case OptionType::path:
      if (auto v = c.string(obj, where, spec.key, spec.choices)) return json(*v);
      return std::nullopt;
  }
  return std::nullopt;
}

std::string flag_value(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) return fmt::format("{}", v.get<double>());
  if (!v.is_array()) return v.dump();
  std::string out;
  for (const auto& item : v) out += (out.empty() ? "" : ",") + flag_value(item);
  return out;
}

CLI::Option* decorate(CLI::Option* opt, const OptionSpec& spec) {
  if (spec.required) opt->required();
  if (!spec.choices.empty()) opt->check(CLI::IsMember(spec.choices));
  const bool list = spec.type == OptionType::numbers || spec.type == OptionType::integers;
  if ((spec.type == OptionType::integer || spec.type == OptionType::number || list) && (spec.bounds.min || spec.bounds.max)) {
    opt->check(bounds_validator(spec.bounds, spec.type));
  }
  if (list) opt->delimiter(',');   // --k 2,4 as --k 2 --k 4
  if (spec.show_default) opt->capture_default_str();
  return opt;
}

}  // namespace braid::cli
