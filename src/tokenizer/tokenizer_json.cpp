// tokenizer.json -> Tokenizer::Impl. Every component type is matched by name; anything rlt does
// not implement is refused with that name rather than approximated.
#include <fmt/format.h>

#include <algorithm>

#include "tokenizer/json_fields.h"
#include "tokenizer/tokenizer_impl.h"

namespace rlt::tok {
namespace {

using json_fields::Json;
namespace jf = json_fields;

Status unsupported(std::string_view what, std::string_view type) {
  return unimplemented(fmt::format("{} type '{}' is not supported by rlt", what, type));
}

// Nested Sequences recurse; a malformed file must not exhaust the stack.
constexpr size_t kMaxNesting = 64;

Result<std::string> component_type(const Json& j, std::string_view where) {
  if (std::count(where.begin(), where.end(), '.') > static_cast<std::ptrdiff_t>(kMaxNesting)) {
    return invalid_argument(fmt::format("{}: components nested too deeply", where.substr(0, 80)));
  }
  if (!j.is_object()) {
    return invalid_argument(fmt::format("{}: expected object, got {}", where, jf::type_name(j)));
  }
  return jf::string_field(j, "type", where);
}

// {"String": "..."} or {"Regex": "..."} (Split, Replace).
Result<Regex> parse_pattern(const Json& j, std::string_view where) {
  const std::string path = fmt::format("{}.pattern", where);
  RLT_ASSIGN_OR_RETURN(const Json* p, jf::object_field(j, "pattern", where));
  if (p->contains("String")) {
    RLT_ASSIGN_OR_RETURN(std::string s, jf::string_field(*p, "String", path));
    return Regex::literal(s);
  }
  if (p->contains("Regex")) {
    RLT_ASSIGN_OR_RETURN(std::string s, jf::string_field(*p, "Regex", path));
    auto re = Regex::compile(s);
    if (!re.ok()) return re.status().with_context(path);
    return re;
  }
  return invalid_argument(
      fmt::format("{}: expected {{\"String\": ...}} or {{\"Regex\": ...}}", path));
}

Result<SplitBehavior> parse_behavior(const Json& j, std::string_view where,
                                     SplitBehavior fallback) {
  RLT_ASSIGN_OR_RETURN(auto name, jf::optional_string(j, "behavior", where));
  if (!name) return fallback;
  if (*name == "Removed") return SplitBehavior::kRemoved;
  if (*name == "Isolated") return SplitBehavior::kIsolated;
  if (*name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (*name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (*name == "Contiguous") return SplitBehavior::kContiguous;
  return invalid_argument(fmt::format("{}.behavior: unknown value '{}'", where, *name));
}

// Metaspace (pre-tokenizer and decoder): prepend_scheme, or the legacy add_prefix_space flag.
Result<PrependScheme> parse_prepend_scheme(const Json& j, std::string_view where) {
  RLT_ASSIGN_OR_RETURN(bool add_prefix_space, jf::bool_field(j, "add_prefix_space", true, where));
  RLT_ASSIGN_OR_RETURN(auto scheme, jf::optional_string(j, "prepend_scheme", where));
  if (!add_prefix_space) return PrependScheme::kNever;
  if (!scheme || *scheme == "always") return PrependScheme::kAlways;
  if (*scheme == "first") return PrependScheme::kFirst;
  if (*scheme == "never") return PrependScheme::kNever;
  return invalid_argument(fmt::format("{}.prepend_scheme: unknown value '{}'", where, *scheme));
}

template <typename T, typename F>
Result<std::vector<T>> parse_list(const Json& j, std::string_view key, std::string_view where,
                                  F&& parse_one) {
  RLT_ASSIGN_OR_RETURN(const Json* list, jf::optional_field(j, key, where));
  if (list == nullptr || !list->is_array()) {
    return invalid_argument(fmt::format("{}.{}: expected array", where, key));
  }
  std::vector<T> out;
  for (size_t i = 0; i < list->size(); ++i) {
    RLT_ASSIGN_OR_RETURN(T item, parse_one((*list)[i], fmt::format("{}.{}[{}]", where, key, i)));
    out.push_back(std::move(item));
  }
  return out;
}

Result<std::unique_ptr<Normalizer>> parse_normalizer(const Json& j, std::string_view where) {
  RLT_ASSIGN_OR_RETURN(std::string type, component_type(j, where));
  using unicode::NormalForm;
  if (type == "NFC") return normalizers::unicode_form(NormalForm::kNfc);
  if (type == "NFD") return normalizers::unicode_form(NormalForm::kNfd);
  if (type == "NFKC") return normalizers::unicode_form(NormalForm::kNfkc);
  if (type == "NFKD") return normalizers::unicode_form(NormalForm::kNfkd);
  if (type == "Lowercase") return normalizers::lowercase();
  if (type == "StripAccents") return normalizers::strip_accents();
  if (type == "Strip") {
    RLT_ASSIGN_OR_RETURN(bool left, jf::bool_field(j, "strip_left", true, where));
    RLT_ASSIGN_OR_RETURN(bool right, jf::bool_field(j, "strip_right", true, where));
    return normalizers::strip(left, right);
  }
  if (type == "Replace") {
    RLT_ASSIGN_OR_RETURN(Regex re, parse_pattern(j, where));
    RLT_ASSIGN_OR_RETURN(std::string content, jf::string_field(j, "content", where));
    return normalizers::replace(std::move(re), std::move(content));
  }
  if (type == "Prepend") {
    RLT_ASSIGN_OR_RETURN(std::string s, jf::string_field(j, "prepend", where));
    return normalizers::prepend(std::move(s));
  }
  if (type == "Append") {
    RLT_ASSIGN_OR_RETURN(std::string s, jf::string_field(j, "append", where));
    return normalizers::append(std::move(s));
  }
  if (type == "Sequence") {
    RLT_ASSIGN_OR_RETURN(auto steps, (parse_list<std::unique_ptr<Normalizer>>(
                                         j, "normalizers", where, parse_normalizer)));
    return normalizers::sequence(std::move(steps));
  }
  return unsupported("normalizer", type);
}

Result<std::unique_ptr<PreTokenizer>> parse_pre_tokenizer(const Json& j, std::string_view where) {
  RLT_ASSIGN_OR_RETURN(std::string type, component_type(j, where));
  if (type == "ByteLevel") {
    RLT_ASSIGN_OR_RETURN(bool prefix, jf::bool_field(j, "add_prefix_space", true, where));
    RLT_ASSIGN_OR_RETURN(bool use_regex, jf::bool_field(j, "use_regex", true, where));
    return pre_tokenizers::byte_level(prefix, use_regex);
  }
  if (type == "Split") {
    RLT_ASSIGN_OR_RETURN(Regex re, parse_pattern(j, where));
    RLT_ASSIGN_OR_RETURN(auto behavior, parse_behavior(j, where, SplitBehavior::kIsolated));
    if (!j.contains("behavior"))
      return invalid_argument(fmt::format("{}.behavior: missing", where));
    RLT_ASSIGN_OR_RETURN(bool invert, jf::bool_field(j, "invert", false, where));
    return pre_tokenizers::split(std::move(re), behavior, invert);
  }
  if (type == "Digits") {
    RLT_ASSIGN_OR_RETURN(bool individual, jf::bool_field(j, "individual_digits", false, where));
    return pre_tokenizers::digits(individual);
  }
  if (type == "Metaspace") {
    RLT_ASSIGN_OR_RETURN(char32_t rep, jf::char_field(j, "replacement", where));
    RLT_ASSIGN_OR_RETURN(PrependScheme scheme, parse_prepend_scheme(j, where));
    RLT_ASSIGN_OR_RETURN(bool split, jf::bool_field(j, "split", true, where));
    return pre_tokenizers::metaspace(rep, scheme, split);
  }
  if (type == "Whitespace") return pre_tokenizers::whitespace();
  if (type == "WhitespaceSplit") return pre_tokenizers::whitespace_split();
  if (type == "BertPreTokenizer") return pre_tokenizers::bert();
  if (type == "Punctuation") {
    RLT_ASSIGN_OR_RETURN(auto behavior, parse_behavior(j, where, SplitBehavior::kIsolated));
    return pre_tokenizers::punctuation(behavior);
  }
  if (type == "CharDelimiterSplit") {
    RLT_ASSIGN_OR_RETURN(char32_t delim, jf::char_field(j, "delimiter", where));
    return pre_tokenizers::char_delimiter(delim);
  }
  if (type == "Sequence") {
    RLT_ASSIGN_OR_RETURN(auto steps, (parse_list<std::unique_ptr<PreTokenizer>>(
                                         j, "pretokenizers", where, parse_pre_tokenizer)));
    return pre_tokenizers::sequence(std::move(steps));
  }
  return unsupported("pre_tokenizer", type);
}

Result<BpeConfig> parse_model(const Json& j) {
  constexpr std::string_view where = "model";
  if (!j.is_object())
    return invalid_argument(fmt::format("model: expected object, got {}", jf::type_name(j)));
  RLT_ASSIGN_OR_RETURN(auto type, jf::optional_string(j, "type", where));
  // Files written before "type" existed (the original GPT-2 tokenizer.json) are BPE.
  if (type && *type != "BPE") return unsupported("model", *type);
  if (!type && !j.contains("merges")) {
    return unimplemented("model: no \"type\" and no \"merges\"; only BPE models are supported");
  }
  BpeConfig cfg;
  if (const auto it = j.find("dropout"); it != j.end() && !it->is_null()) {
    if (!it->is_number()) return invalid_argument("model.dropout: expected number or null");
    if (it->get<double>() != 0.0) {
      return unimplemented(fmt::format(
          "model.dropout = {}: BPE dropout is random and not supported by rlt", it->get<double>()));
    }
  }
  RLT_ASSIGN_OR_RETURN(const Json* vocab, jf::object_field(j, "vocab", where));
  cfg.vocab.reserve(vocab->size());
  for (const auto& [token, id] : vocab->items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
      return invalid_argument(
          fmt::format("model.vocab[\"{}\"]: expected a non-negative integer id", token));
    }
    cfg.vocab.emplace_back(token, static_cast<int32_t>(id.get<int64_t>()));
  }
  RLT_ASSIGN_OR_RETURN(const Json* merges, jf::optional_field(j, "merges", where));
  if (merges != nullptr) {
    if (!merges->is_array()) return invalid_argument("model.merges: expected array");
    cfg.merges.reserve(merges->size());
    for (size_t i = 0; i < merges->size(); ++i) {
      const Json& m = (*merges)[i];
      if (m.is_string()) {
        const std::string& s = m.get_ref<const std::string&>();
        const size_t sp = s.find(' ');
        if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos) {
          return invalid_argument(fmt::format(
              "model.merges[{}]: \"{}\" is not two tokens separated by one space", i, s));
        }
        cfg.merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
      } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
        cfg.merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
      } else {
        return invalid_argument(fmt::format(
            "model.merges[{}]: expected \"a b\" or [\"a\", \"b\"], got {}", i, m.dump()));
      }
    }
  }
  RLT_ASSIGN_OR_RETURN(cfg.unk_token, jf::optional_string(j, "unk_token", where));
  RLT_ASSIGN_OR_RETURN(cfg.continuing_subword_prefix,
                       jf::optional_string(j, "continuing_subword_prefix", where));
  RLT_ASSIGN_OR_RETURN(cfg.end_of_word_suffix, jf::optional_string(j, "end_of_word_suffix", where));
  RLT_ASSIGN_OR_RETURN(cfg.fuse_unk, jf::bool_field(j, "fuse_unk", false, where));
  RLT_ASSIGN_OR_RETURN(cfg.byte_fallback, jf::bool_field(j, "byte_fallback", false, where));
  RLT_ASSIGN_OR_RETURN(cfg.ignore_merges, jf::bool_field(j, "ignore_merges", false, where));
  return cfg;
}

Result<std::vector<AddedToken>> parse_added_tokens(const Json& root) {
  std::vector<AddedToken> out;
  RLT_ASSIGN_OR_RETURN(const Json* list, jf::optional_field(root, "added_tokens", ""));
  if (list == nullptr) return out;
  if (!list->is_array()) return invalid_argument("added_tokens: expected array");
  for (size_t i = 0; i < list->size(); ++i) {
    const Json& t = (*list)[i];
    const std::string where = fmt::format("added_tokens[{}]", i);
    AddedToken a;
    RLT_ASSIGN_OR_RETURN(a.content, jf::string_field(t, "content", where));
    RLT_ASSIGN_OR_RETURN(int64_t id, jf::int_field(t, "id", where));
    if (id < 0 || id > INT32_MAX)
      return invalid_argument(fmt::format("{}.id: out of range", where));
    a.id = static_cast<int32_t>(id);
    RLT_ASSIGN_OR_RETURN(a.special, jf::bool_field(t, "special", false, where));
    RLT_ASSIGN_OR_RETURN(a.lstrip, jf::bool_field(t, "lstrip", false, where));
    RLT_ASSIGN_OR_RETURN(a.rstrip, jf::bool_field(t, "rstrip", false, where));
    RLT_ASSIGN_OR_RETURN(a.single_word, jf::bool_field(t, "single_word", false, where));
    RLT_ASSIGN_OR_RETURN(a.normalized, jf::bool_field(t, "normalized", !a.special, where));
    out.push_back(std::move(a));
  }
  return out;
}

// [token, id] pairs of RobertaProcessing / BertProcessing.
Result<int32_t> special_pair_id(const Json& j, std::string_view key, std::string_view where) {
  RLT_ASSIGN_OR_RETURN(const Json* f, jf::optional_field(j, key, where));
  if (f == nullptr || !f->is_array() || f->size() != 2 || !(*f)[1].is_number_integer()) {
    return invalid_argument(fmt::format("{}.{}: expected [token, id]", where, key));
  }
  return static_cast<int32_t>((*f)[1].get<int64_t>());
}

Status parse_post_processor(const Json& j, std::string_view where, PostProcessor& out) {
  RLT_ASSIGN_OR_RETURN(std::string type, component_type(j, where));
  if (type == "ByteLevel") return Status();  // offsets only
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    RLT_ASSIGN_OR_RETURN(int32_t cls, special_pair_id(j, "cls", where));
    RLT_ASSIGN_OR_RETURN(int32_t sep, special_pair_id(j, "sep", where));
    out.add_template({{false, {cls}}, {true, {}}, {false, {sep}}});
    return Status();
  }
  if (type == "TemplateProcessing") {
    RLT_ASSIGN_OR_RETURN(const Json* specials, jf::optional_field(j, "special_tokens", where));
    RLT_ASSIGN_OR_RETURN(const Json* single, jf::optional_field(j, "single", where));
    if (single == nullptr || !single->is_array()) {
      return invalid_argument(fmt::format("{}.single: expected array", where));
    }
    PostProcessor::Template t;
    for (size_t i = 0; i < single->size(); ++i) {
      const Json& item = (*single)[i];
      const std::string at = fmt::format("{}.single[{}]", where, i);
      if (item.is_object() && item.contains("Sequence")) {
        RLT_ASSIGN_OR_RETURN(std::string id,
                             jf::string_field(item["Sequence"], "id", at + ".Sequence"));
        if (id != "A") {
          return invalid_argument(
              fmt::format("{}: a single-sequence template can only use $A", at));
        }
        t.push_back({true, {}});
      } else if (item.is_object() && item.contains("SpecialToken")) {
        RLT_ASSIGN_OR_RETURN(std::string name,
                             jf::string_field(item["SpecialToken"], "id", at + ".SpecialToken"));
        if (specials == nullptr || !specials->is_object() || !specials->contains(name)) {
          return invalid_argument(
              fmt::format("{}: special token '{}' missing from special_tokens", at, name));
        }
        const Json& st = (*specials)[name];
        RLT_ASSIGN_OR_RETURN(const Json* ids, jf::optional_field(st, "ids", where));
        if (ids == nullptr || !ids->is_array()) {
          return invalid_argument(
              fmt::format("{}.special_tokens.{}.ids: expected array", where, name));
        }
        PostProcessor::Item it;
        for (const Json& id : *ids) {
          if (!id.is_number_integer()) {
            return invalid_argument(
                fmt::format("{}.special_tokens.{}.ids: expected integers", where, name));
          }
          it.ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
        }
        t.push_back(std::move(it));
      } else {
        return invalid_argument(
            fmt::format("{}: expected {{\"Sequence\"}} or {{\"SpecialToken\"}}", at));
      }
    }
    out.add_template(std::move(t));
    return Status();
  }
  if (type == "Sequence") {
    RLT_ASSIGN_OR_RETURN(const Json* list, jf::optional_field(j, "processors", where));
    if (list == nullptr || !list->is_array()) {
      return invalid_argument(fmt::format("{}.processors: expected array", where));
    }
    for (size_t i = 0; i < list->size(); ++i) {
      RLT_RETURN_IF_ERROR(
          parse_post_processor((*list)[i], fmt::format("{}.processors[{}]", where, i), out));
    }
    return Status();
  }
  return unsupported("post_processor", type);
}

Status parse_decoder(const Json& j, std::string_view where, DecoderChain& chain) {
  RLT_ASSIGN_OR_RETURN(std::string type, component_type(j, where));
  DecoderStep step;
  using Kind = DecoderStep::Kind;
  if (type == "ByteLevel") {
    step.kind = Kind::kByteLevel;
  } else if (type == "ByteFallback") {
    step.kind = Kind::kByteFallback;
  } else if (type == "Fuse") {
    step.kind = Kind::kFuse;
  } else if (type == "Metaspace") {
    step.kind = Kind::kMetaspace;
    RLT_ASSIGN_OR_RETURN(step.ch, jf::char_field(j, "replacement", where));
    RLT_ASSIGN_OR_RETURN(step.scheme, parse_prepend_scheme(j, where));
  } else if (type == "Strip") {
    step.kind = Kind::kStrip;
    RLT_ASSIGN_OR_RETURN(step.ch, jf::char_field(j, "content", where));
    RLT_ASSIGN_OR_RETURN(int64_t start, jf::int_or(j, "start", 0, where));
    RLT_ASSIGN_OR_RETURN(int64_t stop, jf::int_or(j, "stop", 0, where));
    if (start < 0 || stop < 0)
      return invalid_argument(fmt::format("{}: negative start/stop", where));
    step.start = static_cast<size_t>(start);
    step.stop = static_cast<size_t>(stop);
  } else if (type == "Replace") {
    step.kind = Kind::kReplace;
    RLT_ASSIGN_OR_RETURN(Regex re, parse_pattern(j, where));
    if (const Json& p = j["pattern"]; p.contains("String"))
      step.literal = p["String"].get<std::string>();
    step.pattern = std::move(re);
    RLT_ASSIGN_OR_RETURN(step.content, jf::string_field(j, "content", where));
  } else if (type == "Sequence") {
    RLT_ASSIGN_OR_RETURN(const Json* list, jf::optional_field(j, "decoders", where));
    if (list == nullptr || !list->is_array()) {
      return invalid_argument(fmt::format("{}.decoders: expected array", where));
    }
    for (size_t i = 0; i < list->size(); ++i) {
      RLT_RETURN_IF_ERROR(
          parse_decoder((*list)[i], fmt::format("{}.decoders[{}]", where, i), chain));
    }
    return Status();
  } else {
    return unsupported("decoder", type);
  }
  chain.steps.push_back(std::move(step));
  return Status();
}

Result<std::unique_ptr<Tokenizer::Impl>> build(const Json& root) {
  if (!root.is_object()) {
    return invalid_argument(
        fmt::format("tokenizer.json: expected an object, got {}", jf::type_name(root)));
  }
  auto impl = std::make_unique<Tokenizer::Impl>();
  if (auto it = root.find("version"); it != root.end() && it->is_string() && *it != "1.0") {
    return unimplemented(
        fmt::format("tokenizer.json version '{}' is not supported", it->get<std::string>()));
  }
  RLT_ASSIGN_OR_RETURN(const Json* model, jf::optional_field(root, "model", ""));
  if (model == nullptr) return invalid_argument("model: missing");
  RLT_ASSIGN_OR_RETURN(BpeConfig cfg, parse_model(*model));
  auto bpe = BpeModel::create(std::move(cfg));
  if (!bpe.ok()) return bpe.status().with_context("model");
  impl->model = std::move(bpe).value();

  RLT_ASSIGN_OR_RETURN(const Json* norm, jf::optional_field(root, "normalizer", ""));
  if (norm != nullptr) {
    RLT_ASSIGN_OR_RETURN(impl->normalizer, parse_normalizer(*norm, "normalizer"));
  }
  RLT_ASSIGN_OR_RETURN(const Json* pre, jf::optional_field(root, "pre_tokenizer", ""));
  if (pre != nullptr) {
    RLT_ASSIGN_OR_RETURN(impl->pre_tokenizer, parse_pre_tokenizer(*pre, "pre_tokenizer"));
  }
  RLT_ASSIGN_OR_RETURN(const Json* post, jf::optional_field(root, "post_processor", ""));
  if (post != nullptr) {
    RLT_RETURN_IF_ERROR(parse_post_processor(*post, "post_processor", impl->post_processor));
  }
  RLT_ASSIGN_OR_RETURN(const Json* dec, jf::optional_field(root, "decoder", ""));
  if (dec != nullptr) {
    impl->decoder.present = true;
    RLT_RETURN_IF_ERROR(parse_decoder(*dec, "decoder", impl->decoder));
  }
  RLT_ASSIGN_OR_RETURN(auto added_tokens, parse_added_tokens(root));
  RLT_ASSIGN_OR_RETURN(impl->added,
                       AddedVocabulary::build(added_tokens, *impl->model, impl->normalizer.get()));
  return impl;
}

}  // namespace

Result<std::unique_ptr<Tokenizer::Impl>> load_tokenizer_json(std::string_view json_text) {
  Json root;
  try {
    root = Json::parse(json_text);
  } catch (const Json::exception& e) {  // parse_error, and out_of_range for numbers like 1e400
    return invalid_argument(fmt::format("tokenizer.json is not valid JSON: {}", e.what()));
  }
  try {
    return build(root);
  } catch (const Json::exception& e) {
    // build() checks types before reading; this is a safety net so bad input never aborts.
    return invalid_argument(fmt::format("tokenizer.json has an unexpected shape: {}", e.what()));
  }
}

}  // namespace rlt::tok
