// Python's str operations on UTF-8 text: code points, whitespace, case, splitting.
// Invalid UTF-8 bytes count as one code point each (U+FFFD when decoded), so no input
// makes these fail.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace braid::jinja::text {

// The code point at s[i] and its length in bytes (1 for an invalid byte).
std::pair<char32_t, std::size_t> decode(std::string_view s, std::size_t i);
void append_utf8(std::string& out, char32_t c);
std::vector<char32_t> code_points(std::string_view s);
std::string from_code_points(const std::vector<char32_t>& cps, std::size_t begin, std::size_t end);
std::size_t length(std::string_view s);  // in code points

bool is_space(char32_t c);  // Python's str.isspace()
bool is_printable(char32_t c);  // Python's str.isprintable()
bool is_line_break(char32_t c);  // a line boundary of str.splitlines()

// str.strip/lstrip/rstrip; chars: the set to strip (none: whitespace).
std::string strip(std::string_view s, const std::u32string* chars, bool left, bool right);
std::vector<std::string> split(std::string_view s, const std::string* sep, std::int64_t maxsplit);
std::vector<std::string> rsplit(std::string_view s, const std::string* sep, std::int64_t maxsplit);
std::vector<std::string> splitlines(std::string_view s, bool keepends = false);
std::string replace(std::string_view s, std::string_view old, std::string_view with, std::int64_t count);
std::int64_t count(std::string_view s, std::string_view sub);

std::string lower(std::string_view s);
std::string upper(std::string_view s);
std::string title(std::string_view s);       // str.title()
std::string capitalize(std::string_view s);  // str.capitalize()

}  // namespace braid::jinja::text
