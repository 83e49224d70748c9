// The candidate-language seam: a third language, added in this test, is recognized, compiled,
// parsed out of a reply, filed in the archive, named in the prompts and cached through the
// registry alone (no part of the tool knows it), and is gone again once removed.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cache/cache.h"
#include "common/error.h"
#include "common/fs.h"
#include "common/hash.h"
#include "evolve/archive.h"
#include "evolve/prompts.h"
#include "evolve/search_config.h"
#include "fake_language.h"
#include "language/registry.h"
#include "llm/reply.h"

namespace kevo {
namespace {
namespace fs = std::filesystem;
using testing_fake::FakeLanguage;
using testing_fake::kFake;

// Adds the fake language for one test and takes it out again.
class LanguageSeam : public ::testing::Test {
protected:
    void SetUp() override { language::add(fake_); }
    void TearDown() override { language::remove(fake_.name()); }
    static llm::ReplyLanguages reply_languages() { return {language::fence_tags(), language::marks_candidate}; }
    FakeLanguage fake_;
};

TEST_F(LanguageSeam, RecognizingAndCompilingGoThroughTheRegistry) {
    EXPECT_EQ(language::named("fakelang"), &fake_);
    EXPECT_EQ(&language::of_source(kFake), &fake_);
    EXPECT_EQ(language::of_source("extern \"C\" int kevo_forward();").name(), "cuda");
    EXPECT_EQ(candidate_backend(kFake, CompileOptions{}), "fakelang");
    CompileResult r = compile_candidate(kFake, CompileOptions{});
    EXPECT_EQ(r.backend, "fakelang");
    EXPECT_EQ(language::backend_choices().back(), "fakelang");
    EXPECT_NE(language::kernel_help().find(", or a Fake candidate: one .fk file"), std::string::npos);
    EXPECT_THROW(language::add(fake_), UsageError);  // a name is added once
    CompileOptions named;
    named.backend = "opencl";
    try {
        compile_candidate(kFake, named);
        ADD_FAILURE() << "an unknown language must be refused";
    } catch (const UsageError& e) {
        EXPECT_NE(std::string(e.what()).find("fakelang"), std::string::npos) << e.what();
    }
}

TEST_F(LanguageSeam, RepliesAreParsedWithEveryLanguagesFences) {
    const std::string reply = "Draft:\n```fake\n#lang fake\ndraft\n```\nFinal:\n```fk\n" + kFake + "```\nDone.\n";
    EXPECT_EQ(llm::extract_kernel("```fake\n" + kFake + "```\n", reply_languages()), kFake);
    // Of two blocks, the one the language marks as a whole candidate.
    EXPECT_EQ(llm::extract_kernel(reply + "```fake\nnot it\n```\n", reply_languages()), kFake);
    const llm::ReplyLanguages before = reply_languages();
    language::remove("fakelang");
    EXPECT_THROW(llm::extract_kernel("```fake\n" + kFake + "```\n", reply_languages()), llm::ReplyError);
    EXPECT_EQ(llm::extract_kernel("```fake\n" + kFake + "```\n", before), kFake);
    language::add(fake_);
}

TEST_F(LanguageSeam, TheArchiveAndThePromptsAskTheLanguage) {
    EXPECT_EQ(evolve::technique_of(kFake), "fake_vector");
    EXPECT_EQ(evolve::technique_of("#lang fake\nplain()\n"), "fake_plain");
    EXPECT_EQ(evolve::technique_of("__global__ void k() { __shared__ float s[32]; }"), "shared_memory");
    const std::vector<std::string> names = evolve::Prompts::names();
    const std::vector<std::string> expected = {"system", "abi", "triton", "fake", "seed", "mutate_full", "mutate_diff", "repair"};
    EXPECT_EQ(names, expected);
}

TEST_F(LanguageSeam, CacheEntriesKeepTheCandidateSourceBesideTheGeneratedCu) {
    TempDir dir("kevo-language-cache");
    cache::EntryMeta meta;
    meta.function = "fake_op";
    meta.arch = "sm_90";
    const CompileResult compiled = compile_candidate(kFake, CompileOptions{});
    cache::store_candidate(dir.path(), kFake, compiled, meta);

    const fs::path fk = cache::candidate_source_path(dir.path(), "fake_op", "sm_90", fake_);
    EXPECT_EQ(fk, dir.path() / "fake_op" / "sm_90.fk");
    EXPECT_EQ(read_file(fk), kFake);
    EXPECT_EQ(read_file(cache::source_path(dir.path(), "fake_op", "sm_90")), compiled.generated_source);
    const nlohmann::json j = nlohmann::json::parse(read_file(cache::metadata_path(dir.path(), "fake_op", "sm_90")));
    EXPECT_EQ(j["backend"], "fakelang");
    EXPECT_EQ(j["fakelang"]["source_file"], "sm_90.fk");
    EXPECT_EQ(j["fakelang"]["fake_version"], "0.1");
    EXPECT_FALSE(j["fakelang"].contains("aot_s"));

    cache::Lookup l = cache::lookup(dir.path(), "fake_op", "sm_90", "", "");
    ASSERT_EQ(l.state, cache::State::valid) << l.reason;
    std::vector<cache::EntryReport> scanned = cache::scan(dir.path(), {});
    ASSERT_EQ(scanned.size(), 1u);
    EXPECT_EQ(scanned[0].files, 3);

    write_file_atomic(fk, kFake + "edited\n");
    l = cache::lookup(dir.path(), "fake_op", "sm_90", "", "");
    EXPECT_EQ(l.state, cache::State::stale);
    EXPECT_NE(l.reason.find("the Fake source sm_90.fk was edited after it was stored"), std::string::npos) << l.reason;

    // A CUDA kernel stored over it removes the .fk; removing the entry removes every file.
    cache::EntryMeta cuda = meta;
    cache::store(dir.path(), "// cuda\n", cuda);
    EXPECT_FALSE(fs::exists(fk));
    cache::store_candidate(dir.path(), kFake, compiled, meta);
    ASSERT_TRUE(fs::exists(fk));
    cache::remove_entry(dir.path(), "fake_op", "sm_90");
    EXPECT_FALSE(fs::exists(dir.path() / "fake_op"));
}

// The search's --backend values, their check, the languages a run checks before it starts and the
// help texts are the registry's: the fake language is one of each while it is added.
TEST_F(LanguageSeam, TheSearchsBackendsAndHelpTextsComeFromTheRegistry) {
    EXPECT_EQ(evolve::backend_choices(), (std::vector<std::string>{"cuda", "triton", "fakelang", "both"}));
    EXPECT_EQ(evolve::languages_of("both"), (std::vector<std::string>{"cuda", "triton", "fakelang"}));
    EXPECT_EQ(evolve::languages_of("fakelang"), (std::vector<std::string>{"fakelang"}));
    EXPECT_EQ(evolve::languages_of("cuda"), (std::vector<std::string>{"cuda"}));
    EXPECT_NE(evolve::backend_help().find("fakelang: a Fake candidate: one .fk file; both: "), std::string::npos)
        << evolve::backend_help();
    EXPECT_EQ(language::kernel_file_kinds(), ".cu, or a Triton .py, or a Fake .fk");
    EXPECT_NE(language::python_help().find("; Fake: the Python with fakec (default: python3)"), std::string::npos)
        << language::python_help();

    evolve::SearchConfig c;
    c.structure.backend = "fakelang";
    EXPECT_NO_THROW(evolve::validate(c));
    c.structure.backend = "both";
    c.structure.islands = 2;  // one island per language at least: three now
    try {
        evolve::validate(c);
        ADD_FAILURE() << "both with fewer islands than languages must be refused";
    } catch (const SettingError& e) {
        EXPECT_NE(std::string(e.what()).find("at least 3 islands (island 0 writes Fake, island 1 Triton, island 2 CUDA"),
                  std::string::npos) << e.what();
    }
    c.structure.islands = 3;
    EXPECT_NO_THROW(evolve::validate(c));
    EXPECT_EQ(evolve::mixed_language(0), "fakelang");

    TempDir empty("kevo-language-prompts");  // the templates a --prompts folder may hold: the fake's too
    try {
        evolve::Prompts().load_overrides(empty.path());
        ADD_FAILURE() << "a folder with no template must be refused";
    } catch (const SettingError& e) {
        EXPECT_NE(std::string(e.what()).find("abi.md, triton.md, fake.md, seed.md"), std::string::npos) << e.what();
    }
}

TEST(LanguageRegistry, TheBuiltInLanguagesAreCudaThenTriton) {
    std::vector<std::string> names;
    for (const CandidateLanguage* l : language::all()) names.push_back(l->name());
    EXPECT_EQ(names, (std::vector<std::string>{"cuda", "triton"}));
    EXPECT_EQ(language::backend_help(), "cuda, triton, or auto (Triton when the file is a Triton candidate)");
    EXPECT_EQ(language::named("fakelang"), nullptr);
    EXPECT_EQ(evolve::backend_choices(), (std::vector<std::string>{"cuda", "triton", "both"}));
    evolve::SearchConfig c;
    c.structure.backend = "fakelang";  // gone with the language
    EXPECT_THROW(evolve::validate(c), SettingError);
}

}  // namespace
}  // namespace kevo
