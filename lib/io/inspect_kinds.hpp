// The per-kind halves of inspect.cpp (internal to lib/io).
#pragma once

#include <string>
#include <vector>

#include "core/json.hpp"
#include "io/inspect.hpp"

namespace braid::io::detail {

ordered_json summarize_samples(const std::string& path, const InspectOptions& options);
ordered_json summarize_weights(const std::string& path);
ordered_json summarize_deferred(const std::string& path);
ordered_json summarize_json(const std::string& path, const json& doc);

// count, mean, std, min, p50, p90, max of the values (count only when empty).
ordered_json distribution(std::vector<double> values);
// A JSON text attribute as JSON when it parses, else as the string it is.
ordered_json json_or_text(const std::string& text);

}  // namespace braid::io::detail
