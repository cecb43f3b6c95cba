// Shared by the mutation tests of the parsers of untrusted bytes (tests/io, tests/server,
// tests/tokenizer): the case count and structural edits of a JSON document.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

namespace rlt::mutation {

// `fallback` cases, or RLT_MUTATION_CASES when set (to scale a run up or down).
inline int cases(int fallback) {
  const char* env = std::getenv("RLT_MUTATION_CASES");
  return env ? std::max(1, std::atoi(env)) : fallback;
}

// Every path into `j`, the root included.
template <typename Json>
void collect_paths(const Json& j, typename Json::json_pointer at, std::vector<typename Json::json_pointer>& out) {
  out.push_back(at);
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) collect_paths(v, at / k, out);
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) collect_paths(j[i], at / i, out);
  }
}

// Parses `text`, changes one value (replaced by `odd_value(rng)`, deleted, or its key written
// twice, first with another value: JSON keeps the last) and writes it back.
template <typename Json, typename OddValue>
std::string mutate_structure(const std::string& text, std::mt19937_64& rng, OddValue odd_value) {
  using Pointer = typename Json::json_pointer;
  Json j = Json::parse(text);
  std::vector<Pointer> paths;
  collect_paths(j, Pointer(), paths);
  const Pointer at = paths[rng() % paths.size()];
  if (at.empty()) return odd_value(rng).dump();
  const Pointer parent = at.parent_pointer();
  switch (rng() % 4) {
    case 0:
    case 1:
      j[at] = odd_value(rng);
      return j.dump();
    case 2:  // deleted
      if (j[parent].is_object()) {
        j[parent].erase(at.back());
      } else {
        j[parent].erase(static_cast<size_t>(std::stoul(at.back())));
      }
      return j.dump();
    default: {
      if (!j[parent].is_object()) return j.dump();
      const std::string first = Json(at.back()).dump() + ":" + odd_value(rng).dump() + ",";
      const std::string marker = "\"@@duplicate-marker@@\"";
      Json copy = j[parent];
      j[parent] = "@@duplicate-marker@@";
      std::string out = j.dump();
      return out.replace(out.find(marker), marker.size(), "{" + first + copy.dump().substr(1));
    }
  }
}

}  // namespace rlt::mutation
