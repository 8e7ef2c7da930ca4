// Running a tokenizer.json's steps: normalize, pre-tokenize, BPE, decode.
#include "tokenizer/hf_tokenizer.hpp"

#include "core/error.hpp"
#include "tokenizer/byte_level.hpp"
#include "tokenizer/unicode_normalize.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace braid::tok {

namespace {

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  if (from.empty()) return;
  for (std::size_t pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + to.size())) {
    s.replace(pos, from.size(), to);
  }
}

std::vector<std::pair<std::size_t, std::size_t>> literal_matches(std::string_view text, std::string_view lit) {
  std::vector<std::pair<std::size_t, std::size_t>> m;
  if (lit.empty()) return m;
  for (std::size_t pos = text.find(lit); pos != std::string_view::npos; pos = text.find(lit, pos + lit.size())) {
    m.emplace_back(pos, pos + lit.size());
  }
  return m;
}

std::vector<std::pair<std::size_t, std::size_t>> complement(const std::vector<std::pair<std::size_t, std::size_t>>& m,
                                                            std::size_t size) {
  std::vector<std::pair<std::size_t, std::size_t>> out;
  std::size_t pos = 0;
  for (auto [b, e] : m) {
    if (b > pos) out.emplace_back(pos, b);
    pos = e;
  }
  if (pos < size) out.emplace_back(pos, size);
  return out;
}

}  // namespace

std::string HfTokenizer::normalize(std::string text) const {
  for (const NormStep& s : normalizer_) {
    if (s.kind == NormStep::prepend) {
      if (!text.empty()) text = s.content + text;
    } else if (s.kind == NormStep::unicode) {
      text = unicode_normalize(text, s.pattern);
    } else {
      replace_all(text, s.pattern, s.content);
    }
  }
  return text;
}

std::vector<std::string> HfTokenizer::pre_tokenize(std::string text, bool first_segment) const {
  std::vector<std::string> pieces{std::move(text)};
  for (const PreStep& s : pre_tokenizer_) {
    std::vector<std::string> next;
    for (std::size_t i = 0; i < pieces.size(); ++i) {
      std::string piece = std::move(pieces[i]);
      switch (s.kind) {
        case PreStep::byte_level: {
          if (s.add_prefix_space && !piece.empty() && piece.front() != ' ') piece.insert(piece.begin(), ' ');
          std::vector<std::string> parts;
          if (s.regex) parts = split_at_matches(piece, s.regex->find_all(piece), SplitBehavior::isolated);
          else parts.push_back(piece);
          for (auto& part : parts) next.push_back(byte_level::encode(part));
          break;
        }
        case PreStep::split: {
          auto m = s.regex ? s.regex->find_all(piece) : literal_matches(piece, s.literal);
          if (s.invert) m = complement(m, piece.size());
          for (auto& part : split_at_matches(piece, m, s.behavior)) next.push_back(std::move(part));
          break;
        }
        case PreStep::metaspace: {
          replace_all(piece, " ", s.replacement);
          const bool prepend = s.prepend_scheme == "always" || (s.prepend_scheme == "first" && first_segment && i == 0);
          if (prepend && !piece.starts_with(s.replacement)) piece = s.replacement + piece;
          if (s.split_on_replacement) {
            for (auto& part : split_at_matches(piece, literal_matches(piece, s.replacement),
                                               SplitBehavior::merged_with_next)) {
              next.push_back(std::move(part));
            }
          } else {
            next.push_back(std::move(piece));
          }
          break;
        }
      }
    }
    pieces = std::move(next);
  }
  return pieces;
}

void HfTokenizer::encode_segment(std::string_view text, bool first_segment, std::vector<TokenId>& out) const {
  if (text.empty()) return;
  for (const std::string& piece : pre_tokenize(normalize(std::string(text)), first_segment)) {
    model_.tokenize(piece, out);
  }
}

std::vector<TokenId> HfTokenizer::encode(std::string_view text) const {
  std::vector<TokenId> out;
  std::size_t seg_begin = 0;
  bool first_segment = true;
  for (std::size_t pos = 0; pos < text.size();) {
    const std::pair<std::string, TokenId>* hit = nullptr;
    for (const auto& a : added_) {
      if (text.substr(pos).starts_with(a.first)) { hit = &a; break; }
    }
    if (hit == nullptr) { ++pos; continue; }
    encode_segment(text.substr(seg_begin, pos - seg_begin), first_segment, out);
    out.push_back(hit->second);
    first_segment = false;
    pos += hit->first.size();
    seg_begin = pos;
  }
  encode_segment(text.substr(seg_begin), first_segment, out);
  return out;
}

std::string HfTokenizer::decode(std::span<const TokenId> ids, bool skip_special) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (TokenId id : ids) {
    if (skip_special && special_.contains(id)) continue;
    const std::string* t = model_.token_of(id);
    if (t == nullptr) {
      throw InputError(model_.file(), "model.vocab", fmt::format("has no token with id {} (the ids to decode)", id));
    }
    tokens.push_back(*t);
  }
  for (const DecStep& s : decoder_) {
    switch (s.kind) {
      case DecStep::byte_level: {
        std::string joined;
        for (auto& t : tokens) joined += t;
        tokens = {byte_level::decode(joined)};
        break;
      }
      case DecStep::replace:
        for (auto& t : tokens) replace_all(t, s.pattern, s.content);
        break;
      case DecStep::byte_fallback:
        // <0xNN> tokens become their raw byte; a run of them forms one character.
        for (auto& t : tokens) {
          if (t.size() == 6 && t.starts_with("<0x") && t.back() == '>') {
            t = std::string(1, static_cast<char>(std::stoi(t.substr(3, 2), nullptr, 16)));
          }
        }
        break;
      case DecStep::fuse: {
        std::string joined;
        for (auto& t : tokens) joined += t;
        tokens = {joined};
        break;
      }
      case DecStep::strip:
        for (auto& t : tokens) {
          int n = 0;
          while (n < s.start && t.starts_with(s.content)) { t.erase(0, s.content.size()); ++n; }
          n = 0;
          while (n < s.stop && t.ends_with(s.content)) { t.erase(t.size() - s.content.size()); ++n; }
        }
        break;
      case DecStep::metaspace:
        for (std::size_t i = 0; i < tokens.size(); ++i) {
          replace_all(tokens[i], s.pattern, " ");
          if (i == 0 && s.strip_first && tokens[i].starts_with(' ')) tokens[i].erase(0, 1);
        }
        break;
    }
  }
  std::string text;
  for (auto& t : tokens) text += t;
  return text;
}

std::string HfTokenizer::describe() const {
  return fmt::format("hf-bpe({}) {} tokens", byte_level_ ? "byte-level" : model_.byte_fallback() ? "byte-fallback" : "plain",
                     vocab_size());
}

}  // namespace braid::tok
