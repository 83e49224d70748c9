// The search's HTML report (serve/search_report.h): one self-contained page whose charts the
// embedded uPlot draws, checked in headless chromium (skipped when it is not installed): a state
// with nothing evaluated says so instead of drawing empty charts; a run draws the best-so-far step
// line and the tokens axis with whole k/M ticks.
#include <gtest/gtest.h>

#include <regex>
#include <set>

#include "chromium.h"
#include "common/fs.h"
#include "evolve/report.h"
#include "serve/page.h"
#include "serve/search_report.h"
#include "store/store.h"

namespace kevo::serve {
namespace {

size_t count(const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
    return n;
}

// The tick labels uPlot drew on each chart's x (or y) axis, in page order.
std::vector<std::vector<std::string>> ticks(const std::string& dom, const std::string& axis) {
    std::vector<std::vector<std::string>> out;
    const std::regex re("data-" + axis + "ticks=\"([^\"]*)\"");
    for (std::sregex_iterator it(dom.begin(), dom.end(), re), end; it != end; ++it) {
        std::vector<std::string> labels;
        const std::string all = (*it)[1];
        for (size_t p = 0; p <= all.size();) {
            size_t q = all.find('|', p);
            if (q == std::string::npos) q = all.size();
            labels.push_back(all.substr(p, q - p));
            p = q + 1;
        }
        out.push_back(labels);
    }
    return out;
}

store::Program program(const std::string& key, int generation, int island, const std::string& status, double speedup) {
    store::Program p;
    p.key = key;
    p.generation = generation;
    p.island = island;
    p.origin = generation ? "mutation" : "seed";
    p.source = key;
    p.norm_hash = key;
    p.status = store::parse_program_status(status);
    p.speedup = speedup;
    return p;
}

std::string rendered(const fs::path& dir, const std::string& html) {
    write_file_atomic(dir / "report.html", html);
    ProcessResult r = testing::dump_dom("file://" + (dir / "report.html").string());
    EXPECT_TRUE(r.ok()) << r.describe() << r.err;
    return r.out;
}

TEST(SearchReportPage, NothingEvaluatedIsASentenceNotAnEmptyChart) {
    TempDir dir("kevo-report-page");
    const std::string state = (dir.path() / "state.db").string();
    {
        auto st = store::open_store(state);
        st->put_meta("task_name", "gelu_bias");
        st->put_program(program("g0.i0.c0.a0", 0, 0, "pending", 0));
    }
    auto st = store::open_store(state, store::Access::read_only);
    const nlohmann::json charts = evolve::report_charts(*st);
    ASSERT_EQ(charts.size(), 2u);
    EXPECT_EQ(charts[0]["empty"], "no candidate was evaluated") << charts.dump();
    EXPECT_EQ(charts[1]["empty"], "no generation committed yet") << charts.dump();
    const std::string html = search_report_html(*st);
    EXPECT_EQ(html.find("<script"), std::string::npos) << "no chart, no chart code";
    EXPECT_NE(html.find("no candidate was evaluated"), std::string::npos);
    if (testing::chromium_binary().empty()) GTEST_SKIP() << "chromium is not installed (apt-get install chromium)";
    const std::string dom = rendered(dir.path(), html);
    EXPECT_NE(dom.find("no candidate was evaluated"), std::string::npos) << dom.substr(0, 3000);
    EXPECT_EQ(dom.find("uplot"), std::string::npos) << "an empty chart was drawn";
    EXPECT_EQ(dom.find("<canvas"), std::string::npos);
}

TEST(SearchReportPage, ARunDrawsTheBestSoFarStepAndWholeTokenTicks) {
    TempDir dir("kevo-report-page");
    const std::string state = (dir.path() / "state.db").string();
    {
        auto st = store::open_store(state);
        st->put_meta("task_name", "gelu_<bias>");
        st->put_meta("structure", {{"arch", "sm_90"}, {"islands", 2}});
        const double best[] = {1.2, 1.2, 2.5};
        const int64_t tokens[] = {150, 900, 2400};  // the old axis wrote these as "0 0 0 1 1 1"-style repeats
        for (int g = 0; g < 3; ++g) {
            for (int i = 0; i < 2; ++i)
                st->put_program(program("g" + std::to_string(g) + ".i" + std::to_string(i), g, i, "ok", best[g] - 0.3 * i));
            st->put_program(program("g" + std::to_string(g) + ".bad", g, 0, "mismatch", 0));
            store::Generation gen;
            gen.generation = g;
            gen.best_speedup = best[g];
            gen.tokens = tokens[g];
            std::vector<store::Event> events;
            if (g == 2) events.push_back({2, "migration", {{"from", 0}, {"to", 1}}});
            st->commit_generation(gen, {}, events);
        }
    }
    auto st = store::open_store(state, store::Access::read_only);
    const std::string html = search_report_html(*st);
    EXPECT_EQ(html.find("src="), std::string::npos) << "one self-contained file";
    EXPECT_EQ(html.find("<link"), std::string::npos);
    EXPECT_EQ(count(html, "var uPlot=function"), 1u) << "uPlot inlined once";
    EXPECT_NE(html.find("gelu_&lt;bias&gt;"), std::string::npos) << "the name is escaped";
    if (testing::chromium_binary().empty()) GTEST_SKIP() << "chromium is not installed (apt-get install chromium)";
    const std::string dom = rendered(dir.path(), html);
    EXPECT_EQ(count(dom, "class=\"uplot"), 2u) << dom.substr(0, 3000);
    EXPECT_NE(dom.find("best so far"), std::string::npos) << "the legend";
    EXPECT_NE(dom.find("island 1"), std::string::npos);
    const auto x = ticks(dom, "x");
    ASSERT_EQ(x.size(), 2u) << dom.substr(0, 3000);
    for (const auto& axis : x) {
        EXPECT_EQ(std::set<std::string>(axis.begin(), axis.end()).size(), axis.size()) << "repeated tick labels";
        for (const auto& label : axis) EXPECT_TRUE(std::regex_match(label, std::regex("[0-9]+(\\.[0-9]+)?[kM]?"))) << label;
    }
    for (const auto& label : x[0]) EXPECT_TRUE(std::regex_match(label, std::regex("[0-9]+"))) << "generations are whole: " << label;
    bool k = false;
    for (const auto& label : x[1]) {
        k = k || label.back() == 'k';
        if (label.back() != 'k') EXPECT_TRUE(label == "0" || std::stoi(label) >= 1) << label;
    }
    EXPECT_TRUE(k) << "tokens in k";
}

}  // namespace
}  // namespace kevo::serve
