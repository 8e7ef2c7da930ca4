// Parsing (parse.cpp) and the names of the filters and tests (builtins.cpp), inside
// lib/jinja.
#pragma once

#include "jinja/ast.hpp"
#include "jinja/template.hpp"

#include <string>
#include <string_view>

namespace braid::jinja {

Body parse(std::string_view source, const std::string& origin, int max_depth);

bool known_filter(const std::string& name);
bool known_test(const std::string& name);

}  // namespace braid::jinja
