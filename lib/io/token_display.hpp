// Token ids shown to people (braid inspect), assuming braid's default byte
// tokenizer (tokenizer/byte_tokenizer.hpp: id = byte 0..255, 256 BOS, 257 EOS,
// 258 PAD). Ids of other tokenizers still show, as <|id:N|>, so a shard is
// always displayable without loading its tokenizer.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace braid::io {

// One line: printable ASCII as is; \n, \t, \\ and other bytes escaped (\xNN);
// <|bos|>, <|eos|>, <|pad|>; ids beyond the byte vocabulary as <|id:N|>.
std::string display_tokens(std::span<const std::int32_t> tokens);

// Text a tokenizer decoded, on one line: UTF-8 characters as they are; newline, tab,
// backslash and control characters escaped (\n, \t, \\), bytes that are not valid
// UTF-8 as \xNN.
std::string display_text(std::string_view text);

}  // namespace braid::io
