#include "tokenizer/bpe_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

#include "common/utf8.h"

namespace rlt::tok {
namespace {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using StringMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

// Open-addressing map from a token-id pair to (rank, merged id): the hot lookup of the merge
// loop, kept flat so a probe touches one cache line.
class MergeMap {
 public:
  struct Value {
    uint32_t rank;
    int32_t new_id;
  };

  void build(const std::vector<std::pair<uint64_t, Value>>& entries) {
    size_t cap = 16;
    int bits = 4;
    while (cap < entries.size() * 2) {
      cap <<= 1;
      ++bits;
    }
    mask_ = cap - 1;
    shift_ = 64 - bits;
    slots_.assign(cap, Slot{kEmpty, {}});
    for (const auto& [key, value] : entries) {
      // Later duplicates overwrite earlier ones, like collecting into a Rust HashMap.
      size_t i = hash(key) & mask_;
      while (slots_[i].key != kEmpty && slots_[i].key != key) i = (i + 1) & mask_;
      slots_[i] = {key, value};
    }
  }

  const Value* find(int32_t a, int32_t b) const {
    const uint64_t key = pack(a, b);
    size_t i = hash(key) & mask_;
    while (true) {
      const Slot& s = slots_[i];
      if (s.key == key) return &s.value;
      if (s.key == kEmpty) return nullptr;
      i = (i + 1) & mask_;
    }
  }

  static uint64_t pack(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }

 private:
  static constexpr uint64_t kEmpty = ~0ull;
  struct Slot {
    uint64_t key;
    Value value;
  };
  // Fibonacci hashing: the top bits of the product mix every bit of both ids.
  size_t hash(uint64_t k) const {
    return static_cast<size_t>((k * 0x9E3779B97F4A7C15ull) >> shift_);
  }
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  int shift_ = 60;
};

// Results for recently seen words. Encoding is deterministic, so the cache never changes ids,
// only skips repeated merge work. Bounded: once full, new words are no longer inserted.
class WordCache {
 public:
  static constexpr size_t kCapacity = 1 << 17;
  static constexpr size_t kMaxWordBytes = 256;  // HF does not cache longer words either

  bool lookup(std::string_view word, std::vector<int32_t>& out) const {
    std::shared_lock lock(mu_);
    auto it = map_.find(word);
    if (it == map_.end()) return false;
    out.insert(out.end(), it->second.begin(), it->second.end());
    return true;
  }

  void insert(std::string_view word, const int32_t* ids, size_t n) {
    if (word.size() >= kMaxWordBytes) return;
    std::unique_lock lock(mu_);
    if (map_.size() >= kCapacity) return;
    map_.try_emplace(std::string(word), ids, ids + n);
  }

 private:
  mutable std::shared_mutex mu_;
  std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> map_;
};

struct Symbol {
  int32_t id;
  int32_t prev;
  int32_t next;
  uint32_t len;  // 0 = merged away
};

struct QueueEntry {
  uint32_t rank;
  uint32_t pos;
  int32_t new_id;
  // Min-heap on (rank, pos) via std::*_heap, which build max-heaps.
  bool operator<(const QueueEntry& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
};

}  // namespace

struct BpeModel::Impl {
  StringMap vocab;
  std::vector<const std::string*> id_to_token;  // into vocab's keys
  MergeMap merges;
  std::optional<std::string> unk_token;
  std::optional<int32_t> unk_id;
  std::string prefix;  // continuing_subword_prefix ("" = none)
  std::string suffix;  // end_of_word_suffix ("" = none)
  bool fuse_unk = false;
  bool byte_fallback = false;
  bool ignore_merges = false;
  // Id of each single-code-point token below U+10000 (-1 = none), valid when prefix and suffix
  // are empty: the common case where the first lookup of every character is a table read.
  std::vector<int32_t> bmp_ids;
  int32_t byte_ids[256];  // "<0xXX>" tokens for byte_fallback (-1 = missing)
  mutable WordCache cache;

  int32_t lookup(std::string_view s) const {
    auto it = vocab.find(s);
    return it == vocab.end() ? -1 : it->second;
  }

  bool merge_word(std::string_view w, std::vector<int32_t>& out) const;
};

BpeModel::BpeModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
BpeModel::~BpeModel() = default;

Result<std::unique_ptr<BpeModel>> BpeModel::create(BpeConfig config) {
  auto impl = std::make_unique<Impl>();
  impl->vocab.reserve(config.vocab.size());
  int32_t max_id = -1;
  for (auto& [token, id] : config.vocab) {
    if (id < 0)
      return invalid_argument(fmt::format("vocab entry '{}' has negative id {}", token, id));
    max_id = std::max(max_id, id);
    impl->vocab.insert_or_assign(std::move(token), id);
  }
  // Ids index a dense table; real vocabularies are dense, so refuse wildly sparse ones rather
  // than allocate gigabytes for a malformed file.
  if (static_cast<size_t>(max_id) > 16 * impl->vocab.size() + 65536) {
    return invalid_argument(fmt::format("vocab ids are too sparse: {} entries, largest id {}",
                                        impl->vocab.size(), max_id));
  }
  impl->id_to_token.assign(static_cast<size_t>(max_id + 1), nullptr);
  for (const auto& [token, id] : impl->vocab) {
    if (impl->id_to_token[id] == nullptr) impl->id_to_token[id] = &token;
  }
  impl->prefix = config.continuing_subword_prefix.value_or("");
  impl->suffix = config.end_of_word_suffix.value_or("");

  std::vector<std::pair<uint64_t, MergeMap::Value>> entries;
  entries.reserve(config.merges.size());
  std::string merged;
  for (size_t rank = 0; rank < config.merges.size(); ++rank) {
    const auto& [a, b] = config.merges[rank];
    const int32_t a_id = impl->lookup(a);
    if (a_id < 0) {
      return invalid_argument(
          fmt::format("merge {} ('{} {}'): token '{}' is not in the vocabulary", rank, a, b, a));
    }
    const int32_t b_id = impl->lookup(b);
    if (b_id < 0) {
      return invalid_argument(
          fmt::format("merge {} ('{} {}'): token '{}' is not in the vocabulary", rank, a, b, b));
    }
    // HF drops the continuing-subword prefix's length from the right part unconditionally.
    if (b.size() < impl->prefix.size()) {
      return invalid_argument(fmt::format(
          "merge {} ('{} {}'): right part shorter than continuing_subword_prefix", rank, a, b));
    }
    merged.assign(a);
    merged.append(b, impl->prefix.size());
    const int32_t new_id = impl->lookup(merged);
    if (new_id < 0) {
      return invalid_argument(fmt::format(
          "merge {} ('{} {}'): merged token '{}' is not in the vocabulary", rank, a, b, merged));
    }
    entries.push_back({MergeMap::pack(a_id, b_id), {static_cast<uint32_t>(rank), new_id}});
  }
  impl->merges.build(entries);

  impl->unk_token = std::move(config.unk_token);
  if (impl->unk_token) {
    const int32_t id = impl->lookup(*impl->unk_token);
    if (id >= 0) impl->unk_id = id;
  }
  impl->fuse_unk = config.fuse_unk;
  impl->byte_fallback = config.byte_fallback;
  impl->ignore_merges = config.ignore_merges;
  for (int b = 0; b < 256; ++b) impl->byte_ids[b] = impl->lookup(fmt::format("<0x{:02X}>", b));
  if (impl->prefix.empty() && impl->suffix.empty()) {
    impl->bmp_ids.assign(0x10000, -1);
    for (const auto& [token, id] : impl->vocab) {
      if (token.empty()) continue;
      char32_t cp = 0;
      const size_t n = utf8::decode(token, 0, cp);
      if (n == token.size() && cp < 0x10000) impl->bmp_ids[cp] = id;
    }
  }
  return std::unique_ptr<BpeModel>(new BpeModel(std::move(impl)));
}

bool BpeModel::Impl::merge_word(std::string_view w, std::vector<int32_t>& out) const {
  thread_local std::vector<Symbol> symbols;
  thread_local std::vector<QueueEntry> queue;
  thread_local std::string buf;
  symbols.clear();
  auto add = [&](int32_t id, uint32_t len) {
    const auto n = static_cast<int32_t>(symbols.size());
    if (n > 0) symbols.back().next = n;
    symbols.push_back({id, n - 1, -1, len});
  };

  // 1. One symbol per character (HF's merge_word), with unk / byte-fallback handling.
  bool have_unk = false;
  int32_t pending_unk_len = 0;
  size_t i = 0;
  while (i < w.size()) {
    const size_t n = utf8::seq_len(static_cast<unsigned char>(w[i]));
    const bool is_first = i == 0;
    const bool is_last = i + n >= w.size();
    std::string_view s = w.substr(i, n);
    int32_t id = -1;
    if (!bmp_ids.empty()) {
      char32_t cp = 0;
      utf8::decode(w, i, cp);
      id = cp < 0x10000 ? bmp_ids[cp] : lookup(s);
    } else {
      buf.clear();
      if (!is_first) buf.append(prefix);
      buf.append(s);
      if (is_last) buf.append(suffix);
      s = buf;
      id = lookup(s);
    }
    i += n;
    if (id >= 0) {
      if (have_unk) {
        add(*unk_id, static_cast<uint32_t>(pending_unk_len));
        have_unk = false;
      }
      add(id, static_cast<uint32_t>(n));
      continue;
    }
    if (byte_fallback) {
      bool all = true;
      for (char c : s) all = all && byte_ids[static_cast<uint8_t>(c)] >= 0;
      if (all) {
        // Like HF, a pending unk is not flushed here: it lands after these byte tokens.
        for (char c : s) add(byte_ids[static_cast<uint8_t>(c)], 1);
        continue;
      }
    }
    if (unk_token) {
      if (!unk_id) return false;
      if (have_unk && fuse_unk) {
        pending_unk_len += static_cast<int32_t>(n);
      } else {
        if (have_unk) add(*unk_id, static_cast<uint32_t>(pending_unk_len));
        have_unk = true;
        pending_unk_len = static_cast<int32_t>(n);
      }
    }
    // Without an unk token the character is dropped (HF's behavior; SmolLM2 relies on it).
  }
  if (have_unk) add(*unk_id, static_cast<uint32_t>(pending_unk_len));

  // 2. Merge lowest (rank, position) first; stale queue entries are recognized by the pair's
  //    merged id no longer matching, exactly as HF's Word::merge_all.
  queue.clear();
  for (size_t k = 0; k + 1 < symbols.size(); ++k) {
    if (const auto* m = merges.find(symbols[k].id, symbols[k + 1].id)) {
      queue.push_back({m->rank, static_cast<uint32_t>(k), m->new_id});
    }
  }
  std::make_heap(queue.begin(), queue.end());
  while (!queue.empty()) {
    std::pop_heap(queue.begin(), queue.end());
    const QueueEntry top = queue.back();
    queue.pop_back();
    Symbol& cur = symbols[top.pos];
    if (cur.len == 0 || cur.next == -1) continue;
    const int32_t next_pos = cur.next;
    const Symbol right = symbols[next_pos];
    const auto* m = merges.find(cur.id, right.id);
    if (m == nullptr || m->new_id != top.new_id) continue;
    cur.id = top.new_id;
    cur.len += right.len;
    cur.next = right.next;
    symbols[next_pos].len = 0;
    if (right.next >= 0) symbols[right.next].prev = static_cast<int32_t>(top.pos);
    if (cur.prev >= 0) {
      if (const auto* pm = merges.find(symbols[cur.prev].id, cur.id)) {
        queue.push_back({pm->rank, static_cast<uint32_t>(cur.prev), pm->new_id});
        std::push_heap(queue.begin(), queue.end());
      }
    }
    if (cur.next >= 0) {
      if (const auto* nm = merges.find(cur.id, symbols[cur.next].id)) {
        queue.push_back({nm->rank, top.pos, nm->new_id});
        std::push_heap(queue.begin(), queue.end());
      }
    }
  }
  for (const Symbol& s : symbols) {
    if (s.len != 0) out.push_back(s.id);
  }
  return true;
}

bool BpeModel::tokenize(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return true;
  const Impl& m = *impl_;
  if (m.ignore_merges) {
    const int32_t id = m.lookup(word);
    if (id >= 0) {
      out.push_back(id);
      return true;
    }
  }
  if (m.cache.lookup(word, out)) return true;
  const size_t start = out.size();
  if (!m.merge_word(word, out)) return false;
  m.cache.insert(word, out.data() + start, out.size() - start);
  return true;
}

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const {
  const int32_t id = impl_->lookup(token);
  if (id < 0) return std::nullopt;
  return id;
}

const std::string* BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= impl_->id_to_token.size()) return nullptr;
  return impl_->id_to_token[id];
}

size_t BpeModel::vocab_size() const {
  return impl_->vocab.size();
}

const std::optional<std::string>& BpeModel::unk_token() const {
  return impl_->unk_token;
}

}  // namespace rlt::tok
