// Budget: caps, reservations for requests in flight, and settling with the real usage.
#include "llm/budget.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "common/error.h"
#include "common/setting_error.h"

namespace kevo::llm {
namespace {

std::string tokens_text(int64_t n) { return std::to_string(n); }

std::string usd(double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "$%.4f", v);
    return buf;
}

}  // namespace

Price parse_price(const std::string& spec) {
    auto number = [&](const std::string& s) {
        char* end = nullptr;
        double v = std::strtod(s.c_str(), &end);
        if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(v) || v < 0)
            throw SettingError({settings::kLlmPrice}, "{llm.price} " + spec +
                             ": expected PROMPT:COMPLETION or one price, in USD per million tokens (e.g. 0.30:2.50)");
        return v;
    };
    size_t colon = spec.find(':');
    if (colon == std::string::npos) {
        double v = number(spec);
        return {v, v};
    }
    return {number(spec.substr(0, colon)), number(spec.substr(colon + 1))};
}

int64_t max_prompt_tokens(const ChatRequest& request) {
    int64_t n = 0;
    for (const auto& m : request.messages)
        n += static_cast<int64_t>(m.content.size() + m.role.size()) + kPromptOverheadTokens;
    return n;
}

int64_t max_completion_tokens(const ChatRequest& request) {
    return request.max_tokens > 0 ? request.max_tokens : kDefaultMaxTokens;
}

std::string usage_problem(const Usage& u) {
    if (u.prompt_tokens < 0 || u.completion_tokens < 0)
        return "token counts that are negative or not whole numbers (prompt " + std::to_string(u.prompt_tokens) +
               ", completion " + std::to_string(u.completion_tokens) + ")";
    if (u.prompt_tokens > kAbsurdTokens || u.completion_tokens > kAbsurdTokens)
        return "more than " + std::to_string(kAbsurdTokens) + " tokens for one request (prompt " +
               std::to_string(u.prompt_tokens) + ", completion " + std::to_string(u.completion_tokens) + ")";
    if (u.cost_known && !(std::isfinite(u.cost_usd) && u.cost_usd >= 0)) return "a negative or non-finite cost";
    if (u.cost_known && u.cost_usd > kAbsurdCostUsd)
        return "a cost of " + usd(u.cost_usd) + " for one request (more than " + usd(kAbsurdCostUsd) + ")";
    return "";
}

Reservation& Reservation::operator=(Reservation&& other) noexcept {
    if (this != &other) {
        if (budget_) budget_->release(*this);
        prompt_tokens = other.prompt_tokens;
        completion_tokens = other.completion_tokens;
        cost_usd = other.cost_usd;
        cost_known = other.cost_known;
        budget_ = other.budget_;
        adopted_ = other.adopted_;
        other.budget_ = nullptr;
    }
    return *this;
}

Reservation::~Reservation() {
    if (budget_) budget_->release(*this);
}

Budget::Budget(BudgetCaps caps, LogFn log) : caps_(caps), log_(std::move(log)) {
    if (caps_.max_tokens < 0 || caps_.max_cost_usd < 0 || !std::isfinite(caps_.max_cost_usd))
        throw UsageError("budget caps cannot be negative");
}

void Budget::add_spent(const Spending& s) {
    std::lock_guard<std::mutex> lock(mu_);
    spent_.prompt_tokens += s.prompt_tokens;
    spent_.completion_tokens += s.completion_tokens;
    spent_.cost_usd += s.cost_usd;
}

Reservation Budget::adopt(const ChatRequest& request, double cost_usd, bool cost_known) {
    Reservation r;
    r.prompt_tokens = max_prompt_tokens(request);
    r.completion_tokens = max_completion_tokens(request);
    r.cost_usd = cost_usd;
    r.cost_known = cost_known;
    r.budget_ = this;
    r.adopted_ = true;
    std::lock_guard<std::mutex> lock(mu_);
    reserved_.prompt_tokens += r.prompt_tokens;
    reserved_.completion_tokens += r.completion_tokens;
    reserved_.cost_usd += cost_usd;
    return r;
}

std::string Budget::reached_message() const {
    char buf[256];
    if (caps_.max_tokens > 0 && spent_.tokens() >= caps_.max_tokens) {
        std::snprintf(buf, sizeof buf,
                      "token budget reached: %lld of %lld tokens used (%s); no new LLM request is sent",
                      static_cast<long long>(spent_.tokens()), static_cast<long long>(caps_.max_tokens),
                      named("{stopping.budget_tokens}").c_str());
        return buf;
    }
    if (caps_.max_cost_usd > 0 && spent_.cost_usd >= caps_.max_cost_usd) {
        std::snprintf(buf, sizeof buf,
                      "cost budget reached: $%.4f of $%.4f spent (%s); no new LLM request is sent",
                      spent_.cost_usd, caps_.max_cost_usd, named("{stopping.budget_usd}").c_str());
        return buf;
    }
    return "";
}

std::string Budget::overrun(int64_t extra_tokens, double extra_cost, bool cost_known) const {
    if (caps_.max_tokens > 0 && spent_.tokens() + reserved_.tokens() + extra_tokens > caps_.max_tokens)
        return named("token budget: " + tokens_text(spent_.tokens()) + " tokens used and " +
                     tokens_text(reserved_.tokens()) + " reserved for requests in flight of " +
                     tokens_text(caps_.max_tokens) + " ({stopping.budget_tokens}); the next request may use up to " +
                     tokens_text(extra_tokens) + " (its prompt, one token per byte, plus {requests.max_tokens}), so "
                     "it is not sent");
    if (caps_.max_cost_usd > 0 && cost_known && spent_.cost_usd + reserved_.cost_usd + extra_cost > caps_.max_cost_usd)
        return named("cost budget: " + usd(spent_.cost_usd) + " spent and " + usd(reserved_.cost_usd) +
                     " reserved for requests in flight of " + usd(caps_.max_cost_usd) +
                     " ({stopping.budget_usd}); the next request may cost up to " + usd(extra_cost) +
                     ", so it is not sent");
    return "";
}

Reservation Budget::reserve(const ChatRequest& request, bool wait) {
    const int64_t prompt = max_prompt_tokens(request), completion = max_completion_tokens(request);
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
        if (cancelled_) throw Cancelled();
        if (!refused_.empty()) throw BudgetExceeded(refused_);
        if (std::string reached = reached_message(); !reached.empty()) throw BudgetExceeded(reached);
        double cost = 0;
        bool known = true;
        if (caps_.price) cost = caps_.price->cost(prompt, completion);
        else if (price_seen_ > 0) cost = price_seen_ * static_cast<double>(prompt + completion);
        else known = false;
        // A cost cap without any known price: the request goes alone, so that at most one request
        // of unknown cost is ever outstanding.
        const bool must_go_alone = caps_.max_cost_usd > 0 && !known;
        std::string why = overrun(prompt + completion, cost, known);
        if (why.empty() && !(must_go_alone && in_flight_ > 0)) {
            Reservation r;
            r.prompt_tokens = prompt;
            r.completion_tokens = completion;
            r.cost_usd = cost;
            r.cost_known = known;
            r.budget_ = this;
            reserved_.prompt_tokens += prompt;
            reserved_.completion_tokens += completion;
            reserved_.cost_usd += cost;
            max_in_flight_ = std::max(max_in_flight_, ++in_flight_);
            return r;
        }
        if (!wait || in_flight_ == 0) {
            if (why.empty())
                why = named("cost budget: no price per token is known yet (pass {llm.price}), so the request "
                            "waits for the one in flight");
            if (caps_.final_refusal && wait) refused_ = why;  // (wait: none in flight, the run stops here)
            throw BudgetExceeded(why);
        }
        cv_.wait(lock);
    }
}

void Budget::unreserve_locked(Reservation& r) {
    if (!r.budget_) return;
    reserved_.prompt_tokens -= r.prompt_tokens;
    reserved_.completion_tokens -= r.completion_tokens;
    reserved_.cost_usd -= r.cost_usd;
    if (!r.adopted_) --in_flight_;
    r.budget_ = nullptr;
}

void Budget::release(Reservation& r) {
    {
        std::lock_guard<std::mutex> lock(mu_);
        unreserve_locked(r);
    }
    cv_.notify_all();
}

Usage Budget::settle(Reservation& r, const Usage& reported) {
    Usage counted = reported;
    std::string note;
    if (std::string problem = usage_problem(reported); !problem.empty()) {
        counted.prompt_tokens = r.prompt_tokens;
        counted.completion_tokens = r.completion_tokens;
        counted.cost_usd = r.cost_usd;
        counted.cost_known = r.cost_known;
        note = "ignored the usage the LLM provider reported (" + problem + "); counting the request's reserved "
               "maximum instead: " + tokens_text(r.tokens()) + " tokens" + (r.cost_known ? ", " + usd(r.cost_usd) : "");
    } else if (!counted.cost_known && caps_.price) {
        counted.cost_usd = caps_.price->cost(counted.prompt_tokens, counted.completion_tokens);
        counted.cost_known = true;
    }
    bool warn_cost = false;
    {
        // One step: a waiting request sees the reservation gone and the usage counted together.
        std::lock_guard<std::mutex> lock(mu_);
        unreserve_locked(r);
        spent_.prompt_tokens += counted.prompt_tokens;
        spent_.completion_tokens += counted.completion_tokens;
        if (counted.cost_known) spent_.cost_usd += counted.cost_usd;
        const int64_t tokens = counted.prompt_tokens + counted.completion_tokens;
        if (note.empty() && reported.cost_known && tokens > 0)
            price_seen_ = std::max(price_seen_, counted.cost_usd / static_cast<double>(tokens));
        if (!counted.cost_known && caps_.max_cost_usd > 0 && !warned_cost_unknown_) warn_cost = warned_cost_unknown_ = true;
    }
    cv_.notify_all();
    if (log_ && !note.empty()) log_(note);
    if (log_ && warn_cost)
        log_(named("warning: the LLM provider does not report costs; the cost cap ({stopping.budget_usd}) only "
                   "counts replies that report one (or pass {llm.price}), the token cap ({stopping.budget_tokens}) "
                   "still applies"));
    return counted;
}

void Budget::check() const {
    std::lock_guard<std::mutex> lock(mu_);
    if (std::string reached = reached_message(); !reached.empty()) throw BudgetExceeded(reached);
}

bool Budget::reached() const {
    std::lock_guard<std::mutex> lock(mu_);
    return !reached_message().empty();
}

int Budget::max_in_flight() const {
    std::lock_guard<std::mutex> lock(mu_);
    return max_in_flight_;
}

void Budget::cancel() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        cancelled_ = true;
    }
    cv_.notify_all();
}

}  // namespace kevo::llm
