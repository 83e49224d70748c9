// What the serve page says about a run that is not running, and one with nothing correct yet: the
// candidates left pending by a search that ended are not "in flight" (the search's writer lease on
// STATE.lock tells, held here by a child process), no "generation -1", no best before one is correct
// (never "0.000x" in green), and no empty chart; the page checked in headless chromium.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include "chromium.h"
#include "common/fs.h"
#include "serve/serve.h"
#include "store/store.h"
#include "store/writer.h"

namespace kevo::serve {
namespace {

// A child process holding the search's writer lease on STATE until destroyed (as a running search does).
class LeaseHolder {
public:
    explicit LeaseHolder(const std::string& state) {
        int ready[2], release[2];
        if (::pipe(ready) != 0 || ::pipe(release) != 0) throw std::runtime_error("pipe");
        pid_ = ::fork();
        if (pid_ == 0) {
            ::close(ready[0]);
            ::close(release[1]);
            auto lease = store::acquire_writer(state);
            char c = 1;
            if (::write(ready[1], &c, 1) != 1) ::_exit(1);
            (void)::read(release[0], &c, 1);  // until the parent closes its end
            ::_exit(0);
        }
        ::close(ready[1]);
        ::close(release[0]);
        release_ = release[1];
        char c = 0;
        ok_ = ::read(ready[0], &c, 1) == 1;
        ::close(ready[0]);
    }
    ~LeaseHolder() {
        ::close(release_);
        int status = 0;
        ::waitpid(pid_, &status, 0);
    }
    bool ok() const { return ok_; }

private:
    pid_t pid_ = -1;
    int release_ = -1;
    bool ok_ = false;
};

ServeOptions only(const std::string& state) {
    ServeOptions o;
    o.listen = "127.0.0.1:0";
    o.states = {state};
    o.scan_cache = false;
    return o;
}

// A state whose only candidate is pending (a search stopped while measuring it) and no generation committed.
std::string stopped_state(const fs::path& dir) {
    const std::string state = (dir / "state.db").string();
    auto st = store::open_store(state);
    st->put_meta("task_name", "gelu_bias");
    store::Program p;
    p.key = "g0.i0.c0.a0";
    p.source = p.norm_hash = "pending kernel";
    st->put_program(p);
    return state;
}

TEST(ServeLive, PendingCandidatesAreInFlightOnlyWhileASearchHoldsTheState) {
    TempDir dir("kevo-serve-live");
    const std::string state = stopped_state(dir.path());
    Server server(only(state));
    nlohmann::json run = server.overview()["runs"][0];
    EXPECT_EQ(run["live"], false) << run.dump();
    EXPECT_EQ(run["pending"], 0) << "a search that ended measures nothing";
    EXPECT_EQ(run["pending_left"], 1);
    EXPECT_EQ(run["generation"], -1);
    {
        LeaseHolder search(state);
        ASSERT_TRUE(search.ok());
        run = server.overview()["runs"][0];
        EXPECT_EQ(run["live"], true) << run.dump();
        EXPECT_EQ(run["pending"], 1);
    }
    EXPECT_EQ(server.overview()["runs"][0]["live"], false) << "the lease ends with the search";
}

TEST(ServeLive, ThePageShowsNoBestNoGenerationMinusOneAndNoEmptyChart) {
    if (testing::chromium_binary().empty()) GTEST_SKIP() << "chromium is not installed (apt-get install chromium)";
    TempDir dir("kevo-serve-live");
    const std::string state = stopped_state(dir.path());
    Server server(only(state));
    const int port = server.start();
    ProcessResult r = testing::dump_dom("http://127.0.0.1:" + std::to_string(port) + "/", 5000);
    server.stop();
    ASSERT_TRUE(r.ok()) << r.describe() << r.err;
    const std::string& dom = r.out;
    EXPECT_NE(dom.find("gelu_bias"), std::string::npos) << dom.substr(0, 4000);
    EXPECT_NE(dom.find("<td class=\"muted\">none yet</td>"), std::string::npos) << "no best yet" << dom.substr(0, 4000);
    EXPECT_EQ(dom.find("0.000x"), std::string::npos);
    EXPECT_EQ(dom.find("-1 /"), std::string::npos) << "generation -1";
    EXPECT_NE(dom.find("none yet / "), std::string::npos);
    EXPECT_NE(dom.find("no search is running on this state (1 left unmeasured)"), std::string::npos) << "not in flight";
    EXPECT_NE(dom.find("not running"), std::string::npos);
    EXPECT_NE(dom.find("no candidate was evaluated"), std::string::npos) << "a sentence, not an empty chart";
    EXPECT_EQ(dom.find("class=\"uplot"), std::string::npos);
}

}  // namespace
}  // namespace kevo::serve
