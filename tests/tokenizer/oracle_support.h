// Shared helpers of the tokenizer oracle tests: locating the Python venv and the shared
// fixtures, running an oracle script, reading its JSONL output.
#pragma once

#include <nlohmann/json.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace rlt::tok {
class Tokenizer;
}

namespace rlt::tok::testing {

std::string source_dir();
// ${RLT_SOURCE_DIR}/../shared/fixtures (may not exist).
std::string fixtures_dir();
bool path_exists(const std::string& path);
// The venv interpreter, or nullopt when scripts/setup.sh has not been run.
std::optional<std::string> venv_python();
// A fresh directory under the test temp dir.
std::string make_workdir(const std::string& name);
// Runs `python tools/<script> <args>`; returns the exit status and fills `output` with
// stdout+stderr.
int run_python(const std::string& script, const std::string& args, std::string& output);
std::vector<nlohmann::ordered_json> read_jsonl(const std::string& path);
std::string read_file(const std::string& path);
std::string from_hex(const std::string& hex);
// Printable form of arbitrary bytes for failure messages.
std::string escape(const std::string& s);
std::string ids_to_string(const std::vector<int32_t>& ids);

// Runs tools/tokenizer_oracle.py for `spec` ("file:PATH", "train:KIND", ...) writing `count`
// cases into `workdir`; false (with HF's reason) when HF refused the tokenizer.
bool run_oracle(const std::string& spec, const std::string& workdir, std::string& hf_error, int count);
// Checks a tokenizer (by default workdir/tokenizer.json as rlt loads it) against the oracle's
// cases: encode with and without special tokens, decode with and without skipping them, and the
// streaming detokenizer.
void compare_with_oracle(const std::string& workdir, int count);
void compare_with_oracle(const std::string& workdir, int count, std::shared_ptr<const Tokenizer> tokenizer);

}  // namespace rlt::tok::testing
