// The command reference under docs/reference/ is kernelevo's own help: docs/reference/commands.md is
// `kernelevo help --markdown` byte for byte, docs/reference/commands/COMMAND.md is `kernelevo help
// --markdown COMMAND` for each command that page lists, and no page is left of a command that is gone.
// The help is rendered at a fixed width, so neither the terminal nor $COLUMNS changes it.
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/fs.h"
#include "common/process.h"

namespace kevo {
namespace {

const fs::path kReference = fs::path(KEVO_SOURCE_DIR) / "docs" / "reference";
const std::string kRegenerate = "; regenerate the pages with scripts/cli_reference.sh " KEVO_EXE;

std::string markdown(const std::vector<std::string>& command, const std::string& columns = "80") {
    ProcessOptions o;
    o.argv = {KEVO_EXE, "help", "--markdown"};
    o.argv.insert(o.argv.end(), command.begin(), command.end());
    o.env = {{"COLUMNS", columns}};
    o.timeout_s = 120;
    ProcessResult r = run_process(o);
    EXPECT_TRUE(r.ok()) << "kernelevo help --markdown: " << r.describe() << "\n" << r.err;
    return r.out;
}

std::string page(const fs::path& file) { return fs::is_regular_file(file) ? read_file(file) : std::string(); }

TEST(CliReference, TheCheckedInPagesAreTheToolsHelp) {
#if !defined(KEVO_WITH_WORKER) || !defined(KEVO_WITH_SERVE)
    GTEST_SKIP() << "the reference is made by a build with every command (worker and serve need Redis)";
#endif
    const std::string root = markdown({});
    EXPECT_TRUE(root == page(kReference / "commands.md")) << "docs/reference/commands.md is stale" << kRegenerate;
    std::set<std::string> listed;
    static const std::regex item(R"(\n- \[([a-z-]+)\]\(commands/([a-z-]+)\.md\): )");
    for (std::sregex_iterator it(root.begin(), root.end(), item), end; it != end; ++it) {
        EXPECT_EQ((*it)[1], (*it)[2]);
        listed.insert((*it)[1]);
    }
    for (const char* c : {"search", "cache", "import", "help"}) EXPECT_TRUE(listed.count(c)) << c << " has no page";
    for (const std::string& c : listed)
        EXPECT_TRUE(markdown({c}) == page(kReference / "commands" / (c + ".md")))
            << "docs/reference/commands/" << c << ".md is stale" << kRegenerate;
    for (const auto& e : fs::directory_iterator(kReference / "commands"))
        EXPECT_TRUE(listed.count(e.path().stem().string()) && e.path().extension() == ".md")
            << e.path() << " is the page of no command" << kRegenerate;
}

TEST(CliReference, APageHasEverySubcommandAtAFixedWidth) {
    const std::string cache = markdown({"cache"});
    for (const char* sub : {"status", "stats", "add", "remove", "prune"})
        EXPECT_NE(cache.find(std::string("\n## kernelevo cache ") + sub + "\n\n```text\n"), std::string::npos) << sub;
    EXPECT_EQ(markdown({"cache"}, "200"), cache) << "the terminal's width reached the reference";
    EXPECT_EQ(cache.find('\x1b'), std::string::npos) << "colour in the reference";
    size_t widest = 0;  // in columns (a UTF-8 continuation byte takes none), of the help blocks' lines
    bool in_help = false;
    std::istringstream lines(cache);
    for (std::string line; std::getline(lines, line);) {
        if (line.rfind("```", 0) == 0) in_help = line == "```text";
        else if (in_help)
            widest = std::max<size_t>(widest, std::count_if(line.begin(), line.end(), [](char c) {
                                          return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
                                      }));
    }
    EXPECT_LE(widest, 80u) << "a help line wider than the reference's 80 columns";
    EXPECT_GT(widest, 70u) << "the help was not wrapped at 80 columns";
}

}  // namespace
}  // namespace kevo
