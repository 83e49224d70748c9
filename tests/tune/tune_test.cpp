// The tuner: KEVO_TUNABLE parsing and rewriting, and the grid, random and TPE strategies against a
// scripted evaluator whose speedup is a known function of the tunables' values.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <mutex>
#include <set>
#include <thread>

#include "tune/tune.h"

using namespace kevo;
using namespace kevo::tune;

namespace {

std::string kernel(const std::string& decls) {
    return "#include <kernelevo/abi.h>\n"
           "// KEVO_TUNABLE(COMMENTED, 1, 1 2) is a comment, not a tunable\n"
           "#define KEVO_TUNABLE_NOTE \"KEVO_TUNABLE(IN_STRING, 1, 1 2)\"\n" +
           decls +
           "__global__ void k(float* y) { y[threadIdx.x] = BLOCK; }\n"
           "extern \"C\" int kevo_forward(const kevo_tensor*, int, kevo_tensor* out, int, cudaStream_t s) {\n"
           "  k<<<1, BLOCK, 0, s>>>((float*)out[0].data); return 0; }\n";
}

// Speedup = f(point) of the variant's declared defaults; compiles take a while (to see them overlap).
class FnEvaluator : public Evaluator {
public:
    explicit FnEvaluator(std::function<double(const Point&)> f) : f_(std::move(f)) {}
    DeviceInfo device() override { return {}; }
    std::string arch() override { return "sm_90"; }
    CompileResult compile(const std::string& source) override {
        int now = ++compiling_;
        int seen = max_compiling_.load();
        while (now > seen && !max_compiling_.compare_exchange_weak(seen, now)) {
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        --compiling_;
        CompileResult r;
        Point p = default_point(parse_tunables(source));
        std::lock_guard<std::mutex> lock(mu_);
        if (f_(p) < 0) {  // a value that does not build
            r.log = "error: too many resources requested";
            return r;
        }
        r.ok = true;
        r.source_hash = std::to_string(sources_.size());
        sources_.push_back(source);
        return r;
    }
    Evaluation run(const CompileResult& c) override {
        if (running_++ > 0) overlapped_ = true;
        std::string source;
        {
            std::lock_guard<std::mutex> lock(mu_);
            source = sources_.at(std::stoul(c.source_hash));
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        Point p = default_point(parse_tunables(source));
        Evaluation e;
        e.status = Status::ok;
        e.speedup = f_(p);
        e.details = {{"gpu_lock_wait_s", 0.0005}, {"run_s", 0.001}, {"annotate_s", 0.0002}};  // as the validator reports them
        runs.push_back(p);
        --running_;
        return e;
    }
    std::vector<Point> runs;
    std::atomic<int> max_compiling_{0};
    std::atomic<bool> overlapped_{false};

private:
    std::function<double(const Point&)> f_;
    std::mutex mu_;
    std::vector<std::string> sources_;
    std::atomic<int> compiling_{0}, running_{0};
};

// A smooth landscape with one optimum at BLOCK=256, UNROLL=4 (and a slightly worse default).
double landscape(const Point& p) {
    double b = std::log2(static_cast<double>(p.at("BLOCK"))) - 8, u = std::log2(static_cast<double>(p.at("UNROLL"))) - 2;
    return 3.0 - 0.3 * b * b - 0.2 * u * u;
}

}  // namespace

TEST(Tunables, ParseOutsideCommentsAndStrings) {
    std::string src = kernel("KEVO_TUNABLE(BLOCK, 128, 64 128 256 512)\nvoid f() { KEVO_TUNABLE( UNROLL ,  -2 , -2 1 0x4 ); }\n");
    auto t = parse_tunables(src);
    ASSERT_EQ(t.size(), 2u);
    EXPECT_EQ(t[0].name, "BLOCK");
    EXPECT_EQ(t[0].default_value, 128);
    EXPECT_EQ(t[0].values, (std::vector<int64_t>{64, 128, 256, 512}));
    EXPECT_EQ(src.substr(t[0].offset, t[0].length), "128");
    EXPECT_EQ(t[1].name, "UNROLL");
    EXPECT_EQ(t[1].values, (std::vector<int64_t>{-2, 1, 4}));
    EXPECT_EQ(space_size(t), 12u);
    std::string v = with_values(src, t, {{"BLOCK", 512}, {"UNROLL", 4}});
    EXPECT_NE(v.find("KEVO_TUNABLE(BLOCK, 512, 64 128 256 512)"), std::string::npos);
    EXPECT_NE(v.find("KEVO_TUNABLE( UNROLL ,  4 , -2 1 0x4 )"), std::string::npos);
    EXPECT_EQ(default_point(parse_tunables(v)), (Point{{"BLOCK", 512}, {"UNROLL", 4}}));
    EXPECT_EQ(point_text({{"BLOCK", 512}, {"UNROLL", 4}}), "BLOCK=512 UNROLL=4");
    EXPECT_TRUE(parse_tunables("__global__ void k() {}").empty());
}

TEST(Tunables, MalformedDeclarationsSayWhat) {
    auto error = [](const std::string& decl) {
        try {
            parse_tunables(decl);
        } catch (const TuneError& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    EXPECT_NE(error("KEVO_TUNABLE(B, 100, 64 128)").find("the default 100 is not among the values"), std::string::npos);
    EXPECT_NE(error("KEVO_TUNABLE(B, 64, 64, 128)").find("expected KEVO_TUNABLE(NAME, DEFAULT, V1 V2 ...)"), std::string::npos);
    EXPECT_NE(error("KEVO_TUNABLE(B, 64, 64 big)").find("'big' is not an integer"), std::string::npos);
    EXPECT_NE(error("KEVO_TUNABLE(B, 6.5, 64)").find("the default '6.5' is not an integer"), std::string::npos);
    EXPECT_NE(error("KEVO_TUNABLE(B, 64, )").find("no values"), std::string::npos);
    EXPECT_NE(error("KEVO_TUNABLE(2B, 64, 64)").find("not a C identifier"), std::string::npos);
    EXPECT_NE(error("KEVO_TUNABLE(B, 64, 64)\nKEVO_TUNABLE(B, 1, 1)").find("declared twice"), std::string::npos);
    EXPECT_NE(error("KEVO_TUNABLE(B, 64, 64 99999999999)").find("not an integer"), std::string::npos);
}

TEST(Tune, GridTriesEveryPointOnceAndFindsTheBest) {
    FnEvaluator ev(landscape);
    std::string src = kernel("KEVO_TUNABLE(BLOCK, 128, 64 128 256 512)\nKEVO_TUNABLE(UNROLL, 1, 1 2 4 8)\n");
    TuneOptions o;
    o.compile_jobs = 4;
    int seen = 0;
    TuneResult r = tune::tune(src, ev, o, [&](const Trial&) { ++seen; });
    EXPECT_EQ(r.strategy, "grid");
    EXPECT_EQ(r.space, 16u);
    ASSERT_EQ(r.trials.size(), 16u);  // a 16-point space costs 16 runs
    EXPECT_EQ(seen, 16);
    EXPECT_EQ(r.trials[0].point, (Point{{"BLOCK", 128}, {"UNROLL", 1}}));  // the default first
    EXPECT_EQ(std::set<Point>(ev.runs.begin(), ev.runs.end()).size(), 16u);
    ASSERT_NE(r.best_trial(), nullptr);
    EXPECT_EQ(r.best_trial()->point, (Point{{"BLOCK", 256}, {"UNROLL", 4}}));
    EXPECT_DOUBLE_EQ(r.best_trial()->speedup, 3.0);
    EXPECT_NE(r.best_source.find("KEVO_TUNABLE(BLOCK, 256,"), std::string::npos);
    EXPECT_NE(r.best_source.find("KEVO_TUNABLE(UNROLL, 4,"), std::string::npos);
    EXPECT_GT(ev.max_compiling_.load(), 1);  // compiles overlapped
    EXPECT_FALSE(ev.overlapped_);          // runs never did
    nlohmann::json j = r.to_json();
    EXPECT_EQ(j["best"], nlohmann::json({{"BLOCK", 256}, {"UNROLL", 4}}));
    EXPECT_EQ(j["trials"].size(), 16u);
}

TEST(Tune, FailingVariantsAreSkippedAndTiesKeepTheDefault) {
    // BLOCK=512 does not compile; every other point is equally fast.
    FnEvaluator ev([](const Point& p) { return p.at("BLOCK") == 512 ? -1.0 : 2.0; });
    TuneResult r = tune::tune(kernel("KEVO_TUNABLE(BLOCK, 128, 64 128 256 512)\n"), ev, TuneOptions{});
    ASSERT_EQ(r.trials.size(), 4u);
    int failed = 0;
    for (const auto& t : r.trials) failed += t.status == Status::compile_error;
    EXPECT_EQ(failed, 1);
    EXPECT_EQ(r.best, 0);
    EXPECT_EQ(r.best_trial()->point.at("BLOCK"), 128);
}

TEST(Tune, RandomDrawsDistinctPointsWithinTheBudget) {
    FnEvaluator ev(landscape);
    std::string src = kernel("KEVO_TUNABLE(BLOCK, 128, 32 64 128 256 512 1024 2048 4096)\nKEVO_TUNABLE(UNROLL, 1, 1 2 4 8 16 32 64 128)\n");
    TuneOptions o;
    o.strategy = "random";
    o.max_evals = 10;
    o.seed = 7;
    TuneResult r = tune::tune(src, ev, o);
    ASSERT_EQ(r.trials.size(), 10u);
    std::set<Point> points;
    for (const auto& t : r.trials) points.insert(t.point);
    EXPECT_EQ(points.size(), 10u);
    EXPECT_EQ(r.trials[0].point, (Point{{"BLOCK", 128}, {"UNROLL", 1}}));
    FnEvaluator again(landscape);
    TuneResult r2 = tune::tune(src, again, o);  // the same seed: the same points
    for (size_t i = 0; i < r.trials.size(); ++i) EXPECT_EQ(r2.trials[i].point, r.trials[i].point);
}

TEST(Tune, TpeFindsTheOptimumOfALargeSpaceWithFewEvaluations) {
    std::string src = kernel("KEVO_TUNABLE(BLOCK, 32, 32 64 128 256 512 1024 2048 4096)\nKEVO_TUNABLE(UNROLL, 1, 1 2 4 8 16 32 64 128)\n");
    int found = 0;
    double tpe_sum = 0, random_sum = 0;
    for (uint64_t seed = 1; seed <= 6; ++seed) {
        TuneOptions o;
        o.max_evals = 20;  // of 64 points
        o.seed = seed;
        FnEvaluator ev(landscape);
        TuneResult r = tune::tune(src, ev, o);
        EXPECT_EQ(r.strategy, "tpe");  // auto on a space larger than the budget
        EXPECT_EQ(r.trials.size(), 20u);
        found += r.best_trial()->speedup == 3.0;
        tpe_sum += r.best_trial()->speedup;
        o.strategy = "random";
        FnEvaluator ev2(landscape);
        random_sum += tune::tune(src, ev2, o).best_trial()->speedup;
    }
    EXPECT_GE(found, 4) << "TPE found the optimum in " << found << " of 6 runs";
    EXPECT_GT(tpe_sum, random_sum);
}

TEST(Tune, BadInputIsATuneError) {
    FnEvaluator ev(landscape);
    EXPECT_THROW(tune::tune("__global__ void k() {}", ev, TuneOptions{}), TuneError);
    TuneOptions o;
    o.strategy = "annealing";
    EXPECT_THROW(tune::tune(kernel("KEVO_TUNABLE(BLOCK, 128, 64 128)\n"), ev, o), TuneError);
    o = TuneOptions{};
    o.max_evals = 0;  // a setting: named in words, and by its flag on the command line
    try {
        tune::tune(kernel("KEVO_TUNABLE(BLOCK, 128, 64 128)\n"), ev, o);
        ADD_FAILURE() << "max_evals 0 was accepted";
    } catch (const SettingError& e) {
        EXPECT_EQ(e.id(), "tune.max_evals");
        EXPECT_STREQ(e.what(), "the number of variants to validate must be at least 1, not 0");
    }
}

TEST(Tune, ResultSplitsTheTimeInsideRun) {
    FnEvaluator ev(landscape);
    TuneResult r = tune::tune(kernel("KEVO_TUNABLE(BLOCK, 128, 64 128 256 512)\nKEVO_TUNABLE(UNROLL, 1, 1 2 4 8)\n"), ev, TuneOptions{});
    ASSERT_EQ(r.trials.size(), 16u);
    EXPECT_EQ(r.split.points, 16);
    EXPECT_NEAR(r.split.wall_s, r.run_s, 1e-9);
    EXPECT_NEAR(r.split.job_s, 16 * 0.001, 1e-9);
    EXPECT_NEAR(r.split.lock_wait_s, 16 * 0.0005, 1e-9);
    EXPECT_NEAR(r.split.annotate_s, 16 * 0.0002, 1e-9);
    // Each run sleeps 2 ms, more than its reported parts: the rest is 'other' and the parts add up.
    EXPECT_GT(r.split.other_s, 0);
    EXPECT_NEAR(r.split.job_s + r.split.lock_wait_s + r.split.annotate_s + r.split.other_s, r.split.wall_s, 1e-9);
    for (const auto& t : r.trials) EXPECT_GT(t.run_wall_s, 0);
    nlohmann::json j = r.to_json();
    EXPECT_EQ(j["run_split"]["points"], 16);
    EXPECT_NE(r.split.text().find("judge job"), std::string::npos) << r.split.text();
}
