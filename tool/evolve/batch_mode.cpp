#include "evolve/batch_mode.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <random>

#include "common/error.h"
#include "common/setting_error.h"
#include "common/fs.h"
#include "common/hash.h"
#include "common/process.h"
#include "common/text.h"

namespace kevo::evolve {
namespace {

constexpr size_t kTaskTagMax = 16, kArchTagMax = 10;
const char* const kNothing = " Nothing was imported: the state is as it was.";

bool id_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-'; }

// `text` in the characters a custom_id part may hold, at most `max` of them.
std::string id_part(const std::string& text, size_t max) {
    std::string out;
    for (char c : text) {
        if (out.size() == max) break;
        out += id_char(c) ? c : '_';
    }
    return out.empty() ? "_" : out;
}

bool is_part(const std::string& s) { return !s.empty() && std::all_of(s.begin(), s.end(), id_char); }

bool is_digits(const std::string& s) {
    return !s.empty() && s.size() <= 9 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool is_run_id(const std::string& s) {
    return s.size() == 9 && s[0] == 'r' &&
           std::all_of(s.begin() + 1, s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

std::string new_run_id() {
    std::random_device random;
    char id[16];
    std::snprintf(id, sizeof id, "r%08x", static_cast<unsigned>(random()));
    return id;
}

// A custom_id from a file, fit to be shown in a message.
std::string shown(const std::string& id) {
    return "'" + printable(id.size() > 100 ? id.substr(0, 100) + "..." : id) + "'";
}

}  // namespace

std::optional<BatchCustomId> parse_batch_custom_id(const std::string& id) {
    const size_t colon = id.find(':');
    if (colon == std::string::npos) return std::nullopt;
    const std::string head = id.substr(0, colon);
    BatchCustomId out;
    std::string rest = id.substr(colon + 1);
    if (head[0] != 'b' || !is_digits(head.substr(1))) {   // not "b<n>:KEY" (older versions): "RUN.TASK.ARCH:b<n>:KEY"
        const size_t dot1 = head.find('.'), dot2 = dot1 == std::string::npos ? dot1 : head.find('.', dot1 + 1);
        if (dot2 == std::string::npos) return std::nullopt;
        out.run = head.substr(0, dot1);
        out.task = head.substr(dot1 + 1, dot2 - dot1 - 1);
        out.arch = head.substr(dot2 + 1);
        if (!is_run_id(out.run) || !is_part(out.task) || !is_part(out.arch)) return std::nullopt;
        const size_t colon2 = rest.find(':');
        if (colon2 == std::string::npos || rest[0] != 'b' || !is_digits(rest.substr(1, colon2 - 1))) return std::nullopt;
        out.batch = std::stoi(rest.substr(1, colon2 - 1));
        out.key = rest.substr(colon2 + 1);
    } else {
        out.batch = std::stoi(head.substr(1));
        out.key = rest;
    }
    if (out.key.empty()) return std::nullopt;
    return out;
}

std::string batch_run_tag(const std::string& run_id, const std::string& task, const std::string& arch) {
    return run_id + "." + id_part(task, kTaskTagMax) + "." + id_part(arch, kArchTagMax);
}

std::string batch_custom_id(const std::string& tag, int batch, const std::string& key) {
    const std::string head = tag + ":b" + std::to_string(batch) + ":";
    const bool plain = std::all_of(key.begin(), key.end(), [](char c) { return id_char(c) || c == '.' || c == ':'; });
    if (plain && head.size() + key.size() <= kMaxBatchCustomId) return head + key;
    return head + "k" + sha256_hex(key).substr(0, 12);   // the store maps the id to its key
}

BatchMode::BatchMode(const SearchConfig& cfg, store::Store& store, llm::Budget& budget)
    : cfg_(cfg), store_(store), budget_(budget) {}

void BatchMode::identity() {
    auto structure = store_.get_meta("structure");
    if (structure && structure->is_object() && (*structure)["arch"].is_string()) arch_ = (*structure)["arch"];
    auto name = store_.get_meta("task_name");
    if (name && name->is_string()) task_ = *name;
    if (task_.empty()) task_ = "a task";
    if (arch_.empty()) arch_ = "an unknown architecture";
    auto id = store_.get_meta("run_id");
    if (id && id->is_string() && is_run_id(id->get<std::string>())) {
        run_id_ = id->get<std::string>();
    } else {
        run_id_ = new_run_id();   // a new state, or one of a version before run ids: its batches from now on
        store_.put_meta("run_id", run_id_);
    }
    tag_ = batch_run_tag(run_id_, task_, arch_);
}

// Why `custom_id` (no request of this run) is refused: whose file it is, where that can be told.
std::string BatchMode::foreign(const std::string& where, const std::string& custom_id, bool legacy_records) const {
    const std::string self = "this state is run " + run_id_ + " of " + task_ + " on " + arch_;
    auto id = parse_batch_custom_id(custom_id);
    if (!id)
        return where + ": custom_id " + shown(custom_id) + " was not written by kernelevo search --llm-batch (" + self +
               "; its requests' ids read " + tag_ + ":bN:KEY).";
    if (id->run.empty())
        return where + ": custom_id " + shown(custom_id) +
               (legacy_records ? " is not a request of this run's batch files (the replies of another run or state?)."
                               : " has no run id: the replies of a batch file that an older kernelevo wrote, for "
                                 "another state (" + self + ", and every batch file it wrote names it).");
    if (id->run == run_id_)
        return where + ": custom_id " + shown(custom_id) + " names this run, but this run never wrote that request "
               "(its batch " + std::to_string(id->batch) + " has no such line): an edited file?";
    if (id->task == id_part(task_, kTaskTagMax) && id->arch == id_part(arch_, kArchTagMax))
        return where + ": the replies of another run of " + task_ + " on " + arch_ + " (run " + id->run + "); " + self +
               named(". A file from before {search.fresh}, or of another {store.state}?");
    return where + ": the replies of a run of another task or architecture (run " + id->run + " of " + id->task +
           " on " + id->arch + "); " + self + ".";
}

BatchMode::Checked BatchMode::check(const std::string& file, const std::map<std::string, store::BatchRequest>& by_id,
                                    Seen& seen, bool legacy_records) const {
    // A replies file may hold many long replies; a FIFO or device named by mistake is refused unread.
    const std::string text = read_input_file(file, "a Batch API replies file", std::uintmax_t{1} << 30);
    // A download that did not finish ends in the middle of its last line.
    const bool cut = !text.empty() && text.back() != '\n';
    const size_t last = 1 + static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
    Checked c;
    c.file = file;
    std::map<std::string, size_t> line_of;   // custom_id -> its line
    size_t lines = 0;
    for_each_nonblank_line(text, [&](const std::string& line, size_t number) {
        const std::string where = file + ":" + std::to_string(number);
        ++lines;
        llm::BatchOutputLine out;
        try {
            out = llm::parse_batch_output_line(line, where);
        } catch (const UsageError& e) {
            if (cut && number == last)
                throw UsageError(where + ": the file ends in the middle of this line (cut short: a download or copy "
                                 "that did not finish?)." + kNothing);
            std::string why = e.what();
            throw UsageError(why + (why.empty() || why.back() != '.' ? "." : "") + kNothing);
        }
        auto [first, fresh] = line_of.emplace(out.custom_id, number);
        if (!fresh)
            throw UsageError(where + ": custom_id " + shown(out.custom_id) + " is in the file twice (lines " +
                             std::to_string(first->second) + " and " + std::to_string(number) +
                             "): not a Batch API output file as a provider writes it." + kNothing);
        auto it = by_id.find(out.custom_id);
        if (it == by_id.end()) throw UsageError(foreign(where, out.custom_id, legacy_records) + kNothing);
        const store::BatchRequest& b = it->second;
        // Imported (or failed) before, or given again in this import: never counted twice.
        if (!b.error.empty() || seen.keys.count(b.key) || !seen.ids.insert(b.custom_id).second ||
            store_.find_llm_call(b.key)) {
            ++c.known;
            return;
        }
        llm::ChatRequest chat = llm::request_from_json(b.request.dump());
        llm::BatchReply reply = llm::batch_reply(out, chat, where);
        if (reply.response) seen.keys.insert(b.key);
        c.lines.push_back({&b, std::move(chat), std::move(reply)});
    });
    if (lines == 0) throw UsageError(file + ": no replies in the file (it is empty)." + kNothing);
    return c;
}

store::Spent BatchMode::load(const llm::LogFn& log) {
    identity();
    std::map<std::string, store::BatchRequest> by_id;
    bool legacy_records = false;
    for (store::BatchRequest& b : store_.batch_requests()) {
        auto id = parse_batch_custom_id(b.custom_id);
        legacy_records = legacy_records || (id && id->run.empty());
        by_id[b.custom_id] = std::move(b);
    }
    // Every line of every file is checked before anything is stored: a refused file changes nothing.
    std::vector<Checked> files;
    Seen seen;
    for (const std::string& file : cfg_.batch.replies) files.push_back(check(file, by_id, seen, legacy_records));
    store::Spent imported;
    for (const Checked& c : files) {
        std::vector<store::LlmCall> calls;
        std::vector<std::pair<std::string, std::string>> failed;
        for (const auto& [b, request, reply] : c.lines) {
            if (!reply.response) {
                failed.emplace_back(b->custom_id, reply.error.empty() ? "no reply" : reply.error);
                continue;
            }
            llm::Reservation r = budget_.adopt(request, b->reserved_cost_usd, cfg_.requests.price.has_value());
            llm::Usage counted = budget_.settle(r, reply.response->usage);
            store::LlmCall call;
            call.key = b->key;
            call.kind = b->kind;
            call.request = b->request;
            call.reply = reply.response->content;
            call.model = reply.response->model;
            call.prompt_tokens = counted.prompt_tokens;
            call.completion_tokens = counted.completion_tokens;
            call.cost_usd = counted.cost_usd;
            calls.push_back(std::move(call));
            imported.prompt_tokens += counted.prompt_tokens;   // returned only when every import succeeds
            imported.completion_tokens += counted.completion_tokens;
            imported.cost_usd += counted.cost_usd;
            ++imported.calls;
        }
        store_.import_batch_replies(calls, failed);   // the whole file, or (killed) none of it
        for (const auto& [custom_id, error] : failed) {
            by_id.at(custom_id).error = error;
            if (log) log("batch request " + custom_id + " failed (" + error + "); it will be requested again");
        }
        if (log)
            log("imported " + std::to_string(calls.size()) + " replies from " + c.file +
                (failed.empty() ? "" : ", " + std::to_string(failed.size()) + " failed") +
                (c.known ? ", " + std::to_string(c.known) + " imported before" : ""));
    }
    // What is still waiting: never asked again, and its most possible cost stays reserved.
    for (const auto& [id, b] : by_id) {
        if (!b.error.empty() || waiting_.count(b.key) || store_.find_llm_call(b.key)) continue;
        waiting_.insert(b.key);
        held_.push_back(budget_.adopt(llm::request_from_json(b.request.dump()), b.reserved_cost_usd, cfg_.requests.price.has_value()));
    }
    return imported;
}

bool BatchMode::waiting(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!waiting_.count(key)) return false;
    asked_.insert(key);
    return true;
}

bool BatchMode::defer(const std::string& key, const std::string& kind, const llm::ChatRequest& request) {
    llm::Reservation r;
    try {
        r = budget_.reserve(request, /*wait=*/false);
    } catch (const llm::BudgetExceeded&) {
        std::lock_guard<std::mutex> lock(mu_);
        budget_stopped_ = true;
        return false;
    }
    std::lock_guard<std::mutex> lock(mu_);
    deferred_.push_back(Deferred{key, kind, request, std::move(r)});
    return true;
}

StopReason BatchMode::finish(SearchResult& result) {
    std::lock_guard<std::mutex> lock(mu_);
    result.batch_waiting = static_cast<int>(asked_.size());
    if (deferred_.empty()) return asked_.empty() ? (budget_stopped_ ? StopReason::budget : StopReason::none) : StopReason::batch;
    int number = 0;
    for (const store::BatchRequest& b : store_.batch_requests()) number = std::max(number, b.batch);
    ++number;
    const std::string path = fs::absolute(cfg_.batch.prefix + "-" + std::to_string(number) + ".jsonl").string();
    std::sort(deferred_.begin(), deferred_.end(), [](const Deferred& a, const Deferred& b) { return a.key < b.key; });
    std::string text;
    std::vector<store::BatchRequest> rows;
    for (const Deferred& d : deferred_) {
        store::BatchRequest b;
        b.custom_id = batch_custom_id(tag_, number, d.key);
        b.key = d.key;
        b.batch = number;
        b.file = path;
        b.kind = d.kind;
        b.request = nlohmann::json::parse(llm::request_json(d.request));
        b.reserved_tokens = d.reservation.tokens();
        b.reserved_cost_usd = d.reservation.cost_usd;
        // Byte for byte: what is sent is never redacted (issue 37; only what is shown or logged is).
        text += llm::batch_input_line(b.custom_id, d.request, cfg_.batch.url) + "\n";
        rows.push_back(std::move(b));
    }
    // The file first: a kill before the store knows of it only means writing the same file again.
    write_file_atomic(path, text);
    store_.add_batch(rows);
    result.batch_file = path;
    result.batch_written = static_cast<int>(rows.size());
    deferred_.clear();
    return StopReason::batch;
}

}  // namespace kevo::evolve
