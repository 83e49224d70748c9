// Client: model pick, worker pool with an in-flight limit, budget, transcript.
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <random>
#include <string>
#include <system_error>
#include <thread>

#include "common/error.h"
#include "common/process.h"
#include "llm/budget.h"
#include "llm/llm.h"
#include "common/setting_error.h"

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
                throw SettingError({settings::kLlmModel}, "{llm.model} " + spec + ": the weight must be a positive number");
            choice = {spec.substr(0, colon), weight};
        }
    }
    if (choice.name.empty()) throw SettingError({settings::kLlmModel}, "{llm.model} " + spec + ": the model name is empty");
    return choice;
}

struct Client::Impl {
    struct Job {
        ChatRequest request;
        std::promise<ChatResponse> promise;
    };

    Impl(std::shared_ptr<Provider> p, ClientConfig c)
        : provider(std::move(p)), config(std::move(c)),
          budget(BudgetCaps{config.max_total_tokens, config.max_cost_usd, config.price}, config.log),
          rng(config.seed ? *config.seed : std::random_device{}()) {}

    void worker();
    ChatResponse run(ChatRequest& request);
    std::string pick_model();
    void account(const Usage& counted, bool failed);

    std::shared_ptr<Provider> provider;
    ClientConfig config;
    Budget budget;
    std::unique_ptr<Transcript> transcript;
    mutable std::mutex mu;              // guards everything below
    std::condition_variable cv;
    std::deque<Job> queue;
    bool stopping = false;
    Totals totals;
    std::mt19937_64 rng;
    std::vector<std::thread> workers;
};

Client::Client(std::shared_ptr<Provider> provider, ClientConfig config) {
    if (config.max_in_flight < 1 || config.max_in_flight > kMaxInFlight)
        throw SettingError({settings::kLlmParallel}, "{llm.parallel}: must be from 1 to " + std::to_string(kMaxInFlight) +
                                                      ", not " + std::to_string(config.max_in_flight));
    if (config.max_total_tokens < 0 || config.max_cost_usd < 0) throw UsageError("budget caps cannot be negative");
    for (const auto& m : config.models)
        if (m.name.empty() || !(m.weight > 0)) throw UsageError("each model needs a name and a positive weight");
    impl_ = std::make_unique<Impl>(std::move(provider), std::move(config));
    if (!impl_->config.transcript.empty()) impl_->transcript = std::make_unique<Transcript>(impl_->config.transcript);
    start_workers();
}

// One thread per request in flight. A thread the system refuses (threads or memory exhausted) is a
// plain error: the threads started so far are stopped and joined, never left to std::terminate.
void Client::start_workers() {
    try {
        for (int i = 0; i < impl_->config.max_in_flight; ++i) impl_->workers.emplace_back([this] { impl_->worker(); });
    } catch (const std::system_error& e) {
        const size_t started = impl_->workers.size();
        cancel();
        for (auto& w : impl_->workers) w.join();
        impl_->workers.clear();
        throw SettingError({settings::kLlmParallel}, "{llm.parallel} " + std::to_string(impl_->config.max_in_flight) +
                                                      ": the system refused thread " + std::to_string(started + 1) +
                                                      " of them (" + e.code().message() + "); give fewer");
    }
}

Client::~Client() {
    cancel();
    for (auto& w : impl_->workers) w.join();
}

const ClientConfig& Client::config() const { return impl_->config; }

void Client::cancel() {
    std::deque<Impl::Job> dropped;
    {
        std::lock_guard<std::mutex> lock(impl_->mu);
        impl_->stopping = true;
        dropped.swap(impl_->queue);
    }
    impl_->cv.notify_all();
    impl_->budget.cancel();
    impl_->provider->cancel();
    for (auto& job : dropped) job.promise.set_exception(std::make_exception_ptr(Cancelled()));
}

std::future<ChatResponse> Client::submit(ChatRequest request) {
    Impl::Job job{std::move(request), {}};
    auto future = job.promise.get_future();
    {
        std::lock_guard<std::mutex> lock(impl_->mu);
        if (impl_->stopping) {
            job.promise.set_exception(std::make_exception_ptr(Cancelled()));
            return future;
        }
        impl_->queue.push_back(std::move(job));
    }
    impl_->cv.notify_one();
    return future;
}

void Client::Impl::worker() {
    for (;;) {
        Job job;
        {
            std::unique_lock<std::mutex> lock(mu);
            cv.wait(lock, [&] { return stopping || !queue.empty(); });
            if (queue.empty()) return;   // stopping, nothing left
            job = std::move(queue.front());
            queue.pop_front();
        }
        try {
            job.promise.set_value(run(job.request));
        } catch (...) {
            job.promise.set_exception(std::current_exception());
        }
    }
}

Totals Client::totals() const {
    std::lock_guard<std::mutex> lock(impl_->mu);
    return impl_->totals;
}

void Client::check_budget() const { impl_->budget.check(); }

int Client::max_reserved_at_once() const { return impl_->budget.max_in_flight(); }

std::string Client::Impl::pick_model() {
    if (config.models.empty()) throw LlmError("no model: the request names none and the client has none configured", false);
    std::vector<double> weights;
    for (const auto& m : config.models) weights.push_back(m.weight);
    std::discrete_distribution<size_t> pick(weights.begin(), weights.end());
    std::lock_guard<std::mutex> lock(mu);
    return config.models[pick(rng)].name;
}

void Client::Impl::account(const Usage& counted, bool failed) {
    std::lock_guard<std::mutex> lock(mu);
    ++totals.requests;
    if (failed) ++totals.failures;
    totals.prompt_tokens += counted.prompt_tokens;
    totals.completion_tokens += counted.completion_tokens;
    if (counted.cost_known) totals.cost_usd += counted.cost_usd;
    else if (!failed) ++totals.replies_without_cost;
}

ChatResponse Client::Impl::run(ChatRequest& request) {
    if (request.model.empty()) request.model = pick_model();
    Reservation reservation = budget.reserve(request);
    const auto start = std::chrono::steady_clock::now();
    auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
    try {
        ChatResponse response = provider->chat(request);
        response.usage = budget.settle(reservation, response.usage);
        account(response.usage, false);
        if (transcript) transcript->record(request, &response, nullptr, elapsed());
        return response;
    } catch (const Cancelled&) {
        throw;
    } catch (TruncatedReply& e) {
        e.response.usage = budget.settle(reservation, e.response.usage);   // the tokens were spent all the same
        account(e.response.usage, true);
        if (transcript) transcript->record(request, nullptr, &e, elapsed());
        throw;
    } catch (const LlmError& e) {
        account(budget.settle(reservation, {}), true);
        if (transcript) transcript->record(request, nullptr, &e, elapsed());
        throw;
    } catch (const std::exception& e) {
        // Providers should only throw LlmError; keep the promise anyway, without secrets.
        LlmError wrapped(redact(e.what()), false);
        account(budget.settle(reservation, {}), true);
        if (transcript) transcript->record(request, nullptr, &wrapped, elapsed());
        throw wrapped;
    }
}

}  // namespace kevo::llm
