// The LLM options (LlmOptions) and the provider/client they describe; the command line that fills
// them is tool/commands/llm_options.cpp.
#include "llm/options.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

#include "common/settings.h"
#include "common/error.h"
#include "common/process.h"
#include "llm/budget.h"
#include "common/setting_error.h"
#include "llm/util.h"

namespace kevo::llm {

namespace {

// The parts of an http(s) URL that may carry credentials, as offsets into it.
struct UrlParts {
    size_t userinfo_begin = std::string::npos, userinfo_end = std::string::npos;  // "user:pw" (without '@')
    size_t query_begin = std::string::npos, query_end = std::string::npos;        // after '?', before '#'
};

UrlParts url_parts(const std::string& url) {
    UrlParts p;
    size_t scheme = url.find("://");
    size_t authority = scheme == std::string::npos ? 0 : scheme + 3;
    size_t authority_end = url.find_first_of("/?#", authority);
    if (authority_end == std::string::npos) authority_end = url.size();
    size_t at = url.rfind('@', authority_end == 0 ? 0 : authority_end - 1);
    if (at != std::string::npos && at >= authority && at < authority_end) {
        p.userinfo_begin = authority;
        p.userinfo_end = at;
    }
    size_t q = url.find('?', authority_end);
    size_t hash = url.find('#', authority_end);
    if (q != std::string::npos && (hash == std::string::npos || q < hash)) {
        p.query_begin = q + 1;
        p.query_end = hash == std::string::npos ? url.size() : hash;
    }
    return p;
}

std::string percent_decode(const std::string& s) {
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
            std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
            out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
            i += 2;
        } else {
            out += s[i] == '+' ? ' ' : s[i];
        }
    }
    return out;
}

void register_both(const std::string& secret) {
    register_secret(secret);
    register_secret(percent_decode(secret));
}

// Calls f(name, value, value_begin) for each "name=value" (or bare "value") of a query string.
template <class F>
void for_each_query_param(const std::string& url, const UrlParts& p, F&& f) {
    for (size_t pos = p.query_begin; pos < p.query_end;) {
        size_t end = url.find('&', pos);
        if (end == std::string::npos || end > p.query_end) end = p.query_end;
        size_t eq = url.find('=', pos);
        if (eq != std::string::npos && eq < end) f(url.substr(pos, eq - pos), eq + 1, end);
        else f(std::string(), pos, end);
        pos = end + 1;
    }
}

// A query value that may be a credential: by its name, or by its length (a token).
bool secret_query_value(const std::string& name, const std::string& value) {
    const std::string n = lower(name);
    for (const char* word : {"key", "token", "secret", "pass", "sig", "auth", "cred"})
        if (n.find(word) != std::string::npos) return true;
    return name.empty() || value.size() >= 16;
}

}  // namespace

std::string display_url(const std::string& url) {
    const UrlParts p = url_parts(url);
    std::vector<std::pair<size_t, size_t>> hide;   // [begin, end) ranges shown as ***, in order
    if (p.userinfo_begin != std::string::npos && p.userinfo_end > p.userinfo_begin) hide.push_back({p.userinfo_begin, p.userinfo_end});
    for_each_query_param(url, p, [&](const std::string& name, size_t begin, size_t end) {
        if (end > begin && secret_query_value(name, url.substr(begin, end - begin))) hide.push_back({begin, end});
    });
    std::string out;
    size_t at = 0;
    for (const auto& [begin, end] : hide) {
        out += url.substr(at, begin - at) + "***";
        at = end;
    }
    return out + url.substr(at);
}

bool url_has_credentials(const std::string& url) { return display_url(url) != url; }

std::string url_credentials_note(const std::string& url) {
    return url_has_credentials(url) ? named(" (the credentials of {llm.url} show as ***: give them again)") : "";
}

void register_url_secrets(const std::string& url) {
    const UrlParts p = url_parts(url);
    if (p.userinfo_begin != std::string::npos) {
        const std::string info = url.substr(p.userinfo_begin, p.userinfo_end - p.userinfo_begin);
        const size_t colon = info.find(':');
        register_both(colon == std::string::npos ? info : info.substr(colon + 1));
    }
    for_each_query_param(url, p, [&](const std::string& name, size_t begin, size_t end) {
        const std::string value = url.substr(begin, end - begin);
        if (secret_query_value(name, value)) register_both(value);
    });
}

ApiKey find_api_key(const std::string& url, const std::string& key_env) {
    auto get = [](const std::string& var) -> ApiKey {
        const char* v = std::getenv(var.c_str());
        std::string value = v ? trim(v) : "";
        if (value.empty()) return {};
        register_secret(value);
        return {value, var, ""};
    };
    if (!key_env.empty()) {
        ApiKey key = get(key_env);
        if (key.value.empty()) throw SettingError({settings::kLlmKeyEnv}, "{llm.key_env} " + key_env + ": the variable is not set or empty");
        key.looked_at = {key_env};
        return key;
    }
    const std::string host = url_host(url);
    const bool openrouter_host = host == "openrouter.ai" || ends_with(host, ".openrouter.ai");
    const std::string provider_var = openrouter_host ? "OPENROUTER_API_KEY" : "OPENAI_API_KEY";
    const std::vector<std::string> looked_at = {env_name(EnvVar::kApiKey), provider_var};
    ApiKey key = get(env_name(EnvVar::kApiKey));
    if (key.value.empty()) key = get(provider_var);
    key.looked_at = looked_at;
    const char* openrouter = std::getenv("OPENROUTER_API_KEY");
    if (key.value.empty() && !openrouter_host && openrouter && !trim(openrouter).empty())
        key.withheld = "OPENROUTER_API_KEY";
    return key;
}

namespace {

// A server on this machine or the local network (loopback, private and link-local IPv4, IPv6
// loopback and unique-local, a name without a dot, *.local, *.localhost): it may well take no key.
bool local_host(const std::string& host) {
    if (host.empty() || host == "localhost" || ends_with(host, ".localhost") || ends_with(host, ".local")) return true;
    if (host.find(':') != std::string::npos)  // IPv6
        return host == "::1" || host == "[::1]" || host.rfind("fc", 0) == 0 || host.rfind("fd", 0) == 0 ||
               host.rfind("[fc", 0) == 0 || host.rfind("[fd", 0) == 0;
    if (host.find('.') == std::string::npos) return true;
    unsigned a = 0, b = 0;
    if (std::sscanf(host.c_str(), "%u.%u.", &a, &b) != 2 || host.find_first_not_of("0123456789.") != std::string::npos)
        return false;
    return a == 127 || a == 10 || a == 0 || (a == 192 && b == 168) || (a == 172 && b >= 16 && b < 32) ||
           (a == 169 && b == 254);
}

}  // namespace

void require_api_key(const std::string& url, const std::string& key_env) {
    const ApiKey key = find_api_key(url, key_env);
    const std::string host = url_host(url);
    if (!key.value.empty() || local_host(host)) return;
    std::string vars;
    for (size_t i = 0; i < key.looked_at.size(); ++i)
        vars += (i == 0 ? "$" : i + 1 == key.looked_at.size() ? " and $" : ", $") + key.looked_at[i];
    std::string msg = "no API key for " + host + ": " + vars + " are unset or empty";
    if (!key.withheld.empty())
        msg += " ($" + key.withheld + " is set, but it is sent only to openrouter.ai; give it with {llm.key_env} " +
               key.withheld + ")";
    throw SettingError({settings::kLlmKeyEnv}, msg + "; set " + key.looked_at.front() + " (or name another variable with "
                                                  "{llm.key_env}). Nothing was sent.");
}

HttpConfig http_config(const LlmOptions& o, const LogFn& log) {
    HttpConfig c;
    register_url_secrets(o.url);
    c.base_url = o.url;
    ApiKey key = find_api_key(o.url, o.key_env);
    if (key.value.empty() && !key.withheld.empty() && log)
        log("note: " + key.withheld + " is set but is sent only to openrouter.ai, so no API key is sent to " +
            url_host(o.url) + named(" (set KERNELEVO_API_KEY, or pass {llm.key_env} ") + key.withheld + ")");
    c.api_key = key.value;
    c.connect_timeout_s = o.connect_timeout_s;
    c.read_timeout_s = o.read_timeout_s;
    c.max_attempts = o.max_attempts;
    c.retry_total_max_s = o.retry_total_max_s;
    c.backoff_initial_s = o.backoff_initial_s;
    c.backoff_max_s = o.backoff_max_s;
    c.log = log;
    return c;
}

std::shared_ptr<Provider> make_provider(const LlmOptions& o, const LogFn& log) {
    if (!o.replay.empty())
        return std::make_shared<ReplayProvider>(
            o.replay, o.replay_in_order ? ReplayProvider::Mode::InOrder : ReplayProvider::Mode::ByHash);
    return std::make_shared<HttpProvider>(http_config(o, log));
}

std::unique_ptr<Client> make_client(const LlmOptions& o, const LogFn& log) {
    if (o.models.empty())
        throw SettingError({settings::kLlmModel}, "no model: pass {llm.model} NAME (repeatable, NAME[:WEIGHT]), e.g. {llm.model} google/gemini-3-flash");
    ClientConfig c;
    for (const auto& spec : o.models) c.models.push_back(parse_model_choice(spec));
    c.max_in_flight = o.max_in_flight;
    c.max_total_tokens = o.max_total_tokens;
    c.max_cost_usd = o.max_cost_usd;
    if (!o.price.empty()) c.price = parse_price(o.price);
    c.transcript = o.transcript;
    c.seed = o.model_seed;
    c.log = log;
    return std::make_unique<Client>(make_provider(o, log), c);
}

}  // namespace kevo::llm
