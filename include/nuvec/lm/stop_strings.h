// The text of generated tokens as it becomes final, cut at the first stop string: what
// generate() streams, and what the OpenAI-compatible server (nuvec-lm serve) sends.
#pragma once

#include <string>
#include <vector>

#include "nuvec/lm/tokenizer.h"

namespace nuvec::lm {

/// Incremental decoding of generated tokens with stop strings. Each push() decodes one token
/// with a StreamingDecoder (special tokens skipped) and returns the text that has become
/// final: complete UTF-8 that cannot be the beginning of a stop string any more. When a stop
/// string appears in the decoded text, the text before it is returned, the stop string and
/// all after it are dropped, and stopped() turns true. The concatenation of every push() and
/// finish() result equals tokenizer.decode(tokens, true) cut before the first stop string.
/// Not thread-safe; one object per sequence.
class StopStringDecoder {
 public:
  /// A decoder of `tokenizer`'s ids ending at any of `stop_strings` (empty strings are ignored).
  StopStringDecoder(const Tokenizer& tokenizer, std::vector<std::string> stop_strings);

  /// Appends one token and returns the newly final text (possibly empty). After a stop string
  /// it returns "" without decoding. Throws std::out_of_range for an id the tokenizer does not
  /// know (as StreamingDecoder::push).
  std::string push(int token);

  /// The end of generation: returns the text still held back (a partial stop string, an
  /// incomplete character as U+FFFD), cut before a stop string the held text completes.
  /// Returns "" once stopped().
  std::string finish();

  /// Whether a stop string has been found.
  bool stopped() const { return stopped_; }

 private:
  std::string release(bool final);

  StreamingDecoder decoder_;
  std::vector<std::string> stops_;
  std::string pending_; // decoded but maybe part of a stop string
  bool stopped_ = false;
};

} // namespace nuvec::lm
