#include "jinja/text.hpp"

#include <unicode/locid.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include <algorithm>

namespace braid::jinja::text {

std::pair<char32_t, std::size_t> decode(std::string_view s, std::size_t i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) return {b0, 1};
  std::size_t n = b0 >= 0xF0 && b0 <= 0xF4 ? 4 : b0 >= 0xE0 ? 3 : b0 >= 0xC2 && b0 < 0xE0 ? 2 : 0;
  if (n == 0 || i + n > s.size()) return {0xFFFD, 1};
  char32_t c = b0 & (n == 2 ? 0x1F : n == 3 ? 0x0F : 0x07);
  for (std::size_t k = 1; k < n; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) return {0xFFFD, 1};
    c = (c << 6) | (b & 0x3F);
  }
  // Overlong forms, surrogates and values past U+10FFFF are invalid.
  if ((n == 3 && c < 0x800) || (n == 4 && (c < 0x10000 || c > 0x10FFFF)) || (c >= 0xD800 && c <= 0xDFFF)) {
    return {0xFFFD, 1};
  }
  return {c, n};
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

std::vector<char32_t> code_points(std::string_view s) {
  std::vector<char32_t> out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    auto [c, n] = decode(s, i);
    out.push_back(c);
    i += n;
  }
  return out;
}

std::string from_code_points(const std::vector<char32_t>& cps, std::size_t begin, std::size_t end) {
  std::string out;
  for (std::size_t i = begin; i < end; ++i) append_utf8(out, cps[i]);
  return out;
}

std::size_t length(std::string_view s) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < s.size(); ++n) i += decode(s, i).second;
  return n;
}

bool is_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

bool is_printable(char32_t c) {
  if (c == ' ') return true;
  switch (u_charType(static_cast<UChar32>(c))) {
    case U_CONTROL_CHAR:
    case U_FORMAT_CHAR:
    case U_SURROGATE:
    case U_PRIVATE_USE_CHAR:
    case U_UNASSIGNED:
    case U_LINE_SEPARATOR:
    case U_PARAGRAPH_SEPARATOR:
    case U_SPACE_SEPARATOR:
      return false;
    default:
      return true;
  }
}

bool is_line_break(char32_t c) {
  return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E || c == 0x85 ||
         c == 0x2028 || c == 0x2029;
}

std::string strip(std::string_view s, const std::u32string* chars, bool left, bool right) {
  const auto cps = code_points(s);
  auto stripped = [&](char32_t c) { return chars ? chars->find(c) != std::u32string::npos : is_space(c); };
  std::size_t b = 0, e = cps.size();
  if (left) {
    while (b < e && stripped(cps[b])) ++b;
  }
  if (right) {
    while (e > b && stripped(cps[e - 1])) --e;
  }
  return from_code_points(cps, b, e);
}

std::vector<std::string> split(std::string_view s, const std::string* sep, std::int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    std::size_t start = 0;
    while (maxsplit < 0 || static_cast<std::int64_t>(out.size()) < maxsplit) {
      const auto at = s.find(*sep, start);
      if (at == std::string_view::npos) break;
      out.emplace_back(s.substr(start, at - start));
      start = at + sep->size();
    }
    out.emplace_back(s.substr(start));
    return out;
  }
  const auto cps = code_points(s);
  std::size_t i = 0;
  while (true) {
    while (i < cps.size() && is_space(cps[i])) ++i;
    if (i == cps.size()) break;
    if (maxsplit >= 0 && static_cast<std::int64_t>(out.size()) == maxsplit) {
      std::size_t e = cps.size();
      while (e > i && is_space(cps[e - 1])) --e;
      out.push_back(from_code_points(cps, i, e));
      break;
    }
    std::size_t j = i;
    while (j < cps.size() && !is_space(cps[j])) ++j;
    out.push_back(from_code_points(cps, i, j));
    i = j;
  }
  return out;
}

std::vector<std::string> rsplit(std::string_view s, const std::string* sep, std::int64_t maxsplit) {
  if (maxsplit < 0) return split(s, sep, maxsplit);
  std::vector<std::string> out;
  if (sep) {
    std::size_t end = s.size();
    while (static_cast<std::int64_t>(out.size()) < maxsplit) {
      if (end < sep->size()) break;
      const auto at = s.rfind(*sep, end - sep->size());
      if (at == std::string_view::npos) break;
      out.emplace_back(s.substr(at + sep->size(), end - at - sep->size()));
      end = at;
    }
    out.emplace_back(s.substr(0, end));
  } else {
    const auto cps = code_points(s);
    std::size_t e = cps.size();
    while (true) {
      while (e > 0 && is_space(cps[e - 1])) --e;
      if (e == 0) break;
      if (static_cast<std::int64_t>(out.size()) == maxsplit) {
        std::size_t b = 0;
        while (b < e && is_space(cps[b])) ++b;
        out.push_back(from_code_points(cps, b, e));
        break;
      }
      std::size_t b = e;
      while (b > 0 && !is_space(cps[b - 1])) --b;
      out.push_back(from_code_points(cps, b, e));
      e = b;
    }
  }
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::string> splitlines(std::string_view s, bool keepends) {
  std::vector<std::string> out;
  std::string line;
  for (std::size_t i = 0; i < s.size();) {
    auto [c, n] = decode(s, i);
    if (!is_line_break(c)) {
      line.append(s.substr(i, n));
      i += n;
      continue;
    }
    std::size_t brk = n;
    if (c == '\r' && i + 1 < s.size() && s[i + 1] == '\n') brk = 2;
    if (keepends) line.append(s.substr(i, brk));
    out.push_back(std::move(line));
    line.clear();
    i += brk;
  }
  if (!line.empty()) out.push_back(std::move(line));
  return out;
}

std::string replace(std::string_view s, std::string_view old, std::string_view with, std::int64_t count) {
  std::string out;
  std::int64_t done = 0;
  if (old.empty()) {
    // Python inserts `with` before every code point and at the end.
    std::size_t i = 0;
    while (i <= s.size()) {
      if (count >= 0 && done >= count) {
        out.append(s.substr(i));
        break;
      }
      out.append(with);
      ++done;
      if (i == s.size()) break;
      const auto n = decode(s, i).second;
      out.append(s.substr(i, n));
      i += n;
    }
    return out;
  }
  std::size_t start = 0;
  while (count < 0 || done < count) {
    const auto at = s.find(old, start);
    if (at == std::string_view::npos) break;
    out.append(s.substr(start, at - start));
    out.append(with);
    start = at + old.size();
    ++done;
  }
  out.append(s.substr(start));
  return out;
}

std::int64_t count(std::string_view s, std::string_view sub) {
  if (sub.empty()) return static_cast<std::int64_t>(length(s)) + 1;
  std::int64_t n = 0;
  for (std::size_t at = s.find(sub); at != std::string_view::npos; at = s.find(sub, at + sub.size())) ++n;
  return n;
}

namespace {

std::string icu_case(std::string_view s, bool up) {
  auto u = icu::UnicodeString::fromUTF8(icu::StringPiece(s.data(), static_cast<std::int32_t>(s.size())));
  if (up) u.toUpper(icu::Locale::getRoot());
  else u.toLower(icu::Locale::getRoot());
  std::string out;
  u.toUTF8String(out);
  return out;
}

std::string one(char32_t c, int how) {  // 0 lower, 1 upper, 2 title (simple mapping)
  std::string out;
  if (how == 2) {
    append_utf8(out, static_cast<char32_t>(u_totitle(static_cast<UChar32>(c))));
    return out;
  }
  append_utf8(out, c);
  return icu_case(out, how == 1);
}

bool is_cased(char32_t c) { return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_CASED); }

}  // namespace

std::string lower(std::string_view s) { return icu_case(s, false); }
std::string upper(std::string_view s) { return icu_case(s, true); }

std::string title(std::string_view s) {
  std::string out;
  bool previous_cased = false;
  for (char32_t c : code_points(s)) {
    out += one(c, previous_cased ? 0 : 2);
    previous_cased = is_cased(c);
  }
  return out;
}

std::string capitalize(std::string_view s) {
  const auto cps = code_points(s);
  if (cps.empty()) return "";
  return one(cps[0], 2) + lower(from_code_points(cps, 1, cps.size()));
}

}  // namespace braid::jinja::text
