// The bench report's charts (bench/plots.h) and what its page shows in headless chromium (skipped
// when it is not installed): tasks that did not run are "not run", never "not correct"; a chart
// with nothing to draw is a sentence; "correct" counts only what ran; token ticks are whole k/M.
#include <gtest/gtest.h>

#include <regex>
#include <set>

#include "bench/bench.h"
#include "bench/plots.h"
#include "chromium.h"
#include "common/fs.h"

namespace kevo {
namespace {

bench::TaskResult task(const std::string& name, const std::string& status, double speedup, int64_t tokens = 0) {
    bench::TaskResult r;
    r.name = name;
    r.status = status;
    r.speedup = speedup;
    r.tokens = tokens;
    r.done = true;
    return r;
}

const bench::ReportInfo kInfo{"suite", "kernels", "", "sm_90", "2026-12-04T18:00:00Z"};

size_t count(const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
    return n;
}

std::string rendered(const std::vector<bench::TaskResult>& results) {
    TempDir dir("kevo-bench-charts");
    write_file_atomic(dir.path() / "report.html", bench::report_html(results, kInfo));
    ProcessResult r = testing::dump_dom("file://" + (dir.path() / "report.html").string());
    EXPECT_TRUE(r.ok()) << r.describe() << r.err;
    return r.out;
}

TEST(BenchCharts, TasksThatDidNotRunAreNotRunNotNotCorrect) {
    const std::vector<bench::TaskResult> rs = {task("a", "no_device", 0), task("b", "no_device", 0)};
    nlohmann::json bars = bench::detail::speedup_bars(rs), hist = bench::detail::speedup_histogram(rs),
                   tokens = bench::detail::speedup_vs_tokens(rs);
    EXPECT_EQ(bars["empty"], "no task was run (2 not run: no GPU of their architecture here)") << bars.dump();
    EXPECT_TRUE(tokens.contains("empty")) << tokens.dump();
    ASSERT_FALSE(hist.contains("empty")) << hist.dump();
    const auto& names = hist["categories"];
    ASSERT_EQ(names.back(), "not run");
    ASSERT_EQ(names[names.size() - 2], "not correct");
    for (const auto& s : hist["series"]) {
        const auto& last = s["data"].back();
        if (s["label"] == "not run") EXPECT_EQ(last, 2);
        else EXPECT_TRUE(last.is_null()) << s.dump();
        if (s["label"] == "not correct") EXPECT_TRUE(s["data"][names.size() - 2] == 0) << s.dump();
    }
    // "Correct" counts what ran: 0 of 0 run, not 0/2 as if both had failed.
    const std::string md = bench::report_markdown(rs, kInfo);
    EXPECT_NE(md.find("0 of 0 run"), std::string::npos) << md;
    EXPECT_EQ(md.find("count them as not correct"), std::string::npos) << md;
}

TEST(BenchCharts, OnlyCorrectTasksAreBarsAndTheRestAreNamed) {
    const std::vector<bench::TaskResult> rs = {task("fast", "ok", 2.5, 1200), task("slow", "ok", 0.5, 300),
                                               task("wrong", "mismatch", 9, 800), task("away", "no_device", 0)};
    nlohmann::json bars = bench::detail::speedup_bars(rs);
    EXPECT_EQ(bars["categories"], nlohmann::json({"fast", "slow"})) << bars.dump();
    EXPECT_EQ(bars["caption"], "Not drawn: 1 not correct, 1 not run (no GPU of their architecture here).");
    nlohmann::json none = bench::detail::speedup_bars({task("wrong", "mismatch", 9)});
    EXPECT_EQ(none["empty"], "no task has a correct kernel (1 run, none correct)") << none.dump();
    nlohmann::json ready = bench::detail::speedup_vs_tokens({task("fast", "ok", 2.5)});
    EXPECT_EQ(ready["empty"], "no LLM tokens were spent (ready kernels were validated)") << ready.dump();
    EXPECT_TRUE(bench::detail::speedup_histogram({}).contains("empty"));
}

TEST(BenchCharts, ThePageInABrowserDrawsNoEmptyChart) {
    if (testing::chromium_binary().empty()) GTEST_SKIP() << "chromium is not installed (apt-get install chromium)";
    const std::string dom = rendered({task("a", "no_device", 0), task("b", "no_device", 0)});
    EXPECT_NE(dom.find("no task was run"), std::string::npos) << dom.substr(0, 4000);
    EXPECT_EQ(count(dom, "class=\"uplot"), 1u) << "only the distribution has data";
    EXPECT_NE(dom.find("not run"), std::string::npos);
    EXPECT_EQ(dom.find("counted as not correct"), std::string::npos);
}

TEST(BenchCharts, TokenTicksAreWholeAndDistinctInABrowser) {
    if (testing::chromium_binary().empty()) GTEST_SKIP() << "chromium is not installed (apt-get install chromium)";
    // Few tokens: the old axis wrote fractions of one token as "0 0 0 1 1 1".
    for (const auto& rs : {std::vector<bench::TaskResult>{task("a", "ok", 1.5, 1), task("b", "ok", 2, 2), task("c", "ok", 0.8, 3)},
                           std::vector<bench::TaskResult>{task("a", "ok", 1.5, 1500), task("b", "ok", 2, 120000),
                                                          task("c", "ok", 0.8, 2500000)}}) {
        const std::string dom = rendered(rs);
        EXPECT_EQ(count(dom, "class=\"uplot"), 3u) << dom.substr(0, 4000);
        std::smatch m;
        const std::string tail = dom.substr(dom.rfind("class=\"uplot"));
        ASSERT_TRUE(std::regex_search(tail, m, std::regex("data-xticks=\"([^\"]*)\""))) << tail.substr(0, 2000);
        std::vector<std::string> labels;
        const std::string all = m[1];
        for (size_t p = 0; p <= all.size();) {
            size_t q = all.find('|', p);
            if (q == std::string::npos) q = all.size();
            labels.push_back(all.substr(p, q - p));
            p = q + 1;
        }
        EXPECT_GE(labels.size(), 2u) << all;
        EXPECT_EQ(std::set<std::string>(labels.begin(), labels.end()).size(), labels.size()) << "repeated: " << all;
        for (const auto& l : labels)
            EXPECT_TRUE(std::regex_match(l, std::regex("[0-9]+|[0-9]+(\\.[0-9]+)?[kM]"))) << "not a whole count: " << l << " in " << all;
    }
}

}  // namespace
}  // namespace kevo
