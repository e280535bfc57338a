// gpt2_tokenizer.cpp — loading the vocabulary, the PCRE2 pre-tokenizer, rank-ordered BPE merges,
// the word cache, decoding.
//
// BPE here merges one pair at a time: the adjacent pair of lowest rank, the leftmost on a tie.
// encoder.py merges every occurrence of the lowest-rank pair in one sweep instead; the two agree
// whenever a merge never ranks below the merges that made its two halves, which holds for GPT-2's
// vocab.bpe (every one of the 50,000 merges). Short words use a plain scan; long ones (a megabyte
// of '=' is one word) a heap, so no input is quadratic.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/gpt2_tokenizer.h"

#include <pcre2.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>
#include <utility>

#ifndef GPT2_DATA_DIR
#define GPT2_DATA_DIR "data"
#endif

namespace gpt2 {
namespace {

// GPT-2's regex. Python's `regex` module, which GPT-2 used, takes \s as Unicode White_Space;
// PCRE2's \s with UCP leaves out U+0085, so the class is spelled out (W below) to match exactly.
#define GPT2_WS "\\t\\n\\x{0B}\\f\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"
constexpr const char kPattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" GPT2_WS "\\p{L}\\p{N}]+"
    "|[" GPT2_WS "]+(?![^" GPT2_WS "])|[" GPT2_WS "]+";
#undef GPT2_WS

constexpr size_t kShortWord = 64;         // symbols; longer words take the heap path
constexpr size_t kMaxCachedWord = 256;    // bytes; longer words are not cached
constexpr size_t kMaxCacheEntries = 1u << 20;  // the cache is dropped whole past this

// GPT-2's bytes_to_unicode(): printable bytes map to themselves (as code points), the other 68 to
// U+0100.. in byte order, so every token is a printable string.
std::array<uint32_t, 256> byte_to_codepoint() {
  std::array<uint32_t, 256> map{};
  std::array<bool, 256> printable{};
  for (int b = '!'; b <= '~'; ++b) printable[b] = true;
  for (int b = 0xA1; b <= 0xAC; ++b) printable[b] = true;
  for (int b = 0xAE; b <= 0xFF; ++b) printable[b] = true;
  uint32_t next = 256;
  for (int b = 0; b < 256; ++b) map[b] = printable[b] ? uint32_t(b) : next++;
  return map;
}

// Decodes a token string of encoder.json / vocab.bpe (UTF-8 over the byte alphabet) into raw bytes.
bool unicode_token_to_bytes(std::string_view s, const std::array<int, 512>& cp_to_byte, std::string& out) {
  out.clear();
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    uint32_t cp;
    if (c < 0x80) {
      cp = c, i += 1;
    } else if ((c & 0xE0) == 0xC0 && i + 1 < s.size()) {
      cp = (c & 0x1Fu) << 6 | (static_cast<unsigned char>(s[i + 1]) & 0x3Fu), i += 2;
    } else {
      return false;  // the alphabet is U+0021..U+0143: one or two UTF-8 bytes
    }
    if (cp >= cp_to_byte.size() || cp_to_byte[cp] < 0) return false;
    out.push_back(static_cast<char>(cp_to_byte[cp]));
  }
  return true;
}

Status read_file(const std::string& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) {
      return rankscope::not_found(path + ": no such file (hint: the GPT-2 vocabulary ships in data/gpt2; "
                                  "set RANKSCOPE_DATA_DIR or pass --vocab-dir)");
    }
    return rankscope::io_error(path + ": cannot open: " + std::strerror(errno));
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  out = std::move(ss).str();
  return Status::ok_status();
}

// Merge table: (left id, right id) -> (rank, merged id), open addressing, keys never erased.
class MergeTable {
 public:
  struct Entry {
    uint64_t key = kEmpty;
    int32_t rank = 0;
    TokenId merged = 0;
  };
  static constexpr uint64_t kEmpty = ~0ull;

  void reserve(size_t n) {
    size_t cap = 16;
    while (cap < 2 * n) cap <<= 1;
    slots_.assign(cap, Entry{});
    mask_ = cap - 1;
  }
  // Keeps the first (lowest-rank) entry for a pair.
  void insert(TokenId a, TokenId b, int32_t rank, TokenId merged) {
    const uint64_t key = make_key(a, b);
    for (size_t i = hash(key) & mask_;; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return;
      if (slots_[i].key == kEmpty) {
        slots_[i] = Entry{key, rank, merged};
        return;
      }
    }
  }
  const Entry* find(TokenId a, TokenId b) const {
    const uint64_t key = make_key(a, b);
    for (size_t i = hash(key) & mask_;; i = (i + 1) & mask_) {
      const Entry& e = slots_[i];
      if (e.key == key) return &e;
      if (e.key == kEmpty) return nullptr;
    }
  }

 private:
  static uint64_t make_key(TokenId a, TokenId b) { return uint64_t(uint32_t(a)) << 32 | uint32_t(b); }
  static size_t hash(uint64_t x) {  // splitmix64 finaliser
    x ^= x >> 30, x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27, x *= 0x94d049bb133111ebull;
    return static_cast<size_t>(x ^ (x >> 31));
  }
  std::vector<Entry> slots_;
  size_t mask_ = 0;
};

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

}  // namespace

std::string default_data_dir() {
  if (const char* env = std::getenv("RANKSCOPE_DATA_DIR"); env != nullptr && *env != '\0') return env;
  return GPT2_DATA_DIR;
}

std::string default_vocab_dir() { return default_data_dir() + "/gpt2"; }

struct Gpt2Tokenizer::Impl {
  // vocabulary
  std::vector<std::string> id_bytes;  // token id -> its bytes
  std::array<TokenId, 256> byte_token{};
  MergeTable merges;

  // pre-tokenizer
  pcre2_code* re = nullptr;
  pcre2_match_data* match = nullptr;
  pcre2_match_context* match_context = nullptr;
  pcre2_jit_stack* jit_stack = nullptr;
  bool jit = false;

  // word cache: word bytes -> a range of `pool`
  struct Range {
    uint32_t offset, length;
  };
  std::unordered_map<std::string, Range, StringHash, std::equal_to<>> cache;
  std::vector<TokenId> pool;

  // scratch of the BPE (kept to avoid allocating per word)
  std::vector<TokenId> sym;
  std::vector<int32_t> pair_rank;
  std::vector<TokenId> pair_merged;
  struct Node {
    TokenId id;
    int32_t prev, next;
  };
  std::vector<Node> nodes;
  struct Candidate {
    int32_t rank, left;  // pair (left, nodes[left].next)
    TokenId left_id, right_id;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
  };
  std::vector<Candidate> heap;

  ~Impl() {
    if (match != nullptr) pcre2_match_data_free(match);
    if (match_context != nullptr) pcre2_match_context_free(match_context);
    if (jit_stack != nullptr) pcre2_jit_stack_free(jit_stack);
    if (re != nullptr) pcre2_code_free(re);
  }

  Status compile_regex() {
    int err = 0;
    PCRE2_SIZE err_offset = 0;
    re = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kPattern), PCRE2_ZERO_TERMINATED,
                       PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &err_offset, nullptr);
    if (re == nullptr) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      return rankscope::internal_error("GPT-2 regex does not compile at offset " + std::to_string(err_offset) +
                                       ": " + reinterpret_cast<const char*>(msg));
    }
    // JIT when the library has it (Debian's does); the interpreter otherwise, same results.
    jit = pcre2_jit_compile(re, PCRE2_JIT_COMPLETE) == 0;
    match = pcre2_match_data_create_from_pattern(re, nullptr);
    match_context = pcre2_match_context_create(nullptr);
    if (jit) {
      // Long matches can outgrow JIT's 32 KiB default stack; let it grow (the interpreter is the
      // fallback if even this is not enough, see encode_append).
      jit_stack = pcre2_jit_stack_create(32 * 1024, 16 * 1024 * 1024, nullptr);
      pcre2_jit_stack_assign(match_context, nullptr, jit_stack);
    }
    if (match == nullptr || match_context == nullptr) return rankscope::internal_error("pcre2: out of memory");
    return Status::ok_status();
  }

  void append_range(Range r, std::vector<TokenId>& out) const {
    out.insert(out.end(), pool.begin() + r.offset, pool.begin() + r.offset + r.length);
  }

  // One word: cached ids, or BPE (then cached when short enough).
  void encode_word(std::string_view word, std::vector<TokenId>& out) {
    if (word.size() == 1) {
      out.push_back(byte_token[static_cast<unsigned char>(word[0])]);
      return;
    }
    if (auto it = cache.find(word); it != cache.end()) {
      append_range(it->second, out);
      return;
    }
    const size_t start = out.size();
    bpe(word, out);
    if (word.size() <= kMaxCachedWord) {
      if (cache.size() >= kMaxCacheEntries) {
        cache.clear();
        pool.clear();
      }
      const Range r{static_cast<uint32_t>(pool.size()), static_cast<uint32_t>(out.size() - start)};
      pool.insert(pool.end(), out.begin() + static_cast<ptrdiff_t>(start), out.end());
      cache.emplace(std::string(word), r);
    }
  }

  void bpe(std::string_view word, std::vector<TokenId>& out) {
    if (word.size() <= kShortWord) {
      bpe_short(word, out);
    } else {
      bpe_long(word, out);
    }
  }

  void rank_pair(size_t i) {  // pair (sym[i], sym[i+1]) -> pair_rank[i], pair_merged[i]
    const MergeTable::Entry* e = merges.find(sym[i], sym[i + 1]);
    pair_rank[i] = e != nullptr ? e->rank : INT32_MAX;
    pair_merged[i] = e != nullptr ? e->merged : -1;
  }

  // Scan for the lowest-rank pair, merge it, repeat: O(n^2) in the symbols, fine for n <= 64.
  void bpe_short(std::string_view word, std::vector<TokenId>& out) {
    size_t n = word.size();
    sym.resize(n);
    pair_rank.resize(n);
    pair_merged.resize(n);
    for (size_t i = 0; i < n; ++i) sym[i] = byte_token[static_cast<unsigned char>(word[i])];
    for (size_t i = 0; i + 1 < n; ++i) rank_pair(i);
    while (n > 1) {
      size_t best = 0;
      for (size_t i = 1; i + 1 < n; ++i) {
        if (pair_rank[i] < pair_rank[best]) best = i;
      }
      if (pair_rank[best] == INT32_MAX) break;
      sym[best] = pair_merged[best];
      // remove symbol best+1 and pair best+1
      for (size_t i = best + 1; i + 1 < n; ++i) {
        sym[i] = sym[i + 1];
        pair_rank[i] = pair_rank[i + 1];
        pair_merged[i] = pair_merged[i + 1];
      }
      --n;
      if (best + 1 < n) rank_pair(best);
      if (best > 0) rank_pair(best - 1);
    }
    out.insert(out.end(), sym.begin(), sym.begin() + static_cast<ptrdiff_t>(n));
  }

  // The same merges in the same order with a heap of candidate pairs over a linked list:
  // O(n log n). Candidates are checked when popped (their nodes may have changed since).
  void bpe_long(std::string_view word, std::vector<TokenId>& out) {
    const auto n = static_cast<int32_t>(word.size());
    nodes.resize(static_cast<size_t>(n));
    for (int32_t i = 0; i < n; ++i) {
      nodes[i] = Node{byte_token[static_cast<unsigned char>(word[i])], i - 1, i + 1 < n ? i + 1 : -1};
    }
    heap.clear();
    auto push = [&](int32_t left) {
      const int32_t right = nodes[left].next;
      if (right < 0) return;
      if (const MergeTable::Entry* e = merges.find(nodes[left].id, nodes[right].id)) {
        heap.push_back(Candidate{e->rank, left, nodes[left].id, nodes[right].id});
        std::push_heap(heap.begin(), heap.end(), std::greater<>{});
      }
    };
    for (int32_t i = 0; i + 1 < n; ++i) push(i);
    while (!heap.empty()) {
      std::pop_heap(heap.begin(), heap.end(), std::greater<>{});
      const Candidate c = heap.back();
      heap.pop_back();
      Node& left = nodes[c.left];
      // stale: the left node was merged away or changed, or its right neighbour did
      if (left.id != c.left_id || left.next < 0 || nodes[left.next].id != c.right_id) continue;
      const int32_t right = left.next;
      left.id = merges.find(c.left_id, c.right_id)->merged;
      left.next = nodes[right].next;
      if (left.next >= 0) nodes[left.next].prev = c.left;
      nodes[right].id = -1;  // dead
      if (left.prev >= 0) push(left.prev);
      push(c.left);
    }
    for (int32_t i = 0; i >= 0 && i < n; i = nodes[i].next) out.push_back(nodes[i].id);
  }

  void encode_append(std::string_view text, std::vector<TokenId>& out) {
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    const size_t n = text.size();
    PCRE2_SIZE* ov = pcre2_get_ovector_pointer(match);
    size_t pos = 0;
    while (pos < n) {
      int rc = jit ? pcre2_jit_match(re, subject, n, pos, 0, match, match_context)
                   : pcre2_match(re, subject, n, pos, 0, match, match_context);
      if (rc < 0 && rc != PCRE2_ERROR_NOMATCH && jit) {
        rc = pcre2_match(re, subject, n, pos, PCRE2_NO_JIT, match, match_context);  // JIT stack full
      }
      if (rc < 0) {
        // No match: the rest is bytes that are not UTF-8. (Any other error is treated the same:
        // the rest is encoded byte-level rather than dropped, so decode(encode(x)) == x still.)
        encode_word(text.substr(pos), out);
        break;
      }
      const size_t begin = ov[0], end = ov[1];
      if (begin > pos) encode_word(text.substr(pos, begin - pos), out);  // a run of non-UTF-8 bytes
      encode_word(text.substr(begin, end - begin), out);
      pos = end;
    }
  }
};

Gpt2Tokenizer::Gpt2Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Gpt2Tokenizer::Gpt2Tokenizer(Gpt2Tokenizer&&) noexcept = default;
Gpt2Tokenizer& Gpt2Tokenizer::operator=(Gpt2Tokenizer&&) noexcept = default;
Gpt2Tokenizer::~Gpt2Tokenizer() = default;

Result<Gpt2Tokenizer> Gpt2Tokenizer::load_dir(const std::string& dir) {
  return load(dir + "/encoder.json", dir + "/vocab.bpe");
}

Result<Gpt2Tokenizer> Gpt2Tokenizer::load(const std::string& encoder_json_path,
                                          const std::string& vocab_bpe_path) {
  auto impl = std::make_unique<Impl>();
  const std::array<uint32_t, 256> b2c = byte_to_codepoint();
  std::array<int, 512> c2b;
  c2b.fill(-1);
  for (int b = 0; b < 256; ++b) c2b[b2c[b]] = b;

  // encoder.json: {"token": id, ...}
  std::string text;
  RS_RETURN_IF_ERROR(read_file(encoder_json_path, text));
  nlohmann::json encoder;
  try {
    encoder = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return rankscope::corrupt(encoder_json_path + ": not JSON: " + e.what());
  }
  if (!encoder.is_object() || encoder.empty()) {
    return rankscope::corrupt(encoder_json_path + ": expected a JSON object of token -> id");
  }
  const size_t vocab = encoder.size();
  impl->id_bytes.assign(vocab, std::string());
  std::vector<bool> seen(vocab, false);
  std::unordered_map<std::string, TokenId, StringHash, std::equal_to<>> bytes_to_id;
  bytes_to_id.reserve(vocab);
  std::string bytes;
  for (const auto& [key, value] : encoder.items()) {
    if (!value.is_number_integer() || value.get<int64_t>() < 0 || value.get<int64_t>() >= int64_t(vocab)) {
      return rankscope::corrupt(encoder_json_path + ": token \"" + key + "\" has id " + value.dump() +
                                ", outside [0, " + std::to_string(vocab) + ")");
    }
    const auto id = value.get<TokenId>();
    if (seen[id]) return rankscope::corrupt(encoder_json_path + ": id " + std::to_string(id) + " used twice");
    seen[id] = true;
    if (!unicode_token_to_bytes(key, c2b, bytes)) {
      return rankscope::corrupt(encoder_json_path + ": token \"" + key + "\" is outside GPT-2's byte alphabet");
    }
    impl->id_bytes[id] = bytes;
    bytes_to_id.emplace(bytes, id);
  }
  for (int b = 0; b < 256; ++b) {
    auto it = bytes_to_id.find(std::string_view(reinterpret_cast<const char*>(&b), 1));
    if (it == bytes_to_id.end()) {
      return rankscope::corrupt(encoder_json_path + ": no token for byte " + std::to_string(b) +
                                " (a byte-level vocabulary has all 256)");
    }
    impl->byte_token[b] = it->second;
  }

  // vocab.bpe: "#version: 0.2" then "left right" per line, by rank.
  RS_RETURN_IF_ERROR(read_file(vocab_bpe_path, text));
  std::vector<std::string_view> lines;
  for (size_t pos = 0; pos < text.size();) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    std::string_view line(text.data() + pos, eol - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (!line.empty() && !(lines.empty() && line.starts_with("#version"))) lines.push_back(line);
    pos = eol + 1;
  }
  impl->merges.reserve(lines.size());
  std::string left, right;
  for (size_t rank = 0; rank < lines.size(); ++rank) {
    const std::string_view line = lines[rank];
    const size_t space = line.find(' ');
    auto bad = [&](const std::string& why) {
      return rankscope::corrupt(vocab_bpe_path + ": merge " + std::to_string(rank + 1) + " \"" +
                                std::string(line) + "\": " + why);
    };
    if (space == std::string_view::npos || space == 0 || space + 1 >= line.size() ||
        line.find(' ', space + 1) != std::string_view::npos) {
      return bad("expected two tokens separated by one space");
    }
    if (!unicode_token_to_bytes(line.substr(0, space), c2b, left) ||
        !unicode_token_to_bytes(line.substr(space + 1), c2b, right)) {
      return bad("outside GPT-2's byte alphabet");
    }
    auto l = bytes_to_id.find(left), r = bytes_to_id.find(right), m = bytes_to_id.find(left + right);
    if (l == bytes_to_id.end() || r == bytes_to_id.end() || m == bytes_to_id.end()) {
      return bad("a part or the merged token is not in " + encoder_json_path);
    }
    impl->merges.insert(l->second, r->second, static_cast<int32_t>(rank), m->second);
  }

  RS_RETURN_IF_ERROR(impl->compile_regex());
  return Gpt2Tokenizer(std::move(impl));
}

std::vector<TokenId> Gpt2Tokenizer::encode(std::string_view text) {
  std::vector<TokenId> out;
  out.reserve(text.size() / 3 + 1);
  impl_->encode_append(text, out);
  return out;
}

void Gpt2Tokenizer::encode_append(std::string_view text, std::vector<TokenId>& out) {
  impl_->encode_append(text, out);
}

std::vector<TokenId> Gpt2Tokenizer::encode_with_special(std::string_view text) {
  std::vector<TokenId> out;
  out.reserve(text.size() / 3 + 1);
  size_t pos = 0;
  while (true) {
    const size_t hit = text.find(kEndOfTextText, pos);
    impl_->encode_append(text.substr(pos, hit == std::string_view::npos ? std::string_view::npos : hit - pos), out);
    if (hit == std::string_view::npos) break;
    out.push_back(kEndOfText);
    pos = hit + kEndOfTextText.size();
  }
  return out;
}

Result<std::string> Gpt2Tokenizer::decode(std::span<const TokenId> ids) const {
  const auto& table = impl_->id_bytes;
  size_t total = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || static_cast<size_t>(ids[i]) >= table.size()) {
      return rankscope::invalid_argument("token " + std::to_string(i) + " is " + std::to_string(ids[i]) +
                                         ", outside the vocabulary [0, " + std::to_string(table.size()) + ")");
    }
    total += table[ids[i]].size();
  }
  std::string out;
  out.reserve(total);
  for (TokenId id : ids) out += table[id];
  return out;
}

std::string_view Gpt2Tokenizer::token_bytes(TokenId id) const {
  const auto& table = impl_->id_bytes;
  if (id < 0 || static_cast<size_t>(id) >= table.size()) return {};
  return table[id];
}

int Gpt2Tokenizer::vocab_size() const { return static_cast<int>(impl_->id_bytes.size()); }
size_t Gpt2Tokenizer::cache_size() const { return impl_->cache.size(); }
void Gpt2Tokenizer::clear_cache() {
  impl_->cache.clear();
  impl_->pool.clear();
}

}  // namespace gpt2
