// `rlt tokenize` / `rlt detokenize`: the model's Hugging Face tokenizer, for debugging.
#include <CLI/CLI.hpp>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/model_dir.h"
#include "source/model_source.h"
#include "tokenizer/tokenizer.h"

namespace rlt::cli {
namespace {

struct TokenizeOptions {
  std::string model;
  std::string text;
  std::vector<int32_t> ids;
  bool no_special = false;    // tokenize: do not add the post-processor's special tokens
  bool skip_special = false;  // detokenize: drop special tokens from the text
};

Result<std::shared_ptr<const tok::Tokenizer>> load_tokenizer(const std::string& requested) {
  RLT_ASSIGN_OR_RETURN(std::string path, resolve_model_dir(requested));
  RLT_ASSIGN_OR_RETURN(source::ModelSource src, source::ModelSource::open(path));
  return src.tokenizer();
}

int run_tokenize(const TokenizeOptions& opt) {
  auto t = load_tokenizer(opt.model);
  if (!t.ok()) return report_error(t.status());
  auto ids = (*t)->encode(opt.text, !opt.no_special);
  if (!ids.ok()) return report_error(ids.status());
  nlohmann::ordered_json out;
  out["ids"] = *ids;
  std::vector<std::string> tokens;
  for (int32_t id : *ids) tokens.push_back((*t)->id_to_token(id).value_or(""));
  out["tokens"] = tokens;
  std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  return 0;
}

int run_detokenize(const TokenizeOptions& opt) {
  auto t = load_tokenizer(opt.model);
  if (!t.ok()) return report_error(t.status());
  auto text = (*t)->decode(opt.ids, opt.skip_special);
  if (!text.ok()) return report_error(text.status());
  std::cout << nlohmann::ordered_json{{"text", *text}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
            << "\n";
  return 0;
}

}  // namespace

void add_tokenize_commands(CLI::App& app, int* exit_code) {
  auto opt = std::make_shared<TokenizeOptions>();
  CLI::App* enc = app.add_subcommand("tokenize", "Token ids of a text with the model's tokenizer (JSON)");
  enc->add_option("--model", opt->model, kModelFlagHelp);
  enc->add_option("--text", opt->text, "Text to encode")->required();
  enc->add_flag("--no-special", opt->no_special, "Do not add the tokenizer's BOS/EOS special tokens");
  enc->callback([opt, exit_code] { *exit_code = run_tokenize(*opt); });
  CLI::App* dec = app.add_subcommand("detokenize", "Text of token ids with the model's tokenizer (JSON)");
  dec->add_option("--model", opt->model, kModelFlagHelp);
  dec->add_option("--ids", opt->ids, "Token ids, comma separated")->delimiter(',')->required();
  dec->add_flag("--skip-special", opt->skip_special, "Drop special tokens from the text");
  dec->callback([opt, exit_code] { *exit_code = run_detokenize(*opt); });
}

}  // namespace rlt::cli
