// The LLM options on the command line (commands/llm_options.h).
#include "commands/llm_options.h"

#include <CLI/CLI.hpp>
#include <string>

#include "cli/validators.h"

namespace kevo::llm {

void add_llm_connection_options(CLI::App& app, LlmOptions& o) {
    const std::string g = "LLM";
    app.add_option("--llm-url", o.url,
                   "Base URL of an OpenAI-compatible API; chat requests go to URL/chat/completions, Batch API "
                   "calls to URL/files and URL/batches (OpenRouter, https://api.openai.com/v1, vLLM/SGLang http://host:8000/v1, "
                   "Ollama http://localhost:11434/v1, llama.cpp server http://localhost:8080/v1)")
        ->capture_default_str()->type_name("URL")->group(g)
        ->check(kevo::cli::NonEmpty)->check(kevo::cli::NoControlCharacters)  // CR/LF would split a request
        ->each([](const std::string& url) { register_url_secrets(url); });  // before anything can print it
    app.add_option("--llm-key-env", o.key_env,
                   "Environment variable holding the API key (default: KERNELEVO_API_KEY, else "
                   "OPENROUTER_API_KEY for openrouter.ai, else OPENAI_API_KEY; none: no key is sent)")
        ->type_name("VAR")->group(g);
    app.add_option("--llm-connect-timeout", o.connect_timeout_s, "Seconds to wait for a connection")
        ->capture_default_str()->check(kevo::cli::Seconds)->type_name("S")->group(g);
    app.add_option("--llm-timeout", o.read_timeout_s, "Seconds one attempt may take once connected (read timeout)")
        ->capture_default_str()->check(kevo::cli::Seconds)->type_name("S")->group(g);
    app.add_option("--llm-attempts", o.max_attempts,
                   "Attempts per request; 429, 5xx and network errors are retried with exponential backoff "
                   "and jitter, honouring Retry-After")
        ->capture_default_str()->check(CLI::PositiveNumber)->type_name("N")->group(g);
    app.add_option("--llm-retry-max-wait", o.retry_total_max_s, "Cap on the seconds one request spends waiting between retries")
        ->capture_default_str()->check(kevo::cli::SecondsOrZero)->type_name("S")->group(g);
}

void add_llm_options(CLI::App& app, LlmOptions& o) {
    const std::string g = "LLM";
    add_llm_connection_options(app, o);
    app.add_option("--model", o.models,
                   "Model to ask, repeatable; with a weight each request picks one in proportion, "
                   "e.g. --model google/gemini-3-flash:3 --model z-ai/glm-5:1")
        ->type_name("NAME[:WEIGHT]")->allow_extra_args(false)->group(g);
    app.add_option("--llm-parallel", o.max_in_flight,
                   "Requests in flight at once (1 to " + std::to_string(kMaxInFlight) + ")")
        ->capture_default_str()->check(CLI::Range(1, kMaxInFlight))->type_name("N")->group(g);
    app.add_option("--budget-tokens", o.max_total_tokens,
                   "Cap on prompt + completion tokens (0: no cap). Each request reserves its most possible use (one "
                   "token per prompt byte plus its max tokens) before it is sent, so requests in flight cannot "
                   "overrun the cap")
        ->capture_default_str()->check(CLI::NonNegativeNumber)->type_name("N")->group(g);
    app.add_option("--budget-usd", o.max_cost_usd,
                   "Cap on the cost in US dollars that the provider reports, or --llm-price gives (0: no cap). "
                   "Each request reserves its most possible cost (at --llm-price, else at the highest price per "
                   "token a reply reported) before it is sent")
        ->capture_default_str()->check(kevo::cli::FiniteNumber)->check(CLI::NonNegativeNumber)->type_name("USD")->group(g);
    app.add_option("--llm-price", o.price,
                   "The model's price in USD per million prompt:completion tokens (e.g. 0.30:2.50; with --llm-batch "
                   "the batch price). It bounds what each request may cost before it is sent, and prices replies "
                   "whose cost the provider does not report")
        ->type_name("IN:OUT")->group(g);
    app.add_option("--llm-transcript", o.transcript,
                   "Append every exchange (request without the key, reply, usage, latency, error) to this JSONL file")
        ->type_name("FILE")->group(g);
    app.add_option("--llm-replay", o.replay,
                   "Answer from a recorded transcript instead of the network, matching requests by hash")
        ->check(CLI::ExistingFile.description(""))->type_name("FILE")->group(g);
    app.add_flag("--llm-replay-in-order", o.replay_in_order,
                 "With --llm-replay: serve the recorded replies in file order, whatever is asked")
        ->group(g);
}

}  // namespace kevo::llm
