// Client: model pick, worker pool with an in-flight limit, budget, transcript.
#include <chrono>
#include <cmath>
#include <cstdio>

#include "common/error.h"
#include "common/process.h"
#include "llm/llm.h"

namespace kevo::llm {

ModelChoice parse_model_choice(const std::string& spec) {
    ModelChoice choice{spec, 1};
    size_t colon = spec.rfind(':');
    if (colon != std::string::npos) {
        std::string tail = spec.substr(colon + 1);
        char* end = nullptr;
        double weight = std::strtod(tail.c_str(), &end);
        if (!tail.empty() && end == tail.c_str() + tail.size()) {
            if (!(weight > 0) || !std::isfinite(weight))
                throw UsageError("--model " + spec + ": the weight must be a positive number");
            choice = {spec.substr(0, colon), weight};
        }
    }
    if (choice.name.empty()) throw UsageError("--model " + spec + ": the model name is empty");
    return choice;
}

Client::Client(std::shared_ptr<Provider> provider, ClientConfig config)
    : provider_(std::move(provider)), config_(std::move(config)),
      rng_(config_.seed ? *config_.seed : std::random_device{}()) {
    if (config_.max_in_flight < 1) throw UsageError("the LLM in-flight limit must be at least 1");
    if (config_.max_total_tokens < 0 || config_.max_cost_usd < 0) throw UsageError("budget caps cannot be negative");
    for (const auto& m : config_.models)
        if (m.name.empty() || !(m.weight > 0)) throw UsageError("each model needs a name and a positive weight");
    if (!config_.transcript.empty()) transcript_ = std::make_unique<Transcript>(config_.transcript);
    for (int i = 0; i < config_.max_in_flight; ++i) workers_.emplace_back([this] { worker(); });
}

Client::~Client() {
    cancel();
    for (auto& w : workers_) w.join();
}

void Client::cancel() {
    std::deque<Job> dropped;
    {
        std::lock_guard<std::mutex> lock(mu_);
        stopping_ = true;
        dropped.swap(queue_);
    }
    cv_.notify_all();
    provider_->cancel();
    for (auto& job : dropped) job.promise.set_exception(std::make_exception_ptr(Cancelled()));
}

std::future<ChatResponse> Client::submit(ChatRequest request) {
    Job job{std::move(request), {}};
    auto future = job.promise.get_future();
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (stopping_) {
            job.promise.set_exception(std::make_exception_ptr(Cancelled()));
            return future;
        }
        queue_.push_back(std::move(job));
    }
    cv_.notify_one();
    return future;
}

void Client::worker() {
    for (;;) {
        Job job;
        {
            std::unique_lock<std::mutex> lock(mu_);
            cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
            if (queue_.empty()) return;   // stopping, nothing left
            job = std::move(queue_.front());
            queue_.pop_front();
        }
        try {
            job.promise.set_value(run(job.request));
        } catch (...) {
            job.promise.set_exception(std::current_exception());
        }
    }
}

Totals Client::totals() const {
    std::lock_guard<std::mutex> lock(mu_);
    return totals_;
}

void Client::check_budget() const {
    Totals t = totals();
    char buf[256];
    if (config_.max_total_tokens > 0 && t.total_tokens() >= config_.max_total_tokens) {
        std::snprintf(buf, sizeof buf,
                      "token budget reached: %lld of %lld tokens used (--budget-tokens); no new LLM request is sent",
                      static_cast<long long>(t.total_tokens()), static_cast<long long>(config_.max_total_tokens));
        throw BudgetExceeded(buf);
    }
    if (config_.max_cost_usd > 0 && t.cost_usd >= config_.max_cost_usd) {
        std::snprintf(buf, sizeof buf,
                      "cost budget reached: $%.4f of $%.4f spent (--budget-usd); no new LLM request is sent",
                      t.cost_usd, config_.max_cost_usd);
        throw BudgetExceeded(buf);
    }
}

std::string Client::pick_model() {
    if (config_.models.empty()) throw LlmError("no model: the request names none and no --model was configured", false);
    std::vector<double> weights;
    for (const auto& m : config_.models) weights.push_back(m.weight);
    std::discrete_distribution<size_t> pick(weights.begin(), weights.end());
    std::lock_guard<std::mutex> lock(mu_);
    return config_.models[pick(rng_)].name;
}

void Client::account(const Usage& usage, bool failed) {
    bool warn = false;
    {
        std::lock_guard<std::mutex> lock(mu_);
        ++totals_.requests;
        if (failed) ++totals_.failures;
        totals_.prompt_tokens += usage.prompt_tokens;
        totals_.completion_tokens += usage.completion_tokens;
        if (usage.cost_known) totals_.cost_usd += usage.cost_usd;
        else if (!failed) {
            ++totals_.replies_without_cost;
            warn = config_.max_cost_usd > 0 && !warned_cost_unknown_;
            if (warn) warned_cost_unknown_ = true;
        }
    }
    if (warn && config_.log)
        config_.log("warning: the LLM provider does not report costs; the cost cap (--budget-usd) only counts "
                    "replies that report one, the token cap (--budget-tokens) still applies");
}

ChatResponse Client::run(ChatRequest& request) {
    if (request.model.empty()) request.model = pick_model();
    check_budget();
    const auto start = std::chrono::steady_clock::now();
    auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
    try {
        ChatResponse response = provider_->chat(request);
        account(response.usage, false);
        if (transcript_) transcript_->record(request, &response, nullptr, elapsed());
        return response;
    } catch (const Cancelled&) {
        throw;
    } catch (const TruncatedReply& e) {
        account(e.response.usage, true);   // the tokens were spent all the same
        if (transcript_) transcript_->record(request, nullptr, &e, elapsed());
        throw;
    } catch (const LlmError& e) {
        account({}, true);
        if (transcript_) transcript_->record(request, nullptr, &e, elapsed());
        throw;
    } catch (const std::exception& e) {
        // Providers should only throw LlmError; keep the promise anyway, without secrets.
        LlmError wrapped(redact(e.what()), false);
        account({}, true);
        if (transcript_) transcript_->record(request, nullptr, &wrapped, elapsed());
        throw wrapped;
    }
}

}  // namespace kevo::llm
