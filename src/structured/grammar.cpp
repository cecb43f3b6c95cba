#include "structured/grammar.h"

#include <fmt/format.h>

namespace rlt::structured {

namespace {

// Kosaraju's algorithm with explicit stacks (grammars may have thousands of rules): the component
// id of every node of `graph` (edges: node -> Call::callee).
template <typename Edge>
std::vector<uint32_t> scc_of(const std::vector<std::vector<Edge>>& graph) {
  const size_t n = graph.size();
  std::vector<std::vector<uint32_t>> reverse(n);
  for (size_t u = 0; u < n; ++u) {
    for (const Edge& e : graph[u]) reverse[e.callee].push_back(static_cast<uint32_t>(u));
  }
  std::vector<uint32_t> order;
  std::vector<bool> seen(n, false);
  std::vector<std::pair<uint32_t, size_t>> stack;
  for (uint32_t s = 0; s < n; ++s) {
    if (seen[s]) continue;
    seen[s] = true;
    stack.push_back({s, 0});
    while (!stack.empty()) {
      auto& [u, i] = stack.back();
      if (i < graph[u].size()) {
        const uint32_t v = graph[u][i++].callee;
        if (!seen[v]) {
          seen[v] = true;
          stack.push_back({v, 0});
        }
      } else {
        order.push_back(u);
        stack.pop_back();
      }
    }
  }
  std::vector<uint32_t> component(n, UINT32_MAX);
  uint32_t next = 0;
  std::vector<uint32_t> todo;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    if (component[*it] != UINT32_MAX) continue;
    todo.push_back(*it);
    component[*it] = next;
    while (!todo.empty()) {
      const uint32_t u = todo.back();
      todo.pop_back();
      for (uint32_t v : reverse[u]) {
        if (component[v] == UINT32_MAX) {
          component[v] = next;
          todo.push_back(v);
        }
      }
    }
    ++next;
  }
  return component;
}

}  // namespace

uint32_t GrammarBuilder::rule(const std::string& name) {
  if (auto it = named_.find(name); it != named_.end()) return it->second;
  const auto id = static_cast<uint32_t>(names_.size());
  named_.emplace(name, id);
  names_.push_back(name);
  alternatives_.emplace_back();
  return id;
}

uint32_t GrammarBuilder::fresh_rule(const std::string& base) {
  names_.push_back(fmt::format("{}@{}", base, names_.size()));
  alternatives_.emplace_back();
  return static_cast<uint32_t>(names_.size() - 1);
}

void GrammarBuilder::add_alternative(uint32_t rule, const std::vector<Element>& sequence) {
  alternatives_[rule].push_back(sequence);
}

Element GrammarBuilder::bytes(const ByteSet& set) {
  auto [it, inserted] = byte_set_ids_.emplace(set.bits, static_cast<uint32_t>(byte_sets_.size()));
  if (inserted) byte_sets_.push_back(set);
  return {Element::Kind::kBytes, it->second};
}

Result<Grammar> GrammarBuilder::finish(uint32_t root) {
  const size_t n = names_.size();
  for (size_t r = 0; r < n; ++r) {
    if (alternatives_[r].empty()) {
      return invalid_argument(
          fmt::format("grammar rule '{}' is used but never defined", names_[r]));
    }
  }
  // Nullable rules (can match the empty string), by fixpoint.
  std::vector<bool> nullable(n, false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r) {
      if (nullable[r]) continue;
      for (const auto& alt : alternatives_[r]) {
        bool all = true;
        for (const Element& e : alt) {
          if (e.kind == Element::Kind::kBytes || !nullable[e.value]) {
            all = false;
            break;
          }
        }
        if (all) {
          nullable[r] = changed = true;
          break;
        }
      }
    }
  }
  // Rules each rule may call before consuming a byte. A cycle of such calls is left recursion,
  // which the matcher cannot follow — unless every call in it is a tail call (`star ::= x star`
  // with x nullable): then it only adds empty iterations, which the matcher's per-round dedup
  // folds away. So: refuse a cycle holding a call with something after it.
  struct Call {
    uint32_t callee;
    bool tail;
  };
  std::vector<std::vector<Call>> leftmost(n);
  for (size_t r = 0; r < n; ++r) {
    for (const auto& alt : alternatives_[r]) {
      for (size_t i = 0; i < alt.size(); ++i) {
        const Element& e = alt[i];
        if (e.kind == Element::Kind::kBytes) break;
        leftmost[r].push_back({e.value, i + 1 == alt.size()});
        if (!nullable[e.value]) break;
      }
    }
  }
  const std::vector<uint32_t> component = scc_of(leftmost);
  for (uint32_t r = 0; r < n; ++r) {
    for (const Call& c : leftmost[r]) {
      if (!c.tail && component[c.callee] == component[r]) {
        return invalid_argument(fmt::format(
            "grammar rule '{}' is left-recursive (it can reach itself through '{}' before matching "
            "any "
            "character); rewrite it with repetition, e.g. `list ::= item (\",\" item)*`",
            names_[c.callee], names_[r]));
      }
    }
  }

  Grammar g;
  g.byte_sets = byte_sets_;
  g.rule_names = names_;
  g.root = root;
  g.alternatives.resize(n);
  for (size_t r = 0; r < n; ++r) {
    for (const auto& alt : alternatives_[r]) {
      g.alternatives[r].push_back(static_cast<uint32_t>(g.elements.size()));
      g.elements.insert(g.elements.end(), alt.begin(), alt.end());
      g.elements.push_back({Element::Kind::kEnd, 0});
    }
  }
  return g;
}

namespace {

std::string byte_set_text(const ByteSet& s) {
  std::string out = "[";
  for (int b = 0; b < 256;) {
    if (!s.test(static_cast<uint8_t>(b))) {
      ++b;
      continue;
    }
    int e = b;
    while (e + 1 < 256 && s.test(static_cast<uint8_t>(e + 1))) ++e;
    const auto one = [](int c) {
      return (c >= 0x21 && c < 0x7f && c != ']' && c != '\\' && c != '-' && c != '^')
                 ? std::string(1, static_cast<char>(c))
                 : fmt::format("\\x{:02X}", c);
    };
    out += one(b);
    if (e > b) {
      out += '-';
      out += one(e);
    }
    b = e + 1;
  }
  return out + "]";
}

}  // namespace

std::string Grammar::to_string() const {
  std::string out;
  for (size_t r = 0; r < alternatives.size(); ++r) {
    out += rule_names[r] + " ::=";
    for (size_t a = 0; a < alternatives[r].size(); ++a) {
      if (a > 0) out += " |";
      for (uint32_t p = alternatives[r][a]; elements[p].kind != Element::Kind::kEnd; ++p) {
        const Element& e = elements[p];
        out += ' ';
        out += e.kind == Element::Kind::kBytes ? byte_set_text(byte_sets[e.value])
                                               : rule_names[e.value];
      }
      if (elements[alternatives[r][a]].kind == Element::Kind::kEnd) out += " \"\"";
    }
    out += "\n";
  }
  return out;
}

}  // namespace rlt::structured
