// Unicode normalization forms for tokenizer.json normalizers, on ICU.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace braid::tok {

// form: "NFC", "NFKC", "NFD" or "NFKD". Invalid UTF-8 becomes U+FFFD.
std::string unicode_normalize(std::string_view utf8, const std::string& form);

// Byte positions (after 0) where the text may be cut without changing its normal form:
// the pieces normalized one by one give the whole's normal form. For offsets.
std::vector<std::size_t> normalization_boundaries(std::string_view utf8, const std::string& form);

}  // namespace braid::tok
