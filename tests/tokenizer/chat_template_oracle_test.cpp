// Chat templates render exactly what Python jinja2 renders under transformers'
// apply_chat_template, for real templates (shared fixtures) and templates in the ChatML,
// Ouro-Thinking, Qwen2.5-with-tools, Mistral and Llama-2 styles, over generated multi-turn
// conversations; templates and conversations that make jinja2 fail make rlt fail too.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "oracle_support.h"
#include "tokenizer/chat_template.h"

namespace rlt::tok {
namespace {

using OJson = nlohmann::ordered_json;

// Where two renders first differ, with some context.
std::string diff(const std::string& want, const std::string& got) {
  size_t i = 0;
  while (i < want.size() && i < got.size() && want[i] == got[i]) ++i;
  const size_t from = i > 40 ? i - 40 : 0;
  return "first difference at byte " + std::to_string(i) + "\n  want \"" +
         testing::escape(want.substr(from, 120)) + "\"\n  got  \"" +
         testing::escape(got.substr(from, 120)) + "\"";
}

TEST(ChatTemplateOracle, RendersLikeJinja2) {
  if (!testing::venv_python()) {
    GTEST_SKIP() << "no " << testing::source_dir() << "/.venv: run scripts/setup.sh";
  }
  const std::string fixtures = testing::fixtures_dir() + "/tokenizers";
  const bool have_fixtures = testing::path_exists(fixtures);
  if (!have_fixtures) {
    std::cout << "[ note ] shared fixtures not found at " << fixtures
              << ": only the templates written by the oracle are tested\n";
  }
  const std::string workdir = testing::make_workdir("chat_oracle");
  std::string out;
  ASSERT_EQ(testing::run_python("tokenizer_oracle_chat.py",
                                "--workdir '" + workdir + "' --fixtures '" + fixtures + "'", out),
            0)
      << out;
  const auto cases = testing::read_jsonl(workdir + "/cases.jsonl");
  // The oracle's own templates give 864 cases; the shared fixtures' real templates add more.
  ASSERT_GT(cases.size(), have_fixtures ? 1000u : 800u);

  std::map<std::string, Result<ChatTemplate>> loaded;
  std::map<std::string, int> rendered_per_config;
  int mismatches = 0;
  std::string examples;
  for (const auto& c : cases) {
    const std::string file = c["config"].get<std::string>();
    const std::string name = c["name"].get<std::string>();
    const std::string key = file + "#" + name;
    auto it = loaded.find(key);
    if (it == loaded.end()) {
      it = loaded.emplace(key, ChatTemplate::from_tokenizer_config(workdir + "/" + file, name))
               .first;
    }
    // ordered_json keeps the key order Python saw (tojson prints it).
    const OJson& messages = c["messages"];
    const OJson& extra = c["extra"];
    const bool gen = c["add_generation_prompt"].get<bool>();
    Result<std::string> got = it->second.ok() ? it->second->render(messages, gen, extra)
                                              : Result<std::string>(it->second.status());
    std::string problem;
    if (c.contains("error")) {
      if (got.ok())
        problem = "jinja2 fails (" + c["error"].get<std::string>() + ") but rlt renders";
      // raise_exception messages must come through verbatim.
      const std::string err = c["error"].get<std::string>();
      const std::string prefix = "TemplateError: ";
      if (!got.ok() && err.rfind(prefix, 0) == 0 &&
          got.status().message().find(err.substr(prefix.size())) == std::string::npos) {
        problem = "error message lacks the template's text: " + got.status().to_string();
      }
    } else if (!got.ok()) {
      problem = "rlt fails: " + got.status().to_string();
    } else if (*got != c["expected"].get<std::string>()) {
      problem = diff(c["expected"].get<std::string>(), *got);
    } else {
      ++rendered_per_config[file];
    }
    if (!problem.empty() && ++mismatches <= 5) {
      examples += key + " (add_generation_prompt=" + (gen ? "true" : "false") + "): " + problem +
                  "\n  messages " + testing::escape(c["messages"].dump()) + "\n";
    }
  }
  if (mismatches == 0) std::filesystem::remove_all(workdir);
  EXPECT_EQ(mismatches, 0) << "(cases kept in " << workdir << ")\n"
                           << mismatches << " of " << cases.size() << " cases differ:\n"
                           << examples;
  for (const char* must : {"chatml_smollm2", "ouro_thinking", "qwen25_tools", "mistral",
                           "llama2_style", "named_templates", "kitchen_sink"}) {
    EXPECT_GE(rendered_per_config[std::string(must) + ".tokenizer_config.json"], 50) << must;
  }
  if (testing::path_exists(fixtures)) {
    for (const char* must : {"ouro-1.4b", "llama3", "qwen3"}) {
      EXPECT_GE(rendered_per_config[std::string(must) + ".tokenizer_config.json"], 50) << must;
    }
  }
}

}  // namespace
}  // namespace rlt::tok
