// Issue 50 item 10: everything `kernelevo serve` shows comes from files and a Redis queue that
// others can write (a worker's record, a job's fields). The page must show it as text: a worker
// record whose fields are markup runs no script in the page (which holds the ?token= in its URL).
// A real redis-server, a real Server and the page in headless chromium.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "../store/redis_server.h"
#include "chromium.h"
#include "serve/serve.h"

namespace kevo::serve {
namespace {

// Markup that, inserted as HTML, marks the page (data-pwned on <body>) and would read the token.
const std::string kImg = "<img src=x onerror=\"document.body.dataset.pwned='img:'+location.search\">";
const std::string kAttr = "\"><svg onload=\"document.body.dataset.pwned='attr'\">";

TEST(ServeXss, MarkupInAWorkerRecordAndAJobIsShownAsTextAndRunsNoScript) {
    if (testing::chromium_binary().empty()) GTEST_SKIP() << "chromium is not installed (apt-get install chromium)";
    if (!kevo::testing::RedisServer::installed()) GTEST_SKIP() << "redis-server is not installed";
    kevo::testing::RedisServer redis;
    ASSERT_TRUE(redis.start()) << redis.error();
    const std::string q = "{xss}queue:";
    // A worker record as anyone with the queue's password can write it: every field markup,
    // numbers included (the page computes with some of them).
    nlohmann::json w = {{"name", "evil" + kImg}, {"kind", "gpu"},
                        {"gpu", kImg},           {"device", {{"present", true}, {"name", kAttr}}},
                        {"state", kImg},         {"job", {{"kind", kImg}, {"id", kImg}, {"since", 0}}},
                        {"jobs", kImg},          {"reclaimed", kAttr},
                        {"busy_s", 1},           {"started", 0},
                        {"seen", 1e12},          {"lease_s", 30},
                        {"log", {kImg, kAttr}}};
    ASSERT_TRUE(redis.call({"SADD", q + "workers", "evil"}));
    ASSERT_TRUE(redis.call({"SET", q + "worker:evil", w.dump()}));
    // A job in the recent list whose attempts and worker are markup.
    ASSERT_TRUE(redis.call({"LPUSH", q + "recent", "job1" + kImg}));
    ASSERT_TRUE(redis.call({"HSET", q + "job:job1" + kImg, "spec", nlohmann::json{{"kind", kImg}}.dump(), "worker",
                            kAttr, "state", kImg}));
    ServeOptions o;
    o.listen = "127.0.0.1:0";
    o.scan_cache = false;
    o.queue_url = redis.url("xss");
    Server server(o);
    const int port = server.start();
    ASSERT_EQ(server.overview()["workers"].size(), 1u) << server.overview().dump();
    ProcessResult r = testing::dump_dom("http://127.0.0.1:" + std::to_string(port) + "/?token=secret-token-1234", 5000);
    server.stop();
    ASSERT_TRUE(r.ok()) << r.describe() << r.err;
    const std::string& dom = r.out;
    EXPECT_EQ(dom.find("data-pwned"), std::string::npos) << "script from a worker record ran:\n" << dom.substr(0, 6000);
    EXPECT_EQ(dom.find("<img src=\"x\""), std::string::npos) << "markup became an element";
    EXPECT_EQ(dom.find("<svg"), std::string::npos) << "markup became an element";
    EXPECT_NE(dom.find("evil&lt;img src=x onerror="), std::string::npos)
        << "the name is shown as text" << dom.substr(0, 6000);
    EXPECT_NE(dom.find("data-refreshes=\""), std::string::npos) << "the page kept working" << dom.substr(0, 3000);
}

}  // namespace
}  // namespace kevo::serve
