// The LLM options every command that talks to a model shares (`kernelevo llm check`,
// `kernelevo search`, `kernelevo bench`): add them to a CLI11 (sub)command, then build a Client from
// what was parsed (llm/options.h).
//
//   LlmOptions llm;
//   kevo::llm::add_llm_options(*cmd, llm);
//   cmd->callback([&] { auto client = kevo::llm::make_client(llm); ... });
#pragma once
#include "llm/options.h"

namespace CLI { class App; }

namespace kevo::llm {

// Adds the options of LlmOptions to `app`, in an "LLM" option group.
void add_llm_options(CLI::App& app, LlmOptions& options);
// Only those that say how to reach the server (--llm-url, --llm-key-env, timeouts, attempts):
// for commands that send no chat request (`kernelevo llm batch`).
void add_llm_connection_options(CLI::App& app, LlmOptions& options);

}  // namespace kevo::llm
