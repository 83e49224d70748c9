// The settings' environment variables (common/settings.h) against what the sources read and what
// docs/reference/environment.md shows: its table is the table's markdown byte for byte, every KERNELEVO_* and
// KEVO_* variable read anywhere (tool/, the runtime, the Python package) is a row, and every row is
// read where it says.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <string>

#include "common/settings.h"
#include "common/fs.h"

namespace kevo {
namespace {

const fs::path kSource = KEVO_SOURCE_DIR;

// The text of every source file under `dir` with one of the extensions.
std::map<fs::path, std::string> sources(const fs::path& dir, const std::set<std::string>& exts) {
    std::map<fs::path, std::string> out;
    for (const auto& e : fs::recursive_directory_iterator(dir))
        if (e.is_regular_file() && exts.count(e.path().extension().string())) out[e.path()] = read_file(e.path());
    return out;
}

// The names of KERNELEVO_*/KEVO_* variables `re` (group 1: the name) finds in the files.
std::set<std::string> names_read(const std::map<fs::path, std::string>& files, const std::regex& re) {
    std::set<std::string> names;
    for (const auto& [path, text] : files)
        for (std::sregex_iterator it(text.begin(), text.end(), re), end; it != end; ++it) names.insert((*it)[1]);
    return names;
}

std::set<std::string> rows_read_by(const std::string& reader) {
    std::set<std::string> names;
    for (const Setting* e : kEnvTable)
        if (e->read_by == reader) names.insert(e->variable);
    return names;
}

// Each row's name in the tool (EnvVar::kCacheHome), from the table's own list.
#define KEVO_ENV_TEST_NONE(...)
#define KEVO_ENV_TEST_NAME(name, ...) {&settings::name, #name},
const std::map<const Setting*, std::string> kEnvNames = {KEVO_SETTING_LIST(KEVO_ENV_TEST_NONE, KEVO_ENV_TEST_NAME)};

const std::regex kCGetenv(R"re(getenv\("(KERNELEVO(?:_[A-Z0-9_]+)?|KEVO_[A-Z0-9_]+)"\))re");
const std::regex kPyEnviron(R"re((?:environ\.get|environ\[|getenv)\(?["'](KERNELEVO(?:_[A-Z0-9_]+)?|KEVO_[A-Z0-9_]+)["'])re");
const std::set<std::string> kCExts = {".cpp", ".h", ".cu", ".cuh", ".c"};

TEST(EnvironmentTable, TheReferenceShowsTheGeneratedTable) {
    const std::string readme = read_file(kSource / "docs" / "reference" / "environment.md");
    const std::string begin = "<!-- kernelevo help environment: begin (generated; edit tool/common/settings.h) -->\n";
    const std::string end = "<!-- kernelevo help environment: end -->";
    const size_t b = readme.find(begin);
    ASSERT_NE(b, std::string::npos) << "docs/reference/environment.md has no generated table of environment variables";
    const size_t e = readme.find(end, b);
    ASSERT_NE(e, std::string::npos);
    EXPECT_EQ(readme.substr(b + begin.size(), e - b - begin.size()), environment_markdown())
        << "docs/reference/environment.md's table is stale: replace it with the output of `kernelevo help environment`";
}

TEST(EnvironmentTable, TheToolReadsItsVariablesOnlyThroughTheTable) {
    // A literal getenv("KERNELEVO_...") in tool/ bypasses the table (and its test hooks' guard).
    const auto files = sources(kSource / "tool", kCExts);
    for (const auto& [path, text] : files)
        EXPECT_FALSE(std::regex_search(text, kCGetenv)) << path << " reads a KERNELEVO_/KEVO_ variable without common/settings.h";
    for (const Setting* e : kEnvTable) {
        const std::string reader = e->read_by;
        if (reader == "runtime" || reader == "Python package") continue;
        const std::string name = kEnvNames.at(e);
        bool used = false;
        for (const auto& [path, text] : files)
            used = used || (path.filename() != "settings.h" && text.find("EnvVar::" + name) != std::string::npos);
        EXPECT_TRUE(used) << e->variable << " is in the table but nothing in tool/ reads EnvVar::" << name;
    }
}

TEST(EnvironmentTable, TheRuntimeAndThePythonPackageReadTheTablesNames) {
    // The runtime (below every floor of tool/) and the Python package cannot include the table:
    // their names must be its rows, both ways.
    EXPECT_EQ(names_read(sources(kSource / "runtime", kCExts), kCGetenv), rows_read_by("runtime"));
    EXPECT_EQ(names_read(sources(kSource / "python" / "kernelevo", {".py"}), kPyEnviron), rows_read_by("Python package"));
    // The tool's own Python (importer, baselines) reads none of its own.
    EXPECT_TRUE(names_read(sources(kSource / "tool", {".py"}), kPyEnviron).empty());
}

TEST(EnvironmentTable, NamesAreUniqueAndTheEnumIsTheTable) {
    std::set<std::string> names, ids;
    for (const Setting* s : kSettingTable) EXPECT_TRUE(ids.insert(s->id).second) << s->id << " twice";
    for (size_t i = 0; i < std::size(kEnvTable); ++i) {
        const Setting& e = env_info(static_cast<EnvVar>(i));
        EXPECT_EQ(&e, kEnvTable[i]);
        EXPECT_NE(e.kind, EnvKind::none) << e.variable;
        EXPECT_TRUE(names.insert(e.variable).second) << e.variable << " twice";
        EXPECT_EQ(std::string(e.meaning).find('|'), std::string::npos) << e.variable;
        EXPECT_EQ(std::string(e.default_value).find('|'), std::string::npos) << e.variable;
    }
}

}  // namespace
}  // namespace kevo
