// The rlt command-line tool.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "cli/commands.h"
#include "common/log.h"

int main(int argc, char** argv) {
  CLI::App app{"rlt — inference and serving engine for looped (recurrent-depth) language models"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "rlt 0.1.0");
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "debug, info, warn, error or off")
      ->capture_default_str()
      ->each([](const std::string& v) {
        rlt::LogLevel level;
        if (!rlt::parse_log_level(v, &level)) throw CLI::ValidationError("--log-level", "unknown level " + v);
        rlt::set_log_level(level);
      });
  int exit_code = 0;
  rlt::cli::add_info_command(app, &exit_code);
  rlt::cli::add_generate_command(app, &exit_code);
  rlt::cli::add_attention_command(app, &exit_code);
  rlt::cli::add_bench_command(app, &exit_code);
  rlt::cli::add_serve_command(app, &exit_code);
  rlt::cli::add_tokenize_commands(app, &exit_code);
  rlt::cli::add_make_model_command(app, &exit_code);
  rlt::cli::add_chat_command(app, &exit_code);
  rlt::cli::add_perplexity_command(app, &exit_code);
  rlt::cli::add_convert_command(app, &exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    // Boundary: anything unexpected becomes a message, never a crash.
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return exit_code;
}
