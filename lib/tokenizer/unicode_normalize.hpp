// Unicode normalization forms for tokenizer.json normalizers, on ICU.
#pragma once

#include <string>
#include <string_view>

namespace braid::tok {

// form: "NFC", "NFKC", "NFD" or "NFKD". Invalid UTF-8 becomes U+FFFD.
std::string unicode_normalize(std::string_view utf8, const std::string& form);

}  // namespace braid::tok
