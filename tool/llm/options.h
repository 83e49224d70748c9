// The LLM options every command that talks to a model shares (`kernelevo llm check`,
// `kernelevo search`): what they hold, and the Client built from them. The command line that fills
// them is commands/llm_options.h (add_llm_options()).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "llm/llm.h"

namespace kevo::llm {

inline constexpr const char* kDefaultLlmUrl = "https://openrouter.ai/api/v1";
// The most one reply may hold: a longer one is refused online ("reply too large") and in a Batch
// API replies file alike.
inline constexpr size_t kMaxReplyBytes = size_t{64} << 20;

struct LlmOptions {
    std::string url = kDefaultLlmUrl;        // --llm-url
    std::vector<std::string> models;         // --model NAME[:WEIGHT], repeatable
    std::string key_env;                     // --llm-key-env VAR (else the default lookup)
    int max_in_flight = 4;                   // --llm-parallel
    double connect_timeout_s = 15;           // --llm-connect-timeout
    double read_timeout_s = 600;             // --llm-timeout
    int max_attempts = 6;                    // --llm-attempts
    double retry_total_max_s = 600;          // --llm-retry-max-wait
    int64_t max_total_tokens = 0;            // --budget-tokens (0: none)
    double max_cost_usd = 0;                 // --budget-usd (0: none)
    std::string price;                       // --llm-price PROMPT:COMPLETION (USD per million tokens)
    std::string transcript;                  // --llm-transcript FILE
    std::string replay;                      // --llm-replay FILE
    bool replay_in_order = false;            // --llm-replay-in-order
    // Not options. The model pick's seed (a command with its own --seed sets it so that runs,
    // and their replays by hash, pick the same models); tests shorten the backoff.
    std::optional<uint64_t> model_seed;
    double backoff_initial_s = 2, backoff_max_s = 60;
};

struct ApiKey {
    std::string value;    // empty: none found
    std::string source;   // the variable it came from, for messages ("" when none)
    std::string withheld; // OPENROUTER_API_KEY when it is set but not sent to this host
    std::vector<std::string> looked_at;  // the variables asked, in order (KERNELEVO_API_KEY, the provider's)
};
// The key for `url`: $VAR when key_env names one; else KERNELEVO_API_KEY; else the variable of the
// provider the URL points at (OPENROUTER_API_KEY for openrouter.ai, OPENAI_API_KEY for
// api.openai.com and for any other host, as the OpenAI SDKs do). OPENROUTER_API_KEY is never sent
// to another host (make_provider logs a note when that leaves no key). Surrounding whitespace is
// trimmed; the key is registered with register_secret().
ApiKey find_api_key(const std::string& url, const std::string& key_env = "");
// Throws a SettingError (llm.key_env) naming the variables looked at when find_api_key() finds no
// key for `url` and its host is not on this machine or the local network (a local server may take
// none): a hosted provider would only refuse the request.
void require_api_key(const std::string& url, const std::string& key_env = "");

// Credentials inside --llm-url (https://user:secret@host/v1, ?key=...). The URL as messages and
// printed commands show it: the user-info as ***, and the query values that may be credentials
// (their name says key, token, secret, pass, sig, auth or cred; or 16 characters or more) as ***.
std::string display_url(const std::string& url);
// Whether display_url() hides something of `url` (a printed command then needs it again).
bool url_has_credentials(const std::string& url);
// For a printed command that holds `url` redacted: " (the credentials of --llm-url show as ***:
// give them again)" when it has some, else "".
std::string url_credentials_note(const std::string& url);
// Registers the URL's secrets with register_secret(), so that redact() hides them wherever they
// appear (errors, logs, transcripts, states, the command line of a resume hint): the password of
// user:password@ (the user-info itself when it has no password) and the query values that
// display_url() hides; raw and percent-decoded. Called when --llm-url is parsed.
void register_url_secrets(const std::string& url);

// The HTTP settings the options describe (URL, key, timeouts, retries). Throws kevo::UsageError
// on invalid values.
HttpConfig http_config(const LlmOptions& options, const LogFn& log);
// The provider the options describe: a ReplayProvider with --llm-replay, else an HttpProvider.
// Throws kevo::UsageError on invalid values.
std::shared_ptr<Provider> make_provider(const LlmOptions& options, const LogFn& log);
// A client over make_provider(). Throws kevo::UsageError when no --model was given or a value is
// invalid.
std::unique_ptr<Client> make_client(const LlmOptions& options, const LogFn& log);

}  // namespace kevo::llm
