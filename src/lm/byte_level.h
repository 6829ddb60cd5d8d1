// GPT-2's byte-to-character table of byte-level BPE (openai/gpt-2 src/encoder.py,
// bytes_to_unicode), shared by the tokenizer (src/lm/tokenizer.cpp) and its trainer
// (src/lm/bpe_trainer.cpp).
#pragma once

#include <array>
#include <string>

namespace nuvec::lm::detail {

// The UTF-8 of the printable character standing for each byte: '!'..'~', 0xA1..0xAC and
// 0xAE..0xFF stand for themselves, the other 68 bytes map to U+0100.. in byte order.
const std::array<std::string, 256>& byte_level_chars();

} // namespace nuvec::lm::detail
