// Lexing and parsing a template, rule for rule as jinja2 3.1's lexer.py and parser.py do
// it with trim_blocks and lstrip_blocks on (transformers' environment).
#include "jinja/ast.hpp"
#include "jinja/parse.hpp"
#include "jinja/text.hpp"

#include <fmt/format.h>

#include <unicode/uchar.h>

#include <algorithm>
#include <cstring>

namespace braid::jinja {

namespace {

struct Token {
  enum Type { data, var_begin, var_end, block_begin, block_end, name, string, integer, floating, op, eof };
  Type type;
  std::string text;  // data, name, op; a string literal's decoded value
  Value value;       // integer, floating
  Where at;
};

const char* type_text(Token::Type t) {
  switch (t) {
    case Token::data: return "template data";
    case Token::var_begin: return "'{{'";
    case Token::var_end: return "end of print statement";
    case Token::block_begin: return "'{%'";
    case Token::block_end: return "end of statement block";
    case Token::name: return "name";
    case Token::string: return "string";
    case Token::integer: return "integer";
    case Token::floating: return "float";
    case Token::op: return "operator";
    default: return "end of template";
  }
}

// Python's \s for one code point at s[i]: its length, 0 if not whitespace.
std::size_t space_at(std::string_view s, std::size_t i) {
  auto [c, n] = text::decode(s, i);
  return text::is_space(c) ? n : 0;
}

std::size_t skip_space(std::string_view s, std::size_t i) {
  while (i < s.size()) {
    const auto n = space_at(s, i);
    if (n == 0) break;
    i += n;
  }
  return i;
}

// Python's str.rstrip(): the length of s without its trailing whitespace.
std::size_t rstrip_len(std::string_view s) {
  std::size_t end = 0;
  for (std::size_t i = 0; i < s.size();) {
    const auto n = space_at(s, i);
    if (n == 0) {
      i += text::decode(s, i).second;
      end = i;
    } else {
      i += n;
    }
  }
  return end;
}

bool all_space(std::string_view s) { return !s.empty() && skip_space(s, 0) == s.size(); }

class Lexer {
 public:
  Lexer(std::string_view source, const std::string& origin) : origin_(origin) {
    // Line breaks are \n, \r\n and \r, each read as \n; one trailing newline is dropped.
    src_.reserve(source.size());
    for (std::size_t i = 0; i < source.size(); ++i) {
      if (source[i] == '\r') {
        src_ += '\n';
        if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
      } else {
        src_ += source[i];
      }
    }
    if (!src_.empty() && src_.back() == '\n') src_.pop_back();
  }

  std::vector<Token> run() {
    while (pos_ < src_.size()) root();
    push(Token::eof, "", pos_);
    return std::move(tokens_);
  }

 private:
  [[noreturn]] void fail(std::size_t at, const std::string& message) {
    const Where w = where(at);
    throw Error(Error::syntax, origin_, w.line, w.column, "", message);
  }

  Where where(std::size_t at) {
    // Lines are counted forward from the last position asked for (positions only grow).
    for (; scan_ < at && scan_ < src_.size(); ++scan_) {
      if (src_[scan_] == '\n') {
        ++line_;
        line_start_ = scan_ + 1;
      }
    }
    return {line_, static_cast<int>(at - line_start_) + 1};
  }

  void push(Token::Type type, std::string textv, std::size_t at, Value v = {}) {
    tokens_.push_back({type, std::move(textv), std::move(v), where(at)});
  }

  // Text up to the next tag, with the tag's whitespace control applied to it.
  void root() {
    std::size_t at = pos_;
    while (true) {
      at = src_.find('{', at);
      if (at == std::string::npos || at + 1 >= src_.size()) {
        emit_data(pos_, src_.size());
        pos_ = src_.size();
        return;
      }
      const char k = src_[at + 1];
      if (k == '{' || k == '%' || k == '#') break;
      ++at;
    }
    const char kind = src_[at + 1];
    const char sign = at + 2 < src_.size() && (src_[at + 2] == '-' || src_[at + 2] == '+') ? src_[at + 2] : 0;
    std::size_t text_end = at;
    if (sign == '-') {
      text_end = pos_ + rstrip_len(std::string_view(src_).substr(pos_, at - pos_));
    } else if (sign != '+' && kind != '{') {
      text_end = lstrip(pos_, at);
    }
    emit_data(pos_, text_end);
    std::size_t after = at + 2 + (sign ? 1 : 0);
    line_starting_ = false;
    if (kind == '#') {
      comment(after);
    } else if (kind == '%' && raw(at, after)) {
      // handled
    } else {
      tag(kind == '{' ? Token::var_begin : Token::block_begin, at, after);
    }
  }

  // lstrip_blocks: the spaces between the line's start and a block or comment tag go.
  std::size_t lstrip(std::size_t text_begin, std::size_t tag_at) {
    const std::string_view t = std::string_view(src_).substr(text_begin, tag_at - text_begin);
    const auto nl = t.rfind('\n');
    const std::size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
    if ((l_pos > 0 || line_starting_) && all_space(t.substr(l_pos))) return text_begin + l_pos;
    return tag_at;
  }

  void emit_data(std::size_t b, std::size_t e) {
    if (e > b) push(Token::data, src_.substr(b, e - b), b);
  }

  // After a block tag (or comment) ends at `at` (just past "%}" or "#}" or "-%}"):
  // trim_blocks drops one newline; '-' drops all whitespace; '+' keeps it.
  std::size_t after_block_end(std::size_t at, char sign) {
    if (sign == '-') return skip_space(src_, at);
    if (sign != '+' && at < src_.size() && src_[at] == '\n') return at + 1;
    return at;
  }

  void comment(std::size_t from) {
    std::size_t at = from;
    while (true) {
      at = src_.find("#}", at);
      if (at == std::string::npos) fail(from, "Missing end of comment tag");
      // The earliest end: "-#}" or "+#}" starts one character before "#}".
      char sign = 0;
      if (at > from && (src_[at - 1] == '-' || src_[at - 1] == '+')) sign = src_[at - 1];
      pos_ = after_block_end(at + 2, sign);
      line_starting_ = pos_ > 0 && src_[pos_ - 1] == '\n';
      return;
    }
  }

  // {% raw %} ... {% endraw %}: the text as it is.
  bool raw(std::size_t tag_at, std::size_t after) {
    std::size_t i = skip_space(src_, after);
    if (src_.compare(i, 3, "raw") != 0) return false;
    i = skip_space(src_, i + 3);
    std::size_t body;
    if (src_.compare(i, 3, "-%}") == 0) body = skip_space(src_, i + 3);
    else if (src_.compare(i, 2, "%}") == 0) body = i + 2;
    else return false;
    line_starting_ = body > 0 && src_[body - 1] == '\n';
    for (std::size_t at = src_.find("{%", body); at != std::string::npos; at = src_.find("{%", at + 1)) {
      const char sign = at + 2 < src_.size() && (src_[at + 2] == '-' || src_[at + 2] == '+') ? src_[at + 2] : 0;
      std::size_t j = skip_space(src_, at + 2 + (sign ? 1 : 0));
      if (src_.compare(j, 6, "endraw") != 0) continue;
      j = skip_space(src_, j + 6);
      char end_sign = 0;
      if (j < src_.size() && (src_[j] == '-' || src_[j] == '+')) end_sign = src_[j++];
      if (src_.compare(j, 2, "%}") != 0) continue;
      std::size_t text_end = at;
      if (sign == '-') text_end = body + rstrip_len(std::string_view(src_).substr(body, at - body));
      else if (sign != '+') text_end = lstrip(body, at);
      emit_data(body, text_end);
      pos_ = after_block_end(j + 2, end_sign);
      line_starting_ = pos_ > 0 && src_[pos_ - 1] == '\n';
      return true;
    }
    fail(tag_at, "Missing end of raw directive");
  }

  // The tokens of a {{ }} or {% %} tag, up to and including its end.
  void tag(Token::Type begin, std::size_t tag_at, std::size_t i) {
    push(begin, "", tag_at);
    const bool block = begin == Token::block_begin;
    std::vector<char> balance;
    while (true) {
      if (i >= src_.size()) fail(tag_at, block ? "unexpected end of template, expected end of statement block ('%}')"
                                                : "unexpected end of template, expected end of print statement ('}}')");
      if (balance.empty()) {
        if (block) {
          char sign = 0;
          std::size_t j = i;
          if (src_[j] == '-' || src_[j] == '+') sign = src_[j++];
          if (src_.compare(j, 2, "%}") == 0) {
            push(Token::block_end, "", i);
            pos_ = after_block_end(j + 2, sign);
            line_starting_ = pos_ > 0 && src_[pos_ - 1] == '\n';
            return;
          }
        } else {
          if (src_.compare(i, 3, "-}}") == 0 || src_.compare(i, 2, "}}") == 0) {
            push(Token::var_end, "", i);
            pos_ = src_[i] == '-' ? skip_space(src_, i + 3) : i + 2;
            line_starting_ = pos_ > 0 && src_[pos_ - 1] == '\n';
            return;
          }
        }
      }
      if (const auto n = space_at(src_, i)) {
        i += n;
        continue;
      }
      const char c = src_[i];
      if (std::isdigit(static_cast<unsigned char>(c))) {
        i = number(i);
      } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        std::size_t j = i;
        while (j < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[j])) || src_[j] == '_')) ++j;
        push(Token::name, src_.substr(i, j - i), i);
        i = j;
      } else if (c == '\'' || c == '"') {
        i = string_literal(i);
      } else {
        static const char* two[] = {"//", "**", "==", "!=", ">=", "<="};
        std::string op;
        for (const char* t : two) {
          if (src_.compare(i, 2, t) == 0) op = t;
        }
        if (op.empty()) {
          if (std::strchr("+-/*%~[](){}><=.:|,;", c) == nullptr || c == 0) {
            fail(i, fmt::format("unexpected char {} at {}", string_repr(std::string(1, c)), i));
          }
          op = std::string(1, c);
        }
        if (op == "(" || op == "[" || op == "{") {
          balance.push_back(op == "(" ? ')' : op == "[" ? ']' : '}');
        } else if (op == ")" || op == "]" || op == "}") {
          if (balance.empty()) fail(i, fmt::format("unexpected '{}'", op));
          if (balance.back() != op[0]) fail(i, fmt::format("unexpected '{}', expected '{}'", op, balance.back()));
          balance.pop_back();
        }
        push(Token::op, op, i);
        i += op.size();
      }
    }
  }

  // Digits with '_' separators (jinja2's integer_re and float_re).
  std::size_t digits(std::size_t i, bool (*ok)(char)) const {
    std::size_t j = i;
    while (j < src_.size() && (ok(src_[j]) || (src_[j] == '_' && j + 1 < src_.size() && ok(src_[j + 1]) && j > i))) ++j;
    return j;
  }

  std::size_t number(std::size_t i) {
    auto dec = [](char c) { return c >= '0' && c <= '9'; };
    // A float: digits, then a fraction and/or an exponent.
    const std::size_t int_end = digits(i, dec);
    std::size_t j = int_end;
    bool is_float = false;
    if (j + 1 < src_.size() && src_[j] == '.' && dec(src_[j + 1])) {
      j = digits(j + 1, dec);
      is_float = true;
    }
    if (j < src_.size() && (src_[j] == 'e' || src_[j] == 'E')) {
      std::size_t k = j + 1;
      if (k < src_.size() && (src_[k] == '+' || src_[k] == '-')) ++k;
      if (k < src_.size() && dec(src_[k])) {
        j = digits(k, dec);
        is_float = true;
      }
    }
    auto clean = [](std::string s) {
      s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
      return s;
    };
    if (is_float) {
      push(Token::floating, "", i, Value(std::strtod(clean(src_.substr(i, j - i)).c_str(), nullptr)));
      return j;
    }
    // An integer: 0b, 0o, 0x prefixes, else decimal (a leading 0 only for zero).
    int base = 10;
    std::size_t start = i;
    if (src_[i] == '0' && i + 1 < src_.size()) {
      const char p = static_cast<char>(std::tolower(static_cast<unsigned char>(src_[i + 1])));
      if (p == 'b') base = 2;
      if (p == 'o') base = 8;
      if (p == 'x') base = 16;
    }
    std::size_t end;
    if (base != 10) {
      start = i + 2;
      auto ok = base == 2 ? +[](char c) { return c == '0' || c == '1'; }
                : base == 8 ? +[](char c) { return c >= '0' && c <= '7'; }
                            : +[](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; };
      // Here '_' may also follow the prefix directly.
      std::size_t k = start;
      if (k < src_.size() && src_[k] == '_') ++k;
      end = k < src_.size() && ok(src_[k]) ? digits(k, ok) : start;
      if (end == start || end == k) {
        base = 10;
        start = i;
        end = i + 1;
      }
    } else if (src_[i] == '0') {
      end = i + 1;
      while (end < src_.size() && (src_[end] == '0' || (src_[end] == '_' && end + 1 < src_.size() && src_[end + 1] == '0'))) ++end;
    } else {
      end = int_end;
    }
    const std::string digits_text = clean(src_.substr(start, end - start));
    std::int64_t v = 0;
    for (char c : digits_text) {
      const int d = std::isdigit(static_cast<unsigned char>(c)) ? c - '0' : std::tolower(static_cast<unsigned char>(c)) - 'a' + 10;
      if (v > (INT64_MAX - d) / base) fail(i, "integer literal too large");
      v = v * base + d;
    }
    push(Token::integer, "", i, Value(v));
    return end;
  }

  // A quoted literal decoded as Python's unicode-escape codec decodes it.
  std::size_t string_literal(std::size_t i) {
    const char q = src_[i];
    std::size_t j = i + 1;
    while (j < src_.size() && src_[j] != q) j += src_[j] == '\\' ? 2 : 1;
    if (j >= src_.size()) fail(i, "unexpected char " + string_repr(std::string(1, q)) + fmt::format(" at {}", i));
    const std::string_view body = std::string_view(src_).substr(i + 1, j - i - 1);
    std::string out;
    for (std::size_t k = 0; k < body.size();) {
      if (body[k] != '\\' || k + 1 >= body.size()) {
        out += body[k++];
        continue;
      }
      const char e = body[k + 1];
      k += 2;
      auto hex = [&](std::size_t n, const char* what) {
        if (k + n > body.size() ||
            !std::all_of(body.begin() + static_cast<std::ptrdiff_t>(k), body.begin() + static_cast<std::ptrdiff_t>(k + n),
                         [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); })) {
          fail(i, fmt::format("invalid string literal: truncated {} escape", what));
        }
        const auto v = std::stoul(std::string(body.substr(k, n)), nullptr, 16);
        k += n;
        if (v > 0x10FFFF) fail(i, "invalid string literal: illegal Unicode character");
        text::append_utf8(out, static_cast<char32_t>(v));
      };
      switch (e) {
        case '\n': break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'v': out += '\v'; break;
        case 'x': hex(2, "\\xXX"); break;
        case 'u': hex(4, "\\uXXXX"); break;
        case 'U': hex(8, "\\UXXXXXXXX"); break;
        case 'N': {
          const auto close = body.find('}', k);
          if (k >= body.size() || body[k] != '{' || close == std::string_view::npos) fail(i, "invalid string literal: malformed \\N character escape");
          UErrorCode status = U_ZERO_ERROR;
          const std::string name(body.substr(k + 1, close - k - 1));
          const UChar32 c = u_charFromName(U_UNICODE_CHAR_NAME, name.c_str(), &status);
          if (U_FAILURE(status)) fail(i, "invalid string literal: unknown Unicode character name");
          text::append_utf8(out, static_cast<char32_t>(c));
          k = close + 1;
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            unsigned v = static_cast<unsigned>(e - '0');
            for (int n = 0; n < 2 && k < body.size() && body[k] >= '0' && body[k] <= '7'; ++n) v = v * 8 + (body[k++] - '0');
            text::append_utf8(out, v);
          } else if (static_cast<unsigned char>(e) >= 0x80) {
            // Python first writes a non-ASCII character as an escape, which the backslash
            // before it then turns back into text: '\é' is the four characters \xe9.
            auto [c, n] = text::decode(body, k - 1);
            k = k - 1 + n;
            out += c < 0x100 ? fmt::format("\\x{:02x}", static_cast<unsigned>(c))
                   : c < 0x10000 ? fmt::format("\\u{:04x}", static_cast<unsigned>(c))
                                 : fmt::format("\\U{:08x}", static_cast<unsigned>(c));
          } else {
            out += '\\';
            out += e;
          }
      }
    }
    push(Token::string, std::move(out), i);
    return j + 1;
  }

  const std::string& origin_;
  std::string src_;
  std::size_t pos_ = 0;
  bool line_starting_ = true;
  std::vector<Token> tokens_;
  std::size_t scan_ = 0, line_start_ = 0;
  int line_ = 1;
};

class Parser {
 public:
  Parser(std::vector<Token> tokens, const std::string& origin, int max_depth)
      : t_(std::move(tokens)), origin_(origin), max_depth_(max_depth) {}

  Body parse_template() {
    Body body = statements({});
    if (cur().type != Token::eof) fail(cur().at, "unexpected token");
    return body;
  }

 private:
  const Token& cur() const { return t_[p_]; }
  const Token& look() const { return t_[std::min(p_ + 1, t_.size() - 1)]; }
  void next() {
    if (p_ + 1 < t_.size()) ++p_;
  }
  bool is_op(const char* op) const { return cur().type == Token::op && cur().text == op; }
  bool is_name(const char* n) const { return cur().type == Token::name && cur().text == n; }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(const char* n) {
    if (!is_name(n)) return false;
    next();
    return true;
  }

  [[noreturn]] void fail(Where at, const std::string& message) const {
    throw Error(Error::syntax, origin_, at.line, at.column, "", message);
  }

  std::string describe(const Token& t) const {
    if (t.type == Token::name || t.type == Token::op) return "'" + t.text + "'";
    return type_text(t.type);
  }

  void expect_op(const char* op) {
    if (!skip_op(op)) fail(cur().at, fmt::format("expected token '{}', got {}", op, describe(cur())));
  }
  std::string expect_name() {
    if (cur().type != Token::name) fail(cur().at, fmt::format("expected token 'name', got {}", describe(cur())));
    std::string n = cur().text;
    next();
    return n;
  }
  void expect(Token::Type type) {
    if (cur().type != type) fail(cur().at, fmt::format("expected {}, got {}", type_text(type), describe(cur())));
    next();
  }

  struct Depth {
    Depth(Parser& p, Where at) : p_(p) {
      if (++p_.depth_ > p_.max_depth_ * 2) p_.fail(at, fmt::format("nested more than {} levels deep", p_.max_depth_ * 2));
    }
    ~Depth() { --p_.depth_; }
    Parser& p_;
  };

  // Statements until a block tag whose name is one of `end` ("endfor", "else", ...),
  // which is left as the current token (after its "{%").
  Body statements(std::vector<std::string> end) {
    Body body;
    while (true) {
      const Token& tok = cur();
      if (tok.type == Token::eof) {
        if (!end.empty()) {
          fail(tok.at, fmt::format("Unexpected end of template. Jinja was looking for the following tags: '{}'. "
                                   "The innermost block that needs to be closed is '{}'.",
                                   fmt::join(end, "' or '"), open_.empty() ? "" : open_.back()));
        }
        return body;
      }
      if (tok.type == Token::data) {
        auto s = std::make_unique<Stmt>(Stmt{Stmt::data, tok.at});
        s->text = tok.text;
        body.push_back(std::move(s));
        next();
      } else if (tok.type == Token::var_begin) {
        next();
        auto s = std::make_unique<Stmt>(Stmt{Stmt::print, tok.at});
        s->expr = tuple_expr(true, {});
        expect(Token::var_end);
        body.push_back(std::move(s));
      } else {  // block_begin
        next();
        if (cur().type == Token::name && std::find(end.begin(), end.end(), cur().text) != end.end()) return body;
        body.push_back(statement());
      }
    }
  }

  void end_block() { expect(Token::block_end); }

  // Parses a body up to one of `end`, consumes that tag's name and returns which it was.
  std::string until(Body& body, std::vector<std::string> end, const std::string& opened) {
    open_.push_back(opened);
    body = statements(end);
    open_.pop_back();
    std::string which = cur().text;
    next();
    return which;
  }

  std::unique_ptr<Stmt> statement() {
    const Token& tok = cur();
    if (tok.type != Token::name) fail(tok.at, "tag name expected");
    const Where at = tok.at;
    Depth d(*this, at);
    const std::string n = tok.text;
    next();
    auto s = std::make_unique<Stmt>();
    s->at = at;
    if (n == "for") {
      s->kind = Stmt::for_;
      s->target = assign_target(false, {"in"});
      if (!skip_name("in")) fail(cur().at, fmt::format("expected token 'in', got {}", describe(cur())));
      s->expr = tuple_expr(false, {"recursive"});
      if (skip_name("if")) s->cond = expression(true);
      s->recursive = skip_name("recursive");
      end_block();
      ++loops_;
      const std::string which = until(s->body, {"endfor", "else"}, "for");
      --loops_;
      if (which == "else") {
        end_block();
        until(s->else_body, {"endfor"}, "for");
      }
      end_block();
    } else if (n == "if") {
      s->kind = Stmt::if_;
      ExprPtr cond = tuple_expr(false, {});
      while (true) {
        end_block();
        Body body;
        const std::string which = until(body, {"elif", "else", "endif"}, "if");
        s->branches.emplace_back(std::move(cond), std::move(body));
        if (which == "elif") {
          cond = tuple_expr(false, {});
          continue;
        }
        if (which == "else") {
          end_block();
          until(s->else_body, {"endif"}, "if");
        }
        break;
      }
      end_block();
    } else if (n == "set") {
      s->target = assign_target(true, {});
      if (skip_op("=")) {
        s->kind = Stmt::set;
        s->expr = tuple_expr(true, {});
        end_block();
      } else {
        s->kind = Stmt::set_block;
        if (!s->target.attr.empty() || s->target.tuple) fail(at, "a block set assigns to one name");
        while (is_op("|")) s->filters.push_back(filter(nullptr));
        end_block();
        until(s->body, {"endset"}, "set");
        end_block();
      }
    } else if (n == "macro") {
      s->kind = Stmt::macro;
      s->text = expect_name();
      signature(s->params, true);
      end_block();
      until(s->body, {"endmacro"}, "macro");
      end_block();
    } else if (n == "call") {
      s->kind = Stmt::call_block;
      if (is_op("(")) signature(s->params, true);
      s->expr = expression(true);
      if (s->expr->kind != Expr::call) fail(at, "expected call");
      end_block();
      until(s->body, {"endcall"}, "call");
      end_block();
    } else if (n == "filter") {
      s->kind = Stmt::filter_block;
      s->filters.push_back(filter(nullptr, true));
      while (is_op("|")) s->filters.push_back(filter(nullptr));
      end_block();
      until(s->body, {"endfilter"}, "filter");
      end_block();
    } else if (n == "with") {
      s->kind = Stmt::with;
      while (cur().type != Token::block_end) {
        if (!s->params.empty()) expect_op(",");
        std::string name = expect_name();
        expect_op("=");
        s->params.emplace_back(std::move(name), expression(true));
      }
      end_block();
      until(s->body, {"endwith"}, "with");
      end_block();
    } else if (n == "print") {
      s->kind = Stmt::print;
      s->expr = tuple_expr(true, {});
      end_block();
    } else if (n == "break" || n == "continue") {
      if (loops_ == 0) fail(at, fmt::format("'{}' outside of a loop", n));
      s->kind = n == "break" ? Stmt::break_ : Stmt::continue_;
      end_block();
    } else if (n == "generation") {
      s->kind = Stmt::generation;
      end_block();
      until(s->body, {"endgeneration"}, "generation");
      end_block();
    } else if (n == "block" || n == "extends" || n == "include" || n == "import" || n == "from" || n == "autoescape") {
      fail(at, fmt::format("'{}' is not supported: a chat template is one self-contained template", n));
    } else {
      fail(at, fmt::format("Encountered unknown tag '{}'.", n));
    }
    return s;
  }

  // (name, name=default, ...) of a macro or call block.
  void signature(std::vector<std::pair<std::string, ExprPtr>>& params, bool defaults) {
    expect_op("(");
    while (!is_op(")")) {
      if (!params.empty()) expect_op(",");
      std::string name = expect_name();
      ExprPtr def;
      if (defaults && skip_op("=")) def = expression(true);
      params.emplace_back(std::move(name), std::move(def));
    }
    expect_op(")");
  }

  Target assign_target(bool with_namespace, std::vector<std::string> extra_end) {
    Target t;
    const Where at = cur().at;
    if (with_namespace && cur().type == Token::name && look().type == Token::op && look().text == ".") {
      t.names.push_back(expect_name());
      next();
      t.attr = expect_name();
      return t;
    }
    while (true) {
      if (!t.names.empty()) {
        if (!skip_op(",")) break;
        t.tuple = true;
        if (cur().type == Token::block_end || (cur().type == Token::name && std::find(extra_end.begin(), extra_end.end(), cur().text) != extra_end.end())) break;
      }
      if (is_op("(")) fail(at, "nested tuples as assignment targets are not supported");
      if (cur().type != Token::name) fail(cur().at, fmt::format("can't assign to {}", describe(cur())));
      t.names.push_back(expect_name());
    }
    for (const auto& n : t.names) {
      if (n == "true" || n == "false" || n == "none" || n == "True" || n == "False" || n == "None") {
        fail(at, fmt::format("can't assign to '{}'", n));
      }
    }
    return t;
  }

  ExprPtr make(Expr::Kind kind, Where at) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->at = at;
    return e;
  }

  bool tuple_end(const std::vector<std::string>& extra_end) const {
    if (cur().type == Token::var_end || cur().type == Token::block_end || cur().type == Token::eof) return true;
    if (is_op(")")) return true;
    return cur().type == Token::name && std::find(extra_end.begin(), extra_end.end(), cur().text) != extra_end.end();
  }

  // a, b, c (a tuple) or a lone expression.
  ExprPtr tuple_expr(bool with_condexpr, std::vector<std::string> extra_end, bool explicit_parens = false) {
    const Where at = cur().at;
    std::vector<ExprPtr> items;
    bool comma = false;
    while (true) {
      if (!items.empty()) {
        if (!skip_op(",")) break;
        comma = true;
      }
      if (tuple_end(extra_end)) break;
      items.push_back(with_condexpr ? expression(true) : or_expr());
    }
    if (!comma && items.size() == 1) return std::move(items.front());
    if (items.empty() && !explicit_parens) fail(cur().at, fmt::format("Expected an expression, got {}", describe(cur())));
    auto e = make(Expr::tuple, at);
    e->items = std::move(items);
    return e;
  }

  ExprPtr expression(bool with_condexpr) {
    Depth d(*this, cur().at);
    if (!with_condexpr) return or_expr();
    ExprPtr e = or_expr();
    while (is_name("if")) {
      const Where at = cur().at;
      next();
      auto c = make(Expr::cond, at);
      c->a = or_expr();
      c->b = std::move(e);
      if (skip_name("else")) c->c = expression(true);
      e = std::move(c);
    }
    return e;
  }

  ExprPtr binary(const char* op, ExprPtr l, ExprPtr r, Where at) {
    auto e = make(Expr::binary, at);
    e->name = op;
    e->a = std::move(l);
    e->b = std::move(r);
    return e;
  }

  ExprPtr or_expr() {
    ExprPtr l = and_expr();
    while (is_name("or")) {
      const Where at = cur().at;
      next();
      l = binary("or", std::move(l), and_expr(), at);
    }
    return l;
  }

  ExprPtr and_expr() {
    ExprPtr l = not_expr();
    while (is_name("and")) {
      const Where at = cur().at;
      next();
      l = binary("and", std::move(l), not_expr(), at);
    }
    return l;
  }

  ExprPtr not_expr() {
    if (is_name("not")) {
      Depth d(*this, cur().at);
      auto e = make(Expr::not_, cur().at);
      next();
      e->a = not_expr();
      return e;
    }
    return compare();
  }

  ExprPtr compare() {
    const Where at = cur().at;
    ExprPtr first = math1();
    auto e = make(Expr::compare, at);
    while (true) {
      std::string op;
      if (cur().type == Token::op &&
          (cur().text == "==" || cur().text == "!=" || cur().text == "<" || cur().text == "<=" || cur().text == ">" || cur().text == ">=")) {
        op = cur().text;
        next();
      } else if (is_name("in")) {
        op = "in";
        next();
      } else if (is_name("not") && look().type == Token::name && look().text == "in") {
        op = "not in";
        next();
        next();
      } else {
        break;
      }
      e->ops.push_back(op);
      e->items.push_back(math1());
    }
    if (e->ops.empty()) return first;
    e->items.insert(e->items.begin(), std::move(first));
    return e;
  }

  ExprPtr math1() {
    ExprPtr l = concat();
    while (is_op("+") || is_op("-")) {
      const Where at = cur().at;
      const char* op = is_op("+") ? "+" : "-";
      next();
      l = binary(op, std::move(l), concat(), at);
    }
    return l;
  }

  ExprPtr concat() {
    ExprPtr l = math2();
    while (is_op("~")) {
      const Where at = cur().at;
      next();
      l = binary("~", std::move(l), math2(), at);
    }
    return l;
  }

  ExprPtr math2() {
    ExprPtr l = power();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Where at = cur().at;
      const std::string op = cur().text;
      next();
      l = binary(op == "*" ? "*" : op == "/" ? "/" : op == "//" ? "//" : "%", std::move(l), power(), at);
    }
    return l;
  }

  ExprPtr power() {
    ExprPtr l = unary(true);
    while (is_op("**")) {
      const Where at = cur().at;
      next();
      l = binary("**", std::move(l), unary(true), at);
    }
    return l;
  }

  ExprPtr unary(bool with_filter) {
    Depth d(*this, cur().at);
    const Where at = cur().at;
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      const bool neg = is_op("-");
      next();
      e = make(neg ? Expr::neg : Expr::pos, at);
      e->a = unary(false);
    } else {
      e = primary();
    }
    e = postfix(std::move(e));
    if (with_filter) e = filter_expr(std::move(e));
    return e;
  }

  ExprPtr primary() {
    const Token& tok = cur();
    const Where at = tok.at;
    if (tok.type == Token::name) {
      auto e = make(Expr::literal, at);
      if (tok.text == "true" || tok.text == "True") e->value = true;
      else if (tok.text == "false" || tok.text == "False") e->value = false;
      else if (tok.text == "none" || tok.text == "None") e->value = None{};
      else {
        e->kind = Expr::variable;
        e->name = tok.text;
      }
      next();
      return e;
    }
    if (tok.type == Token::string) {
      std::string s;
      while (cur().type == Token::string) {  // adjacent literals are one string
        s += cur().text;
        next();
      }
      auto e = make(Expr::literal, at);
      e->value = std::move(s);
      return e;
    }
    if (tok.type == Token::integer || tok.type == Token::floating) {
      auto e = make(Expr::literal, at);
      e->value = tok.value;
      next();
      return e;
    }
    if (is_op("(")) {
      next();
      ExprPtr e = tuple_expr(true, {}, true);
      expect_op(")");
      return e;
    }
    if (is_op("[")) {
      next();
      auto e = make(Expr::list, at);
      while (!is_op("]")) {
        if (!e->items.empty()) expect_op(",");
        if (is_op("]")) break;
        e->items.push_back(expression(true));
      }
      expect_op("]");
      return e;
    }
    if (is_op("{")) {
      next();
      auto e = make(Expr::dict, at);
      while (!is_op("}")) {
        if (!e->items.empty()) expect_op(",");
        if (is_op("}")) break;
        e->items.push_back(expression(true));
        expect_op(":");
        e->items.push_back(expression(true));
      }
      expect_op("}");
      return e;
    }
    fail(at, fmt::format("unexpected {}", describe(tok)));
  }

  ExprPtr postfix(ExprPtr e) {
    while (true) {
      if (is_op(".") || is_op("[")) e = subscript(std::move(e));
      else if (is_op("(")) e = call(std::move(e));
      else return e;
    }
  }

  ExprPtr filter_expr(ExprPtr e) {
    while (true) {
      if (is_op("|")) e = filter(std::move(e));
      else if (is_name("is")) e = test(std::move(e));
      else if (is_op("(")) e = call(std::move(e));
      else return e;
    }
  }

  ExprPtr subscript(ExprPtr obj) {
    const Where at = cur().at;
    if (skip_op(".")) {
      if (cur().type == Token::name) {
        auto e = make(Expr::getattr, at);
        e->a = std::move(obj);
        e->name = expect_name();
        return e;
      }
      if (cur().type != Token::integer) fail(cur().at, "expected name or number");
      auto e = make(Expr::getitem, at);
      e->a = std::move(obj);
      e->b = make(Expr::literal, cur().at);
      e->b->value = cur().value;
      next();
      return e;
    }
    next();  // [
    std::vector<ExprPtr> args;
    while (!is_op("]")) {
      if (!args.empty()) expect_op(",");
      args.push_back(subscribed());
    }
    expect_op("]");
    auto e = make(Expr::getitem, at);
    e->a = std::move(obj);
    if (args.size() == 1) {
      e->b = std::move(args.front());
    } else {
      e->b = make(Expr::tuple, at);
      e->b->items = std::move(args);
    }
    return e;
  }

  ExprPtr subscribed() {
    const Where at = cur().at;
    ExprPtr start;
    if (!is_op(":")) {
      start = expression(true);
      if (!is_op(":")) return start;
    }
    next();  // the first ':'
    auto s = make(Expr::slice, at);
    s->a = std::move(start);
    auto part_end = [&] { return is_op("]") || is_op(",") || is_op(":"); };
    if (!part_end()) s->b = expression(true);
    if (skip_op(":")) {
      if (!is_op("]") && !is_op(",")) s->c = expression(true);
    }
    return s;
  }

  // (args, name=value, *args, **kwargs) into e.
  void call_args(Expr& e) {
    expect_op("(");
    bool need_comma = false;
    while (!is_op(")")) {
      if (need_comma) {
        expect_op(",");
        if (is_op(")")) break;
      }
      const Where at = cur().at;
      if (skip_op("*")) {
        if (e.dyn_args || e.dyn_kwargs) fail(at, "invalid syntax for function call expression");
        e.dyn_args = expression(true);
      } else if (skip_op("**")) {
        if (e.dyn_kwargs) fail(at, "invalid syntax for function call expression");
        e.dyn_kwargs = expression(true);
      } else if (cur().type == Token::name && look().type == Token::op && look().text == "=") {
        if (e.dyn_args || e.dyn_kwargs) fail(at, "invalid syntax for function call expression");
        std::string key = expect_name();
        next();
        e.kwargs.emplace_back(std::move(key), expression(true));
      } else {
        if (e.dyn_args || e.dyn_kwargs || !e.kwargs.empty()) fail(at, "invalid syntax for function call expression");
        e.items.push_back(expression(true));
      }
      need_comma = true;
    }
    expect_op(")");
  }

  ExprPtr call(ExprPtr fn) {
    auto e = make(Expr::call, cur().at);
    e->a = std::move(fn);
    call_args(*e);
    return e;
  }

  std::string dotted_name() {
    std::string n = expect_name();
    while (skip_op(".")) n += "." + expect_name();
    return n;
  }

  ExprPtr filter(ExprPtr input, bool inline_start = false) {
    const Where at = cur().at;
    if (!inline_start) expect_op("|");
    auto e = make(Expr::filter, at);
    e->a = std::move(input);
    e->name = dotted_name();
    if (!known_filter(e->name)) fail(at, fmt::format("No filter named '{}'.", e->name));
    if (is_op("(")) call_args(*e);
    return e;
  }

  ExprPtr test(ExprPtr input) {
    const Where at = cur().at;
    next();  // is
    auto e = make(Expr::test, at);
    e->a = std::move(input);
    e->negated = skip_name("not");
    e->name = dotted_name();
    if (!known_test(e->name)) fail(at, fmt::format("No test named '{}'.", e->name));
    if (is_op("(")) {
      call_args(*e);
    } else if ((cur().type == Token::name || cur().type == Token::string || cur().type == Token::integer ||
                cur().type == Token::floating || is_op("(") || is_op("[") || is_op("{")) &&
               !is_name("else") && !is_name("or") && !is_name("and")) {
      if (is_name("is")) fail(cur().at, "You cannot chain multiple tests with is");
      e->items.push_back(postfix(primary()));
    }
    return e;
  }

  std::vector<Token> t_;
  std::size_t p_ = 0;
  const std::string& origin_;
  int max_depth_;
  int depth_ = 0;
  int loops_ = 0;
  std::vector<std::string> open_;
};

}  // namespace

Body parse(std::string_view source, const std::string& origin, int max_depth) {
  Lexer lexer(source, origin);
  Parser parser(lexer.run(), origin, max_depth);
  return parser.parse_template();
}

}  // namespace braid::jinja
