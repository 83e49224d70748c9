#include "evolve/batch_mode.h"

#include <algorithm>
#include <map>

#include "common/error.h"
#include "common/fs.h"
#include "common/process.h"
#include "common/text.h"
#include "llm/batch.h"

namespace kevo::evolve {

BatchMode::BatchMode(const SearchConfig& cfg, store::Store& store, llm::Budget& budget)
    : cfg_(cfg), store_(store), budget_(budget) {}

store::Spent BatchMode::load(const llm::LogFn& log) {
    std::map<std::string, store::BatchRequest> by_id;
    for (store::BatchRequest& b : store_.batch_requests()) by_id[b.custom_id] = std::move(b);
    store::Spent imported;
    for (const std::string& file : cfg_.batch_replies) {
        std::string text = read_file(file);
        int answered = 0, failed = 0, known = 0;
        for_each_nonblank_line(text, [&](const std::string& line, size_t number) {
            const std::string where = file + ":" + std::to_string(number);
            llm::BatchOutputLine out = llm::parse_batch_output_line(line, where);
            auto it = by_id.find(out.custom_id);
            if (it == by_id.end())
                throw UsageError(where + ": custom_id '" + out.custom_id +
                                 "' is not a request of this run's batches (the replies of another run or state?)");
            store::BatchRequest& b = it->second;
            if (store_.find_llm_call(b.key) || !b.error.empty()) {
                ++known;   // imported (or failed) before: never counted twice
                return;
            }
            llm::ChatRequest request = llm::request_from_json(b.request.dump());
            llm::BatchReply reply = llm::batch_reply(out, request, where);
            if (!reply.response) {
                b.error = reply.error.empty() ? "no reply" : reply.error;
                store_.fail_batch_request(b.custom_id, b.error);
                ++failed;
                if (log) log("batch request " + b.custom_id + " failed (" + b.error + "); it will be requested again");
                return;
            }
            llm::Reservation r = budget_.adopt(request, b.reserved_cost_usd, cfg_.price.has_value());
            llm::Usage counted = budget_.settle(r, reply.response->usage);
            store::LlmCall call;
            call.key = b.key;
            call.kind = b.kind;
            call.request = b.request;
            call.reply = reply.response->content;
            call.model = reply.response->model;
            call.prompt_tokens = counted.prompt_tokens;
            call.completion_tokens = counted.completion_tokens;
            call.cost_usd = counted.cost_usd;
            store_.add_llm_call(call);
            imported.prompt_tokens += counted.prompt_tokens;
            imported.completion_tokens += counted.completion_tokens;
            imported.cost_usd += counted.cost_usd;
            ++imported.calls;
            ++answered;
        });
        if (log)
            log("imported " + std::to_string(answered) + " replies from " + file +
                (failed ? ", " + std::to_string(failed) + " failed" : "") +
                (known ? ", " + std::to_string(known) + " imported before" : ""));
    }
    // What is still waiting: never asked again, and its most possible cost stays reserved.
    for (const auto& [id, b] : by_id) {
        if (!b.error.empty() || waiting_.count(b.key) || store_.find_llm_call(b.key)) continue;
        waiting_.insert(b.key);
        held_.push_back(budget_.adopt(llm::request_from_json(b.request.dump()), b.reserved_cost_usd, cfg_.price.has_value()));
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

std::string BatchMode::finish(SearchResult& result) {
    std::lock_guard<std::mutex> lock(mu_);
    result.batch_waiting = static_cast<int>(asked_.size());
    if (deferred_.empty()) return asked_.empty() ? (budget_stopped_ ? "budget" : "") : "batch";
    int number = 0;
    for (const store::BatchRequest& b : store_.batch_requests()) number = std::max(number, b.batch);
    ++number;
    const std::string path = fs::absolute(cfg_.batch_prefix + "-" + std::to_string(number) + ".jsonl").string();
    std::sort(deferred_.begin(), deferred_.end(), [](const Deferred& a, const Deferred& b) { return a.key < b.key; });
    std::string text;
    std::vector<store::BatchRequest> rows;
    for (const Deferred& d : deferred_) {
        store::BatchRequest b;
        b.custom_id = "b" + std::to_string(number) + ":" + d.key;
        b.key = d.key;
        b.batch = number;
        b.file = path;
        b.kind = d.kind;
        b.request = nlohmann::json::parse(llm::request_json(d.request));
        b.reserved_tokens = d.reservation.tokens();
        b.reserved_cost_usd = d.reservation.cost_usd;
        text += redact(llm::batch_input_line(b.custom_id, d.request, cfg_.batch_url)) + "\n";
        rows.push_back(std::move(b));
    }
    // The file first: a kill before the store knows of it only means writing the same file again.
    write_file_atomic(path, text);
    store_.add_batch(rows);
    result.batch_file = path;
    result.batch_written = static_cast<int>(rows.size());
    deferred_.clear();
    return "batch";
}

}  // namespace kevo::evolve
