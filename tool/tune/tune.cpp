#include "tune/tune.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <condition_variable>
#include <mutex>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "common/text.h"

namespace kevo::tune {

namespace {


bool parse_int(const std::string& t, int64_t& v) {
    if (t.empty()) return false;
    size_t used = 0;
    try {
        v = std::stoll(t, &used, 0);
    } catch (const std::exception&) {
        return false;
    }
    return used == t.size() && v >= INT32_MIN && v <= INT32_MAX;  // the macro declares an int
}

// splitmix64, seeded: the same options give the same points.
class Rng {
public:
    explicit Rng(uint64_t seed) : s_(seed ^ 0x5851f42d4c957f2dULL) {}
    uint64_t next() {
        uint64_t z = (s_ += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
    }
    double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
    size_t below(size_t n) { return static_cast<size_t>(uniform() * static_cast<double>(n)) % n; }

private:
    uint64_t s_;
};

Point point_at(const std::vector<Tunable>& t, uint64_t index) {
    Point p;
    for (auto it = t.rbegin(); it != t.rend(); ++it) {  // the last tunable varies fastest
        p[it->name] = it->values[index % it->values.size()];
        index /= it->values.size();
    }
    return p;
}

Point random_point(const std::vector<Tunable>& t, Rng& rng) {
    Point p;
    for (const auto& x : t) p[x.name] = x.values[rng.below(x.values.size())];
    return p;
}

// TPE proposal: per tunable, categorical densities of the best quarter (l) and of the rest (g),
// Laplace-smoothed; among candidates drawn from l, the unseen one with the highest prod l/g.
Point tpe_propose(const std::vector<Tunable>& t, const std::vector<Trial>& done, const std::set<Point>& seen, Rng& rng) {
    std::vector<const Trial*> order;
    for (const auto& tr : done) order.push_back(&tr);
    std::stable_sort(order.begin(), order.end(), [](const Trial* a, const Trial* b) { return a->speedup > b->speedup; });
    size_t n_good = std::max<size_t>(1, static_cast<size_t>(std::ceil(0.25 * static_cast<double>(order.size()))));
    std::map<std::string, std::map<int64_t, double>> l, g;
    for (const auto& x : t)
        for (int64_t v : x.values) l[x.name][v] = g[x.name][v] = 1.0;  // smoothing
    for (size_t i = 0; i < order.size(); ++i)
        for (const auto& [name, v] : order[i]->point) (i < n_good ? l : g)[name][v] += 1.0;
    auto sample = [&](const Tunable& x) {
        double total = 0;
        for (int64_t v : x.values) total += l[x.name][v];
        double u = rng.uniform() * total;
        for (int64_t v : x.values) {
            u -= l[x.name][v];
            if (u <= 0) return v;
        }
        return x.values.back();
    };
    auto score = [&](const Point& p) {
        double s = 0;
        for (const auto& x : t) {
            double lt = 0, gt = 0;
            for (int64_t v : x.values) lt += l[x.name][v], gt += g[x.name][v];
            s += std::log(l[x.name][p.at(x.name)] / lt) - std::log(g[x.name][p.at(x.name)] / gt);
        }
        return s;
    };
    Point best;
    double best_score = -INFINITY;
    for (int c = 0; c < 64; ++c) {
        Point p;
        for (const auto& x : t) p[x.name] = sample(x);
        if (seen.count(p)) continue;
        double s = score(p);
        if (s > best_score) best_score = s, best = p;
    }
    if (!best.empty()) return best;
    for (int c = 0; c < 1000; ++c) {  // l concentrated on seen points: any unseen one
        Point p = random_point(t, rng);
        if (!seen.count(p)) return p;
    }
    return {};
}

// One variant's trial: a compile failure, or the evaluator's verdict on the compiled variant (its
// time inside Evaluator::run added to the result's run_s and split).
Trial run_trial(const Point& point, const CompileResult& c, Evaluator& evaluator, TuneResult& res) {
    Trial tr;
    tr.point = point;
    tr.compile_s = c.seconds;
    if (!c.ok) {
        tr.status = Status::compile_error;
        tr.feedback = c.log;
        return tr;
    }
    auto r0 = std::chrono::steady_clock::now();
    Evaluation ev = evaluator.run(c);
    tr.run_wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - r0).count();
    res.run_s += tr.run_wall_s;
    res.split.add(tr.run_wall_s, ev.details);
    tr.status = ev.status;
    tr.speedup = ev.ok() ? ev.speedup : 0;
    tr.feedback = ev.feedback;
    tr.details = ev.details;
    return tr;
}

// Evaluates a batch of points: compiles on up to `jobs` threads, runs (on the calling thread) in
// order, each as soon as its compile is done; appends the trials to res.trials.
class BatchEvaluation {
public:
    BatchEvaluation(const std::vector<std::string>& sources, Evaluator& evaluator)
        : sources_(sources), evaluator_(evaluator), compiled_(sources.size()), ready_(sources.size(), 0) {}

    void run(const std::vector<Point>& batch, int jobs, TuneResult& res, const std::function<void(const Trial&)>& on_trial) {
        std::vector<std::thread> threads;
        for (int k = 0; k < std::min<int>(jobs, static_cast<int>(batch.size())); ++k) threads.emplace_back([this] { compile_some(); });
        try {
            for (size_t i = 0; i < batch.size(); ++i) {
                res.trials.push_back(run_trial(batch[i], compiled(i), evaluator_, res));
                if (on_trial) on_trial(res.trials.back());
            }
        } catch (...) {
            next_ = batch.size();  // no new compile starts; wait for those running, then pass the error on
            for (auto& t : threads) t.join();
            throw;
        }
        for (auto& t : threads) t.join();
    }

private:
    // A compile thread: takes the next source until none is left.
    void compile_some() {
        for (size_t i; (i = next_++) < sources_.size();) {
            CompileResult c;
            try {
                c = evaluator_.compile(sources_[i]);
            } catch (const std::exception& e) {
                c.ok = false;
                c.log = e.what();
            }
            std::lock_guard<std::mutex> lock(mu_);
            compiled_[i] = std::move(c);
            ready_[i] = 1;
            cv_.notify_all();
        }
    }
    // Waits for source i's compile.
    CompileResult compiled(size_t i) {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return ready_[i] != 0; });
        return compiled_[i];
    }

    const std::vector<std::string>& sources_;
    Evaluator& evaluator_;
    std::vector<CompileResult> compiled_;
    std::vector<char> ready_;
    std::mutex mu_;
    std::condition_variable cv_;
    std::atomic<size_t> next_{0};
};

// The strategy used ("auto": grid when the whole space fits in max_evals, else tpe); throws
// TuneError for an unknown one.
std::string chosen_strategy(const TuneOptions& o, uint64_t space) {
    std::string s = o.strategy == "auto" ? (space <= static_cast<uint64_t>(o.max_evals) ? "grid" : "tpe") : o.strategy;
    if (s != "grid" && s != "random" && s != "tpe")
        throw TuneError("unknown strategy '" + o.strategy + "' (expected auto, grid, random or tpe)");
    return s;
}

// The first batch after the default point (already in `first` and `seen`): grid: the space in order
// up to the budget; random: the whole budget at random; tpe: a random quarter (at least 4).
void add_first_points(const TuneResult& res, uint64_t budget, Rng& rng, std::set<Point>& seen, std::vector<Point>& first) {
    if (res.strategy == "grid") {
        for (uint64_t i = 0; i < res.space && first.size() < budget; ++i) {
            Point p = point_at(res.tunables, i);
            if (seen.insert(p).second) first.push_back(p);
        }
        return;
    }
    uint64_t initial = res.strategy == "random" ? budget : std::min<uint64_t>(budget, std::max<uint64_t>(4, budget / 4));
    while (first.size() < initial) {
        Point p = random_point(res.tunables, rng);
        if (seen.insert(p).second) first.push_back(p);
    }
}

// A TPE round of up to 4 unseen points (later proposals of a round avoid the earlier ones); empty
// when the space is exhausted. The round's points join `seen`.
std::vector<Point> tpe_round(const TuneResult& res, uint64_t budget, Rng& rng, std::set<Point>& seen) {
    std::vector<Point> batch;
    std::set<Point> pending = seen;
    size_t round = std::min<uint64_t>(4, budget - res.trials.size());
    while (batch.size() < round) {
        Point p = tpe_propose(res.tunables, res.trials, pending, rng);
        if (p.empty()) break;
        pending.insert(p);
        batch.push_back(p);
    }
    for (const auto& p : batch) seen.insert(p);
    return batch;
}

// res.best: the strictly fastest correct trial (a tie keeps the earlier, the default first), and
// the source with its values.
void pick_best(const std::string& source, TuneResult& res) {
    for (size_t i = 0; i < res.trials.size(); ++i)
        if (res.trials[i].status == Status::ok && (res.best < 0 || res.trials[i].speedup > res.trials[static_cast<size_t>(res.best)].speedup))
            res.best = static_cast<int>(i);
    res.best_source = res.best >= 0 ? with_values(source, res.tunables, res.trials[static_cast<size_t>(res.best)].point) : source;
}

}  // namespace

std::vector<Tunable> parse_tunables(const std::string& source) {
    static const std::regex decl(R"(KEVO_TUNABLE\s*\(([^()]*)\))");
    const std::string masked = blank_comments_and_literals(source);
    std::vector<Tunable> out;
    for (auto it = std::sregex_iterator(masked.begin(), masked.end(), decl); it != std::sregex_iterator(); ++it) {
        const std::smatch& m = *it;
        size_t line_start = masked.rfind('\n', static_cast<size_t>(m.position(0)));
        line_start = line_start == std::string::npos ? 0 : line_start + 1;
        if (masked.substr(line_start, static_cast<size_t>(m.position(0)) - line_start).find("#define") != std::string::npos) continue;
        const std::string args = m[1].str();
        const size_t args_at = static_cast<size_t>(m.position(1));
        std::vector<std::pair<size_t, std::string>> parts;  // (offset in args, text)
        size_t from = 0;
        for (size_t k = 0; k <= args.size(); ++k)
            if (k == args.size() || args[k] == ',') {
                parts.push_back({from, args.substr(from, k - from)});
                from = k + 1;
            }
        const std::string where = "KEVO_TUNABLE(" + args + ")";
        if (parts.size() != 3) throw TuneError(where + ": expected KEVO_TUNABLE(NAME, DEFAULT, V1 V2 ...)");
        auto trim = [](const std::string& s, size_t& lead) {
            size_t a = s.find_first_not_of(" \t\r\n"), b = s.find_last_not_of(" \t\r\n");
            lead = a == std::string::npos ? 0 : a;
            return a == std::string::npos ? std::string() : s.substr(a, b - a + 1);
        };
        Tunable t;
        size_t lead = 0;
        t.name = trim(parts[0].second, lead);
        if (!std::regex_match(t.name, std::regex(R"([A-Za-z_]\w*)"))) throw TuneError(where + ": '" + t.name + "' is not a C identifier");
        std::string def = trim(parts[1].second, lead);
        if (!parse_int(def, t.default_value)) throw TuneError(where + ": the default '" + def + "' is not an integer");
        t.offset = args_at + parts[1].first + lead;
        t.length = def.size();
        std::istringstream vs(parts[2].second);
        std::string v;
        std::set<int64_t> uniq;
        while (vs >> v) {
            int64_t x;
            if (!parse_int(v, x)) throw TuneError(where + ": the value '" + v + "' is not an integer (values are space-separated)");
            if (uniq.insert(x).second) t.values.push_back(x);
        }
        if (t.values.empty()) throw TuneError(where + ": no values to try");
        if (!uniq.count(t.default_value))
            throw TuneError(where + ": the default " + std::to_string(t.default_value) + " is not among the values");
        for (const auto& o : out)
            if (o.name == t.name) throw TuneError(where + ": " + t.name + " is declared twice");
        out.push_back(t);
    }
    return out;
}

std::string with_values(const std::string& source, const std::vector<Tunable>& tunables, const Point& point) {
    std::string out = source;
    // Back to front, so earlier offsets stay valid.
    std::vector<const Tunable*> order;
    for (const auto& t : tunables) order.push_back(&t);
    std::sort(order.begin(), order.end(), [](const Tunable* a, const Tunable* b) { return a->offset > b->offset; });
    for (const Tunable* t : order) {
        auto it = point.find(t->name);
        if (it != point.end()) out.replace(t->offset, t->length, std::to_string(it->second));
    }
    return out;
}

Point default_point(const std::vector<Tunable>& tunables) {
    Point p;
    for (const auto& t : tunables) p[t.name] = t.default_value;
    return p;
}

uint64_t space_size(const std::vector<Tunable>& tunables) {
    uint64_t n = 1;
    for (const auto& t : tunables) n = n > (UINT64_MAX / t.values.size()) ? UINT64_MAX : n * t.values.size();
    return n;
}

std::string point_text(const Point& point) {
    std::string s;
    for (const auto& [k, v] : point) s += (s.empty() ? "" : " ") + k + "=" + std::to_string(v);
    return s;
}

void RunTimeSplit::add(double wall, const nlohmann::json& d) {
    auto num = [&](const char* k) {
        auto it = d.is_object() ? d.find(k) : d.end();
        return it != d.end() && it->is_number() ? it->get<double>() : 0.0;
    };
    const double lock = num("gpu_lock_wait_s"), job = num("run_s"), ann = num("annotate_s");
    ++points;
    wall_s += wall;
    lock_wait_s += lock;
    job_s += job;
    annotate_s += ann;
    other_s += std::max(0.0, wall - lock - job - ann);
}

nlohmann::json RunTimeSplit::to_json() const {
    return {{"points", points}, {"wall_s", wall_s}, {"lock_wait_s", lock_wait_s}, {"job_s", job_s}, {"annotate_s", annotate_s}, {"other_s", other_s}};
}

std::string RunTimeSplit::text() const {
    const double n = points > 0 ? static_cast<double>(points) : 1.0;
    char b[256];
    std::snprintf(b, sizeof b, "per point: %.3f s wall = %.3f s judge job + %.3f s GPU lock wait + %.3f s annotation + %.3f s other (hash check, set-up)",
                  wall_s / n, job_s / n, lock_wait_s / n, annotate_s / n, other_s / n);
    return b;
}

nlohmann::json TuneResult::to_json() const {
    nlohmann::json t = nlohmann::json::array();
    for (const auto& x : tunables) t.push_back({{"name", x.name}, {"default", x.default_value}, {"values", x.values}});
    nlohmann::json tr = nlohmann::json::array();
    for (const auto& x : trials)
        tr.push_back({{"point", x.point}, {"status", status_name(x.status)}, {"speedup", x.speedup}, {"compile_s", x.compile_s},
                      {"run_wall_s", x.run_wall_s}});
    nlohmann::json j{{"tunables", t}, {"strategy", strategy}, {"space", space}, {"trials", tr},
                     {"wall_s", wall_s}, {"run_s", run_s}, {"run_split", split.to_json()}};
    if (const Trial* b = best_trial()) {
        j["best"] = b->point;
        j["best_speedup"] = b->speedup;
        j["default_speedup"] = trials.empty() ? 0.0 : trials[0].speedup;
    }
    return j;
}

TuneResult tune(const std::string& source, Evaluator& evaluator, const TuneOptions& o,
                const std::function<void(const Trial&)>& on_trial) {
    auto t0 = std::chrono::steady_clock::now();
    TuneResult res;
    res.tunables = parse_tunables(source);
    if (res.tunables.empty())
        throw TuneError("the kernel declares no tunable parameter (add e.g. KEVO_TUNABLE(BLOCK, 256, 64 128 256 512))");
    if (o.max_evals < 1) throw SettingError({settings::kMaxEvals}, "{tune.max_evals} must be at least 1, not " + std::to_string(o.max_evals));
    res.space = space_size(res.tunables);
    const uint64_t budget = std::min<uint64_t>(res.space, static_cast<uint64_t>(o.max_evals));
    res.strategy = chosen_strategy(o, res.space);
    const int jobs = o.compile_jobs > 0 ? o.compile_jobs : std::max(1u, std::thread::hardware_concurrency());
    Rng rng(o.seed);
    auto evaluate = [&](const std::vector<Point>& batch) {
        std::vector<std::string> sources(batch.size());
        for (size_t i = 0; i < batch.size(); ++i) sources[i] = with_values(source, res.tunables, batch[i]);
        BatchEvaluation(sources, evaluator).run(batch, jobs, res, on_trial);
    };

    const Point def = default_point(res.tunables);
    std::vector<Point> first = {def};
    std::set<Point> seen = {def};
    add_first_points(res, budget, rng, seen, first);
    evaluate(first);
    while (res.strategy == "tpe" && res.trials.size() < budget) {
        std::vector<Point> batch = tpe_round(res, budget, rng, seen);
        if (batch.empty()) break;
        evaluate(batch);
    }
    pick_best(source, res);
    res.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return res;
}

}  // namespace kevo::tune
