#include "tokenizer/regex.hpp"

#include "core/error.hpp"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <fmt/format.h>

namespace braid::tok {

struct Regex::Impl {
  pcre2_code* code = nullptr;
  ~Impl() { pcre2_code_free(code); }
};

Regex::Regex(const std::string& pattern, const std::string& origin, const std::string& field)
    : impl_(std::make_unique<Impl>()) {
  int err = 0;
  PCRE2_SIZE err_offset = 0;
  // MATCH_INVALID_UTF: user text is arbitrary bytes, and must not make matching fail.
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                              PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &err_offset, nullptr);
  if (impl_->code == nullptr) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    throw InputError(origin, field,
                     fmt::format("regex does not compile at offset {}: {}", err_offset,
                                 reinterpret_cast<const char*>(msg)));
  }
  pcre2_jit_compile(impl_->code, PCRE2_JIT_COMPLETE);  // a speed-up only; failure is harmless
}

Regex::~Regex() = default;
Regex::Regex(Regex&&) noexcept = default;
Regex& Regex::operator=(Regex&&) noexcept = default;

std::vector<std::pair<std::size_t, std::size_t>> Regex::find_all(std::string_view text) const {
  std::vector<std::pair<std::size_t, std::size_t>> out;
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(impl_->code, nullptr);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  std::size_t start = 0;
  while (start <= text.size()) {
    const int rc = pcre2_match(impl_->code, subject, text.size(), start, 0, md, nullptr);
    if (rc < 0) break;
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    std::size_t b = ov[0], e = ov[1];
    if (e == b) {
      // An empty match says nothing about where to cut; step past one character.
      start = e + 1;
      while (start < text.size() && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) ++start;
      continue;
    }
    out.emplace_back(b, e);
    start = e;
  }
  pcre2_match_data_free(md);
  return out;
}

std::vector<ByteRange> split_ranges(std::size_t text_size, const std::vector<ByteRange>& matches,
                                    SplitBehavior behavior) {
  // Pieces as (begin, end, is_match), covering the whole text.
  struct Piece { std::size_t b, e; bool match; };
  std::vector<Piece> pieces;
  std::size_t pos = 0;
  for (auto [b, e] : matches) {
    if (b > pos) pieces.push_back({pos, b, false});
    pieces.push_back({b, e, true});
    pos = e;
  }
  if (pos < text_size) pieces.push_back({pos, text_size, false});

  std::vector<ByteRange> out;
  auto emit = [&](std::size_t b, std::size_t e) {
    if (e > b) out.emplace_back(b, e);
  };
  switch (behavior) {
    case SplitBehavior::removed:
      for (const Piece& p : pieces) if (!p.match) emit(p.b, p.e);
      break;
    case SplitBehavior::isolated:
      for (const Piece& p : pieces) emit(p.b, p.e);
      break;
    case SplitBehavior::contiguous: {
      std::size_t i = 0;
      while (i < pieces.size()) {
        std::size_t j = i;
        while (j + 1 < pieces.size() && pieces[j + 1].match == pieces[i].match) ++j;
        emit(pieces[i].b, pieces[j].e);
        i = j + 1;
      }
      break;
    }
    case SplitBehavior::merged_with_previous: {
      std::size_t begin = 0;
      for (const Piece& p : pieces) {
        if (p.match) { emit(begin, p.e); begin = p.e; }
      }
      emit(begin, text_size);
      break;
    }
    case SplitBehavior::merged_with_next: {
      std::size_t begin = 0;
      for (const Piece& p : pieces) {
        if (p.match) { emit(begin, p.b); begin = p.b; }
      }
      emit(begin, text_size);
      break;
    }
  }
  return out;
}

std::vector<std::string> split_at_matches(std::string_view text, const std::vector<ByteRange>& matches,
                                          SplitBehavior behavior) {
  std::vector<std::string> out;
  for (auto [b, e] : split_ranges(text.size(), matches, behavior)) out.emplace_back(text.substr(b, e - b));
  return out;
}

}  // namespace braid::tok
