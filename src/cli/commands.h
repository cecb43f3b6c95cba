// Subcommands of the rlt binary; each file adds one to the app. CLI11 stays out of this header.
#pragma once

namespace CLI {
class App;
}

namespace rlt::cli {

// Each add_* registers a subcommand whose callback stores its process exit status in *exit_code.
void add_info_command(CLI::App& app, int* exit_code);
void add_generate_command(CLI::App& app, int* exit_code);
void add_attention_command(CLI::App& app, int* exit_code);
void add_bench_command(CLI::App& app, int* exit_code);
void add_serve_command(CLI::App& app, int* exit_code);
void add_tokenize_commands(CLI::App& app, int* exit_code);
void add_make_model_command(CLI::App& app, int* exit_code);
void add_chat_command(CLI::App& app, int* exit_code);
void add_perplexity_command(CLI::App& app, int* exit_code);
void add_convert_command(CLI::App& app, int* exit_code);

}  // namespace rlt::cli
