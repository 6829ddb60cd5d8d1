// read_corpus (include/nuvec/lm/train.h): the documents of a directory of text files, split
// at strfile's "%" lines (the format of fortune(6)'s files, Debian's fortunes packages).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "state.h"

namespace nuvec::lm {

namespace fs = std::filesystem;
using train_detail::runtime;

namespace {

// UTF-8 without NUL bytes (RFC 3629: no overlong forms, surrogates or code points past
// U+10FFFF), which train_bpe_tokenizer_json and Tokenizer::encode take.
bool valid_utf8_text(const std::string& s) {
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == 0) return false;
    const int len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (len == 0 || i + len > n) return false;
    uint32_t cp = len == 1 ? c : c & (0x7F >> len);
    for (int k = 1; k < len; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

void add_document(std::string doc, std::vector<std::string>& out) {
  while (!doc.empty() && (doc.back() == '\n' || doc.back() == '\r')) doc.pop_back();
  if (doc.find_first_not_of(" \t\r\n\f\v") != std::string::npos) out.push_back(std::move(doc));
}

} // namespace

Corpus read_corpus(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) runtime("read_corpus: ", dir, " is not a readable directory.");
  std::vector<fs::path> paths;
  fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    if (fs::is_regular_file(it->symlink_status()) && it->path().extension() != ".dat") paths.push_back(it->path());
  }
  if (ec) runtime("read_corpus: cannot list ", dir, ": ", ec.message(), ".");
  std::sort(paths.begin(), paths.end());

  Corpus c;
  for (const auto& p : paths) {
    std::ifstream f(p, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    const std::string text = ss.str();
    if (!f || !valid_utf8_text(text)) {
      c.skipped.push_back(p.string());
      continue;
    }
    c.files.push_back(p.string());
    std::string doc;
    for (size_t pos = 0; pos < text.size();) {
      const size_t eol = std::min(text.find('\n', pos), text.size());
      std::string_view line(text.data() + pos, eol - pos);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      const size_t next = std::min(eol + 1, text.size());
      if (line == "%") {
        add_document(std::move(doc), c.documents);
        doc.clear();
      } else {
        doc.append(text, pos, next - pos);
      }
      pos = next;
    }
    add_document(std::move(doc), c.documents);
  }
  if (c.documents.empty()) {
    runtime("read_corpus: no document in ", dir, " (", c.files.size(), " text files read, ", c.skipped.size(),
            " skipped as not UTF-8 text).");
  }
  return c;
}

} // namespace nuvec::lm
