// Running a tokenizer.json's steps: normalize, pre-tokenize, BPE, decode.
#include "tokenizer/hf_tokenizer.hpp"

#include "core/error.hpp"
#include "tokenizer/byte_level.hpp"
#include "tokenizer/unicode_normalize.hpp"
#include "tokenizer/utf8.hpp"

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

namespace {

using Aligned = HfTokenizer::Aligned;

Aligned slice(const Aligned& a, std::size_t b, std::size_t e) {
  return {a.s.substr(b, e - b), std::vector<TokenSpan>(a.from.begin() + static_cast<std::ptrdiff_t>(b),
                                                       a.from.begin() + static_cast<std::ptrdiff_t>(e))};
}

// Every occurrence of `from` replaced by `to`, whose bytes stand for the bytes replaced.
void replace_aligned(Aligned& a, std::string_view from, std::string_view to) {
  if (from.empty() || a.s.find(from) == std::string::npos) return;
  Aligned out;
  std::size_t pos = 0;
  for (std::size_t hit = a.s.find(from); hit != std::string::npos; hit = a.s.find(from, pos)) {
    out.s.append(a.s, pos, hit - pos);
    out.from.insert(out.from.end(), a.from.begin() + static_cast<std::ptrdiff_t>(pos),
                    a.from.begin() + static_cast<std::ptrdiff_t>(hit));
    const TokenSpan span{a.from[hit].begin, a.from[hit + from.size() - 1].end};
    out.s.append(to);
    out.from.insert(out.from.end(), to.size(), span);
    pos = hit + from.size();
  }
  out.s.append(a.s, pos);
  out.from.insert(out.from.end(), a.from.begin() + static_cast<std::ptrdiff_t>(pos), a.from.end());
  a = std::move(out);
}

// `content` put in front; it stands for the first character, as in HF's NormalizedString.
void prepend_aligned(Aligned& a, std::string_view content) {
  if (a.s.empty()) return;
  const std::size_t first = utf8::char_length(a.s, 0);
  const TokenSpan span{a.from.front().begin, a.from[first - 1].end};
  a.s.insert(0, content);
  a.from.insert(a.from.begin(), content.size(), span);
}

void unicode_aligned(Aligned& a, const std::string& form) {
  const std::string whole = unicode_normalize(a.s, form);
  if (whole == a.s) return;
  // Normalized piece by piece between the points where that changes nothing, each
  // piece's bytes standing for the piece.
  Aligned out;
  std::vector<std::size_t> cuts = normalization_boundaries(a.s, form);
  cuts.push_back(a.s.size());
  std::size_t b = 0;
  for (std::size_t e : cuts) {
    const std::string_view piece(a.s.data() + b, e - b);
    const std::string n = unicode_normalize(piece, form);
    out.s += n;
    if (n == piece) {
      out.from.insert(out.from.end(), a.from.begin() + static_cast<std::ptrdiff_t>(b),
                      a.from.begin() + static_cast<std::ptrdiff_t>(e));
    } else {
      out.from.insert(out.from.end(), n.size(), TokenSpan{a.from[b].begin, a.from[e - 1].end});
    }
    b = e;
  }
  a = std::move(out);
}

Aligned byte_level_aligned(const Aligned& a) {
  // Each byte becomes one character of the table: walk the two side by side.
  Aligned out{byte_level::encode(a.s), {}};
  out.from.reserve(out.s.size());
  std::size_t pos = 0;
  for (std::size_t i = 0; i < a.s.size(); ++i) {
    const std::size_t n = utf8::char_length(out.s, pos);
    out.from.insert(out.from.end(), n, a.from[i]);
    pos += n;
  }
  return out;
}

}  // namespace

void HfTokenizer::normalize(Aligned& text) const {
  for (const NormStep& s : normalizer_) {
    if (s.kind == NormStep::prepend) prepend_aligned(text, s.content);
    else if (s.kind == NormStep::unicode) unicode_aligned(text, s.pattern);
    else replace_aligned(text, s.pattern, s.content);
  }
}

std::vector<Aligned> HfTokenizer::pre_tokenize(Aligned text, bool first_segment) const {
  std::vector<Aligned> pieces{std::move(text)};
  for (const PreStep& s : pre_tokenizer_) {
    std::vector<Aligned> next;
    for (std::size_t i = 0; i < pieces.size(); ++i) {
      Aligned piece = std::move(pieces[i]);
      switch (s.kind) {
        case PreStep::byte_level: {
          if (s.add_prefix_space && !piece.s.empty() && piece.s.front() != ' ') prepend_aligned(piece, " ");
          if (s.regex) {
            for (auto [b, e] : split_ranges(piece.s.size(), s.regex->find_all(piece.s), SplitBehavior::isolated)) {
              next.push_back(byte_level_aligned(slice(piece, b, e)));
            }
          } else {
            next.push_back(byte_level_aligned(piece));
          }
          break;
        }
        case PreStep::split: {
          auto m = s.regex ? s.regex->find_all(piece.s) : literal_matches(piece.s, s.literal);
          if (s.invert) m = complement(m, piece.s.size());
          for (auto [b, e] : split_ranges(piece.s.size(), m, s.behavior)) next.push_back(slice(piece, b, e));
          break;
        }
        case PreStep::metaspace: {
          replace_aligned(piece, " ", s.replacement);
          const bool prepend = s.prepend_scheme == "always" || (s.prepend_scheme == "first" && first_segment && i == 0);
          if (prepend && !piece.s.starts_with(s.replacement)) prepend_aligned(piece, s.replacement);
          if (s.split_on_replacement) {
            for (auto [b, e] : split_ranges(piece.s.size(), literal_matches(piece.s, s.replacement),
                                            SplitBehavior::merged_with_next)) {
              next.push_back(slice(piece, b, e));
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

void HfTokenizer::encode_segment(std::string_view text, std::size_t offset, bool first_segment, Encoding& out) const {
  if (text.empty()) return;
  Aligned a{std::string(text), {}};
  a.from.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) a.from.push_back({offset + i, offset + i + 1});
  normalize(a);
  std::vector<std::pair<std::size_t, std::size_t>> spans;
  for (const Aligned& piece : pre_tokenize(std::move(a), first_segment)) {
    spans.clear();
    model_.tokenize(piece.s, out.ids, &spans);
    for (auto [b, e] : spans) {
      TokenSpan t{piece.from[b].begin, piece.from[b].end};
      for (std::size_t k = b; k < e; ++k) {
        t.begin = std::min(t.begin, piece.from[k].begin);
        t.end = std::max(t.end, piece.from[k].end);
      }
      out.spans.push_back(t);
    }
  }
}

Encoding HfTokenizer::encode_with_offsets(std::string_view text) const {
  Encoding out;
  std::size_t seg_begin = 0;
  bool first_segment = true;
  for (std::size_t pos = 0; pos < text.size();) {
    const std::pair<std::string, TokenId>* hit = nullptr;
    for (const auto& a : added_) {
      if (text.substr(pos).starts_with(a.first)) { hit = &a; break; }
    }
    if (hit == nullptr) { ++pos; continue; }
    encode_segment(text.substr(seg_begin, pos - seg_begin), seg_begin, first_segment, out);
    out.ids.push_back(hit->second);
    out.spans.push_back({pos, pos + hit->first.size()});
    first_segment = false;
    pos += hit->first.size();
    seg_begin = pos;
  }
  encode_segment(text.substr(seg_begin), seg_begin, first_segment, out);
  return out;
}

std::vector<TokenId> HfTokenizer::encode(std::string_view text) const { return encode_with_offsets(text).ids; }

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
