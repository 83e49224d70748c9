// `kernelevo llm check`: one tiny request per configured model, to test a configuration before a
// long run. `kernelevo llm batch submit|status|fetch`: the provider's Batch API for the files that
// `kernelevo search --llm-batch` writes.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <functional>
#include <iostream>
#include <sstream>
#include <set>

#include <nlohmann/json.hpp>

#include "commands/commands.h"
#include "cli/cli.h"
#include "common/error.h"
#include "common/exit_code.h"
#include "common/fs.h"
#include "common/process.h"
#include "common/text.h"
#include "llm/batch.h"
#include "commands/llm_options.h"
#include "llm/options.h"
#include "llm/util.h"

namespace kevo {
namespace {

void print_batch(const llm::BatchInfo& b) {
    // Ids and statuses come from the server: escaped for the terminal.
    std::cout << "batch:    " << printable(b.id) << "\n"
              << "status:   " << printable(b.status) << "\n";
    if (b.total) std::cout << "requests: " << b.completed << " of " << b.total << " done, " << b.failed << " failed\n";
    if (!b.output_file_id.empty()) std::cout << "output:   " << printable(b.output_file_id) << "\n";
    if (!b.error_file_id.empty()) std::cout << "errors:   " << printable(b.error_file_id) << "\n";
    if (!b.errors.empty()) std::cout << "problems: " << printable(redact(b.errors)) << "\n";
}

// --llm-url for a printed command, its credentials shown as *** (the note says to give them again).
std::string connection_args(const llm::LlmOptions& o) {
    if (o.url == llm::kDefaultLlmUrl) return "";
    return " --llm-url " + shell_quote(llm::display_url(o.url)) + llm::url_credentials_note(o.url);
}

// Log lines and errors carry what the server sent: escaped for the terminal.
void log_line(const std::string& line) { std::cerr << "kernelevo: llm: " << printable(line) << "\n"; }

// A batch command whose server failed or answered what is no answer (an HTTP error, a malformed
// reply): one line naming the command, exit 1, as `llm check` does; never an internal error.
int batch_errors(const char* command, const std::function<int()>& run) {
    try {
        return run();
    } catch (const llm::LlmError& e) {
        std::cerr << "kernelevo: llm batch " << command << ": " << printable(redact(e.what())) << "\n";
        return kExitFailed;
    }
}

struct BatchOptions {
    llm::LlmOptions llm;
    std::string file, id, out;
    bool force = false;
};

// `llm batch submit`: the file uploaded, the batch started, the commands to follow it printed.
int submit_batch(const BatchOptions& o) {
    size_t n = llm::count_batch_input(o.file);
    llm::BatchApi api(llm::http_config(o.llm, log_line));
    std::string file_id = api.upload(o.file);
    std::cout << "file:     " << printable(file_id) << " (" << n << " requests from " << printable(o.file) << ")\n";
    llm::BatchInfo b = api.create(file_id);
    print_batch(b);
    // Commands to paste: the id quoted for the shell (the API checked it is letters, digits, -_.: only,
    // and does not start with '-', which a command would read as an option).
    std::cout << "\nnext:     kernelevo llm batch status " << shell_quote(b.id) << connection_args(o.llm) << "\n"
              << "          kernelevo llm batch fetch " << shell_quote(b.id) << " --out REPLIES.jsonl"
              << connection_args(o.llm)
              << "\n          then run the search again with --llm-batch-replies REPLIES.jsonl\n";
    return kExitSuccess;
}

void add_batch_submit(CLI::App& batch, BatchOptions& o, int& rc) {
    CLI::App* submit = batch.add_subcommand("submit", "Upload a batch input file and start a batch. Prints the batch id.");
    submit->add_option("FILE", o.file, "The Batch API input file (JSONL)")->required()->check(CLI::ExistingFile);
    llm::add_llm_connection_options(*submit, o.llm);
    submit->callback([&o, &rc] { rc = batch_errors("submit", [&] { return submit_batch(o); }); });
}

void add_batch_status(CLI::App& batch, BatchOptions& o, int& rc) {
    CLI::App* status = batch.add_subcommand("status", "Print a batch's status and request counts");
    status->add_option("BATCH_ID", o.id, "The id `submit` printed")->required();
    llm::add_llm_connection_options(*status, o.llm);
    status->callback([&o, &rc] {
        rc = batch_errors("status", [&] {
            llm::BatchApi api(llm::http_config(o.llm, log_line));
            print_batch(api.get(o.id));
            return kExitSuccess;
        });
    });
}

// `llm batch fetch`: the batch's replies into --out; 1 while it is not finished or has none.
int fetch_batch(const BatchOptions& o) {
    // Replies fetched before (perhaps not imported yet) are not overwritten by mistake.
    std::error_code ec;
    if (!o.force && (fs::exists(o.out, ec) || fs::is_symlink(o.out, ec)))
        throw UsageError("--out " + o.out + " exists: give another file, or --force to replace it");
    llm::BatchApi api(llm::http_config(o.llm, log_line));
    llm::BatchInfo b = api.get(o.id);
    print_batch(b);
    if (!b.finished()) {
        std::cerr << "kernelevo: llm batch fetch: batch " << printable(b.id) << " is " << printable(b.status)
                  << "; fetch it again once it is completed\n";
        return kExitFailed;
    }
    std::string replies;
    for (const std::string& id : {b.output_file_id, b.error_file_id}) {
        if (id.empty()) continue;
        std::string part = api.file_content(id);
        if (!part.empty() && part.back() != '\n') part += '\n';
        replies += part;
    }
    if (replies.empty()) {
        std::cerr << "kernelevo: llm batch fetch: batch " << printable(b.id) << " is " << printable(b.status)
                  << " and has no replies\n";
        return kExitFailed;
    }
    // Checked again as the file is put in place (link(), no replacing): a file created at --out
    // during the download is left as it is.
    if (o.force)
        write_file_atomic(o.out, replies);
    else if (!write_file_new(o.out, replies))
        throw UsageError("--out " + o.out + " appeared while the replies were downloaded; it was left as it is: "
                         "give another file, or --force to replace it");
    std::cout << "replies:  " << o.out << "\n\nnext:     run the search again with --llm-batch-replies "
              << shell_quote(o.out) << "\n";
    return kExitSuccess;
}

void add_batch_fetch(CLI::App& batch, BatchOptions& o, int& rc) {
    CLI::App* fetch = batch.add_subcommand(
        "fetch",
        "Download a finished batch's replies into one file. The output and error files, for "
        "`kernelevo search --llm-batch-replies`.\nExit codes: 0 written, 1 the batch is not finished yet or has no "
        "replies (or the server failed), 2 bad usage.");
    fetch->add_option("BATCH_ID", o.id, "The id `submit` printed")->required();
    fetch->add_option("--out", o.out, "Where to write the replies (JSONL); an existing file only with --force")->required();
    fetch->add_flag("--force", o.force, "Replace --out if it exists");
    llm::add_llm_connection_options(*fetch, o.llm);
    fetch->callback([&o, &rc] { rc = batch_errors("fetch", [&] { return fetch_batch(o); }); });
}

void register_batch_commands(CLI::App& llm_cmd, int& rc) {
    static BatchOptions o;
    CLI::App* batch = llm_cmd.add_subcommand(
        "batch",
        "Run a batch file of `kernelevo search --llm-batch` through the provider's Batch API. It goes to POST /files and "
        "/batches under --llm-url, as OpenAI serves them: about half the price, answered within 24 hours.");
    batch->require_subcommand(1);
    add_batch_submit(*batch, o, rc);
    add_batch_status(*batch, o, rc);
    add_batch_fetch(*batch, o, rc);
}

struct CheckOptions {
    llm::LlmOptions llm;
    std::string prompt = "Reply with the single word: pong";
    int max_tokens = 1024;
    bool json = false;
};

// One tiny request to model `name`: its row of the report, its lines on `text` (a failure also on stderr).
nlohmann::json check_model(llm::Client& client, const std::string& name, const CheckOptions& o, std::ostream& text) {
    llm::ChatRequest request;
    request.model = name;
    request.messages = {{"user", o.prompt}};
    request.temperature = 0;
    request.max_tokens = o.max_tokens;
    text << "\nmodel:    " << name << "\n" << std::flush;
    nlohmann::json row{{"model", name}};
    try {
        llm::ChatResponse r = client.chat(request);
        char cost[64] = "not reported";
        if (r.usage.cost_known) std::snprintf(cost, sizeof cost, "$%.6f", r.usage.cost_usd);
        row.update({{"status", "ok"}, {"answered_by", r.model}, {"latency_s", r.latency_s}, {"attempts", r.attempts},
                    {"answer", redact(llm::snippet(r.content, 200))}, {"prompt_tokens", r.usage.prompt_tokens},
                    {"completion_tokens", r.usage.completion_tokens},
                    {"cost_usd", r.usage.cost_known ? nlohmann::json(r.usage.cost_usd) : nlohmann::json(nullptr)},
                    {"error", nullptr}});
        // The model's text may hold terminal escapes: shown as "\x1b", never obeyed.
        text << "answered: " << printable(redact(r.model)) << "\n"
             << "latency:  " << llm::format_seconds(r.latency_s)
             << (r.attempts > 1 ? " (" + std::to_string(r.attempts) + " attempts)" : "") << "\n"
             << "answer:   " << printable(redact(llm::snippet(r.content, 200))) << "\n"
             << "tokens:   " << r.usage.prompt_tokens << " prompt + " << r.usage.completion_tokens << " completion\n"
             << "cost:     " << cost << "\n"
             << "status:   ok\n";
    } catch (const llm::LlmError& e) {
        row.update({{"status", "failed"}, {"error", redact(e.what())}});
        text << "status:   FAILED\n" << std::flush;
        std::cerr << "kernelevo: llm check: " << name << ": " << printable(redact(e.what())) << "\n";
    }
    return row;
}

// `llm check`: every model once; 0 when each answered, else 1.
int run_check(const CheckOptions& o) {
    auto client = llm::make_client(o.llm, log_line);  // (checks the URL; sends nothing)
    if (o.llm.replay.empty()) llm::require_api_key(o.llm.url, o.llm.key_env);  // before anything is sent
    // Human lines go to `text`, which --json discards.
    std::ostringstream discard;
    std::ostream& text = o.json ? static_cast<std::ostream&>(discard) : std::cout;
    const std::string shown_url = llm::display_url(o.llm.url);   // credentials as ***
    nlohmann::json report{{"url", o.llm.replay.empty() ? shown_url : std::string()},
                          {"replay", o.llm.replay.empty() ? nlohmann::json(nullptr) : nlohmann::json(o.llm.replay)},
                          {"key_source", nullptr},
                          {"models", nlohmann::json::array()}};
    text << "url:      " << (o.llm.replay.empty() ? shown_url : "replay of " + o.llm.replay) << "\n";
    if (o.llm.replay.empty()) {
        llm::ApiKey key = llm::find_api_key(o.llm.url, o.llm.key_env);
        if (!key.value.empty()) report["key_source"] = key.source;
        text << "key:      "
             << (!key.value.empty()     ? "from $" + key.source
                 : key.withheld.empty() ? "none ($" + key.looked_at.front() + " and $" + key.looked_at.back() +
                                              " are unset; a local server)"
                                        : "none ($" + key.withheld + " is sent only to openrouter.ai)")
             << "\n";
    }
    std::set<std::string> seen;
    int failed = 0;
    for (const auto& m : client->config().models) {
        if (!seen.insert(m.name).second) continue;
        nlohmann::json row = check_model(*client, m.name, o, text);
        if (row["status"] != "ok") ++failed;
        report["models"].push_back(std::move(row));
    }
    report["ok"] = failed == 0;
    // Replace: a reply cut inside a UTF-8 sequence must not end the report with "invalid UTF-8".
    if (o.json) std::cout << report.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
    return exit_code_of(failed == 0);
}

}  // namespace

void register_llm_command(CLI::App& app, int& rc) {
    static CheckOptions o;
    // A check should answer quickly; these defaults (shown in --help) are shorter than a search's.
    o.llm.read_timeout_s = 120;
    o.llm.max_attempts = 3;
    o.llm.retry_total_max_s = 60;

    CLI::App* llm_cmd = app.add_subcommand("llm", "Talk to the configured LLM: check it, run Batch API files");
    cli::set_examples(*llm_cmd, {
        {"Does the model answer? (the key in $OPENROUTER_API_KEY)", "kernelevo llm check --model google/gemini-3-flash"},
        {"A local server (vLLM, SGLang, Ollama, llama.cpp)", "kernelevo llm check --llm-url http://localhost:8000/v1 --model qwen3-coder"},
        {"Submit a batch file written by search --llm-batch", "kernelevo llm batch submit gelu-sm_90-batch-1.jsonl"},
        {"Follow it", "kernelevo llm batch status batch_abc123"},
        {"Fetch its replies, then run the same search with --llm-batch-replies replies.jsonl",
         "kernelevo llm batch fetch batch_abc123 --out replies.jsonl"},
    });
    llm_cmd->require_subcommand(1);
    CLI::App* check = llm_cmd->add_subcommand(
        "check",
        "Send one tiny request to each --model and print what came back. The latency, the model that answered, its answer and "
        "the tokens (and cost when the provider reports it).\nExit codes: 0 every model answered, 1 a request "
        "failed, 2 bad usage.\nThe API key is read from the environment (see --llm-key-env), never from the "
        "command line.");
    llm::add_llm_options(*check, o.llm);
    check->add_option("--prompt", o.prompt, "The message to send")->capture_default_str();
    check->add_option("--max-tokens", o.max_tokens,
                      "Completion token limit of the request (reasoning models need room to think)")
        ->capture_default_str()
        ->check(CLI::PositiveNumber);
    check->add_flag("--json", o.json, "Print the results as one JSON object on stdout (schema: README, JSON output)");

    register_batch_commands(*llm_cmd, rc);

    check->callback([&rc] { rc = run_check(o); });
}

}  // namespace kevo
