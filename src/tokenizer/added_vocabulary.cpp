#include "tokenizer/added_vocabulary.h"

#include <algorithm>

#include "common/utf8.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/unicode.h"

namespace rlt::tok {

// Byte trie answering "longest token starting here", scanned left to right: the same matches as
// the leftmost-longest Aho-Corasick automaton HF builds.
struct AddedVocabulary::Trie {
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> children;
    int32_t id = -1;  // token id ending at this node (first registered wins)
  };
  std::vector<Node> nodes{Node{}};
  bool first_byte[256] = {};

  void insert(std::string_view s, int32_t id) {
    int32_t n = 0;
    for (char ch : s) {
      const auto c = static_cast<uint8_t>(ch);
      int32_t child = -1;
      for (const auto& [b, idx] : nodes[n].children) {
        if (b == c) child = idx;
      }
      if (child < 0) {
        child = static_cast<int32_t>(nodes.size());
        nodes[n].children.push_back({c, child});
        nodes.push_back(Node{});
      }
      n = child;
    }
    if (nodes[n].id < 0) nodes[n].id = id;
    first_byte[static_cast<uint8_t>(s[0])] = true;
  }

  // Longest match starting at `pos`: returns its length (0 = none) and id.
  size_t longest_at(std::string_view text, size_t pos, int32_t& id) const {
    int32_t n = 0;
    size_t best = 0;
    for (size_t i = pos; i < text.size(); ++i) {
      const auto c = static_cast<uint8_t>(text[i]);
      int32_t child = -1;
      for (const auto& [b, idx] : nodes[n].children) {
        if (b == c) {
          child = idx;
          break;
        }
      }
      if (child < 0) break;
      n = child;
      if (nodes[n].id >= 0) {
        best = i + 1 - pos;
        id = nodes[n].id;
      }
    }
    return best;
  }

  bool empty() const { return nodes[0].children.empty(); }
};

namespace {

char32_t first_cp(std::string_view s) {
  char32_t cp = 0;
  utf8::decode(s, 0, cp);
  return cp;
}

// Start of the run of White_Space characters that ends `s`.
size_t trailing_space_start(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    size_t start = end - 1;
    while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    char32_t cp = 0;
    utf8::decode(s, start, cp);
    if (!unicode::is_whitespace(cp)) break;
    end = start;
  }
  return end;
}

// Length of the run of White_Space characters that starts `s`.
size_t leading_space_len(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    char32_t cp = 0;
    const size_t n = utf8::decode(s, i, cp);
    if (!unicode::is_whitespace(cp)) break;
    i += n;
  }
  return i;
}

}  // namespace

Result<AddedVocabulary> AddedVocabulary::build(const std::vector<AddedToken>& tokens,
                                               const BpeModel& model,
                                               const Normalizer* normalizer) {
  AddedVocabulary v;
  std::vector<AddedToken> specials;  // HF's special_tokens list
  std::vector<AddedToken> classics;  // HF's added_tokens list
  std::unordered_map<int32_t, AddedToken> by_id;
  // HF skips a token equal (content and every flag) to one already registered.
  std::unordered_set<std::string> seen;
  auto signature = [](const AddedToken& t) {
    std::string sig = t.content;
    sig += static_cast<char>('0' + (t.special | t.lstrip << 1 | t.rstrip << 2));
    sig += static_cast<char>('0' + (t.single_word | t.normalized << 1));
    return sig;
  };
  const auto model_size = static_cast<int32_t>(model.vocab_size());
  int32_t max_added_id = -1;
  for (const AddedToken& t : tokens) {
    if (t.content.empty()) continue;
    if (t.special && v.special_contents_.insert(t.content).second) specials.push_back(t);
    if (!seen.insert(signature(t)).second) continue;
    int32_t id = -1;
    if (auto it = v.content_to_id_.find(t.content); it != v.content_to_id_.end()) {
      id = it->second;
    } else if (auto mid = model.token_to_id(t.content)) {
      id = *mid;
    } else if (v.content_to_id_.empty()) {
      id = model_size;
    } else {
      id = (max_added_id >= model_size || model_size == 0) ? max_added_id + 1 : model_size;
    }
    max_added_id = std::max(max_added_id, id);
    v.content_to_id_[t.content] = id;
    AddedToken stored = t;
    stored.id = id;
    by_id[id] = stored;
    if (!v.special_contents_.count(t.content)) classics.push_back(stored);
  }
  for (const auto& [id, t] : by_id) {
    v.id_to_index_[id] = v.tokens_.size();
    v.tokens_.push_back(t);
  }
  std::sort(v.tokens_.begin(), v.tokens_.end(),
            [](const AddedToken& a, const AddedToken& b) { return a.id < b.id; });
  for (size_t i = 0; i < v.tokens_.size(); ++i) v.id_to_index_[v.tokens_[i].id] = i;

  auto raw = std::make_shared<Trie>();
  auto norm = std::make_shared<Trie>();
  std::string text;
  std::string scratch;
  auto add_to_trie = [&](const AddedToken& t) {
    const int32_t id = v.content_to_id_.at(t.content);
    if (!t.normalized) {
      raw->insert(t.content, id);
      return;
    }
    text = t.content;
    if (normalizer != nullptr) normalizer->normalize(text, scratch);
    if (!text.empty()) norm->insert(text, id);
  };
  for (const AddedToken& t : specials) add_to_trie(t);
  for (const AddedToken& t : classics) add_to_trie(t);
  v.raw_trie_ = std::move(raw);
  v.normalized_trie_ = std::move(norm);
  return v;
}

bool AddedVocabulary::has_tokens(Pass pass) const {
  return !(pass == Pass::kRaw ? raw_trie_ : normalized_trie_)->empty();
}

void AddedVocabulary::split(std::string_view text, Pass pass, std::vector<Segment>& out) const {
  const Trie& trie = pass == Pass::kRaw ? *raw_trie_ : *normalized_trie_;
  if (text.empty()) {
    out.push_back({0, 0, -1});
    return;
  }
  size_t start_offset = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    if (!trie.first_byte[static_cast<uint8_t>(text[pos])]) {
      ++pos;
      continue;
    }
    int32_t id = -1;
    const size_t len = trie.longest_at(text, pos, id);
    if (len == 0) {
      ++pos;
      continue;
    }
    size_t start = pos;
    size_t stop = pos + len;
    pos = stop;  // the automaton resumes after the raw match, whatever the flags do
    const AddedToken& tok = tokens_[id_to_index_.at(id)];
    if (tok.single_word) {
      const bool start_space =
          start == 0 || !unicode::is_word_char(utf8::last_code_point(text.substr(0, start)));
      const bool stop_space =
          stop == text.size() || !unicode::is_word_char(first_cp(text.substr(stop)));
      if (!start_space || !stop_space) continue;
    }
    if (tok.lstrip) start = std::max(trailing_space_start(text.substr(0, start)), start_offset);
    if (tok.rstrip) stop += leading_space_len(text.substr(stop));
    if (start_offset < start) out.push_back({start_offset, start, -1});
    out.push_back({start, stop, id});
    start_offset = stop;
  }
  if (start_offset != text.size()) out.push_back({start_offset, text.size(), -1});
}

std::optional<int32_t> AddedVocabulary::token_to_id(std::string_view content) const {
  auto it = content_to_id_.find(std::string(content));
  if (it == content_to_id_.end()) return std::nullopt;
  return it->second;
}

const AddedToken* AddedVocabulary::by_id(int32_t id) const {
  auto it = id_to_index_.find(id);
  return it == id_to_index_.end() ? nullptr : &tokens_[it->second];
}

bool AddedVocabulary::is_special_content(std::string_view content) const {
  return special_contents_.count(std::string(content)) > 0;
}

}  // namespace rlt::tok
