#include "tokenizer/unicode_normalize.hpp"

#include "tokenizer/utf8.hpp"

#include <unicode/normalizer2.h>
#include <unicode/unistr.h>

#include <stdexcept>

namespace braid::tok {

namespace {

const icu::Normalizer2& normalizer(const std::string& form) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* n = nullptr;
  if (form == "NFC") n = icu::Normalizer2::getNFCInstance(status);
  else if (form == "NFKC") n = icu::Normalizer2::getNFKCInstance(status);
  else if (form == "NFD") n = icu::Normalizer2::getNFDInstance(status);
  else if (form == "NFKD") n = icu::Normalizer2::getNFKDInstance(status);
  if (n == nullptr || U_FAILURE(status)) throw std::runtime_error("ICU has no normalizer " + form);
  return *n;
}

}  // namespace

std::vector<std::size_t> normalization_boundaries(std::string_view utf8, const std::string& form) {
  const icu::Normalizer2& n = normalizer(form);
  std::vector<std::size_t> cuts;
  for (std::size_t pos = 0; pos < utf8.size();) {
    std::size_t len = 0;
    const char32_t cp = utf8::decode_at(utf8, pos, len);
    // An invalid byte becomes U+FFFD, a starter that composes with nothing.
    if (pos > 0 && (len == 1 && cp >= 0x80 ? true : n.hasBoundaryBefore(static_cast<UChar32>(cp)))) cuts.push_back(pos);
    pos += len;
  }
  return cuts;
}

std::string unicode_normalize(std::string_view utf8, const std::string& form) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* n = &normalizer(form);
  const icu::UnicodeString in = icu::UnicodeString::fromUTF8(icu::StringPiece(utf8.data(), static_cast<int32_t>(utf8.size())));
  const icu::UnicodeString out = n->normalize(in, status);
  if (U_FAILURE(status)) throw std::runtime_error(std::string("ICU normalization failed: ") + u_errorName(status));
  std::string result;
  out.toUTF8String(result);
  return result;
}

}  // namespace braid::tok
