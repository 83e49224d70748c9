// The token and cost caps of a run, with reservations so that requests in flight cannot overrun
// them. Used by the Client (its own caps) and by the search (caps over the stored totals, which
// survive a resume).
//
// Before a request is sent, its most possible usage is reserved:
//   prompt      one token per byte of the messages (a byte-level BPE tokenizer never makes more)
//               + kPromptOverheadTokens per message (the chat template's role markers);
//   completion  max_tokens, or kDefaultMaxTokens when the request has none (max_tokens <= 0);
//   cost        those tokens at --llm-price when given, else at the highest price per token that a
//               settled reply of this run reported (none known yet: the request waits until no
//               other request is in flight, and goes alone).
// A request is sent only when what is spent, plus what is reserved, plus its own reservation stays
// within every cap. While other requests are in flight it waits for them to settle; with none in
// flight it is refused (BudgetExceeded), naming the cap; with BudgetCaps::final_refusal (the search's
// budget) every later request is refused too, with the same message, so the run stops at that first
// refusal whatever order the requests waiting beside it wake in. A reply settles its reservation with the
// real usage. Usage a provider reports that cannot be right (negative, not finite, above
// kAbsurdTokens tokens or kAbsurdCostUsd per request) is never counted: the reservation is counted
// instead, and the log says why.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "llm/llm.h"

namespace kevo::llm {

inline constexpr int64_t kDefaultMaxTokens = 8192;
inline constexpr int64_t kPromptOverheadTokens = 16;
inline constexpr int64_t kAbsurdTokens = 100'000'000;
inline constexpr double kAbsurdCostUsd = 10'000;

// "PROMPT:COMPLETION" or "BOTH" (USD per million tokens). Throws UsageError when malformed.
Price parse_price(const std::string& spec);

// The most tokens `request` can use (see above).
int64_t max_prompt_tokens(const ChatRequest& request);
int64_t max_completion_tokens(const ChatRequest& request);
// Why `usage` cannot be counted ("" when it can).
std::string usage_problem(const Usage& usage);

struct BudgetCaps {
    int64_t max_tokens = 0;          // prompt + completion; 0: no cap
    double max_cost_usd = 0;         // 0: no cap
    std::optional<Price> price;      // bounds the cost of a request; prices replies without a cost
    bool final_refusal = false;      // a request refused with none in flight refuses every later one too
};

struct Spending {
    int64_t prompt_tokens = 0, completion_tokens = 0;
    double cost_usd = 0;
    int64_t tokens() const { return prompt_tokens + completion_tokens; }
};

class Budget;

// What one request holds until it settles. Move-only; released (nothing counted) when destroyed
// unsettled, e.g. when the request never reached the provider.
class Reservation {
public:
    Reservation() = default;
    Reservation(Reservation&& other) noexcept { *this = std::move(other); }
    Reservation& operator=(Reservation&& other) noexcept;
    ~Reservation();
    int64_t prompt_tokens = 0, completion_tokens = 0;
    double cost_usd = 0;
    bool cost_known = false;
    int64_t tokens() const { return prompt_tokens + completion_tokens; }

private:
    friend class Budget;
    Budget* budget_ = nullptr;
    bool adopted_ = false;
};

// Thread-safe.
class Budget {
public:
    explicit Budget(BudgetCaps caps = {}, LogFn log = {});
    Budget(const Budget&) = delete;
    Budget& operator=(const Budget&) = delete;

    // Counts usage spent before this process (a resumed run's stored totals).
    void add_spent(const Spending& spent);
    // A reservation for a request that is outstanding already, whatever the caps: one written into
    // a batch file by an earlier process, which the provider will answer (and charge) later. It
    // does not count as in flight (reserve() never waits for it).
    Reservation adopt(const ChatRequest& request, double cost_usd, bool cost_known);

    // Reserves the most `request` can use. With `wait`, waits while the reservation does not fit
    // but other requests are in flight; without, or with none in flight, throws BudgetExceeded.
    // Throws Cancelled once cancel() was called.
    Reservation reserve(const ChatRequest& request, bool wait = true);
    // Releases the reservation and counts the real usage instead; returns the usage counted: the
    // reported one (with the cost at the configured price when the provider reported none), or the
    // reservation when the report cannot be right.
    Usage settle(Reservation& reservation, const Usage& reported);

    // Throws BudgetExceeded, naming the cap, when what is spent reached a cap.
    void check() const;
    bool reached() const;
    // The most requests that held a reservation at once.
    int max_in_flight() const;
    void cancel();

private:
    friend class Reservation;
    void release(Reservation& reservation);
    void unreserve_locked(Reservation& reservation);
    // With mu_ held: the message of the cap `extra` would pass ("" when it fits).
    std::string overrun(int64_t extra_tokens, double extra_cost, bool cost_known) const;
    std::string reached_message() const;

    BudgetCaps caps_;
    LogFn log_;
    mutable std::mutex mu_;
    std::condition_variable cv_;
    Spending spent_, reserved_;
    int in_flight_ = 0, max_in_flight_ = 0;
    double price_seen_ = 0;          // highest cost per token a reply reported
    bool cancelled_ = false, warned_cost_unknown_ = false;
    std::string refused_;            // with caps_.final_refusal: the refusal every later request gets
};

}  // namespace kevo::llm
