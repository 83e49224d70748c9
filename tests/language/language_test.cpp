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
#include "language/registry.h"
#include "llm/reply.h"

namespace kevo {
namespace {
namespace fs = std::filesystem;

class FakeLanguage final : public CandidateLanguage {
public:
    std::string name() const override { return "fakelang"; }
    std::string display_name() const override { return "Fake"; }
    std::string candidate_help() const override { return "a Fake candidate: one .fk file"; }
    bool recognizes(const std::string& source) const override { return source.rfind("#lang fake\n", 0) == 0; }
    bool marks_candidate(const std::string& block) const override { return block.find("FAKE_ENTRY") != std::string::npos; }
    std::vector<std::string> fence_tags() const override { return {"fake", "fk"}; }
    std::string prompt_template() const override { return "fake"; }
    const std::vector<Technique>& techniques() const override {
        static const std::vector<Technique> t = {{std::regex(R"(\bvectorize\b)"), "fake_vector"}};
        return t;
    }
    std::string plain_technique() const override { return "fake_plain"; }
    std::string cache_source_extension() const override { return ".fk"; }
    std::string cache_metadata_key() const override { return "fakelang"; }
    std::string object_folder() const override { return "fake"; }
    std::string object_description() const override { return "Fake kernels"; }
    CompileResult compile(const std::string& source, const CompileOptions&) const override {
        CompileResult r;
        r.ok = true;
        r.backend = name();
        r.generated_source = "// generated from " + sha256_hex(source) + "\n";
        r.backend_info = {{"fake_version", "0.1"}, {"aot_s", 1.5}};
        return r;
    }
};

const std::string kFake = "#lang fake\nFAKE_ENTRY vectorize(x)\n";

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

TEST(LanguageRegistry, TheBuiltInLanguagesAreCudaThenTriton) {
    std::vector<std::string> names;
    for (const CandidateLanguage* l : language::all()) names.push_back(l->name());
    EXPECT_EQ(names, (std::vector<std::string>{"cuda", "triton"}));
    EXPECT_EQ(language::backend_help(), "cuda, triton, or auto (Triton when the file is a Triton candidate)");
    EXPECT_EQ(language::named("fakelang"), nullptr);
}

}  // namespace
}  // namespace kevo
