#include <gtest/gtest.h>

#include "common/error.h"
#include "common/fs.h"
#include "evolve/archive.h"
#include "evolve/prompt_text.h"
#include "evolve/prompts.h"
#include "task/task.h"

namespace kevo::evolve {
namespace {

TEST(Normalize, IgnoresCommentsAndLayoutButNotCode) {
    std::string a = "#include <x.h>\n// add one\n__global__ void k(float* y) {\n  y[0] = 1.0f; /* c */\n}\n";
    std::string b = "#include <x.h>\n__global__   void k( float *y ){ y[0]=1.0f;\n}";
    std::string c = "#include <x.h>\n__global__ void k(float* y) { y[0] = 2.0f; }";
    EXPECT_EQ(normalize_source(a), normalize_source(b));
    EXPECT_EQ(normalized_hash(a), normalized_hash(b));
    EXPECT_NE(normalized_hash(a), normalized_hash(c));
    EXPECT_EQ(normalize_source("unsigned  int x;"), "unsigned int x;");
    EXPECT_NE(normalize_source("s = \"a  b\";"), normalize_source("s = \"a b\";"));  // literals are verbatim
    // A directive keeps its own line, so code after it is not swallowed into it.
    EXPECT_EQ(normalize_source("int a;\n#define N 4 // four\nint b;"), "int a;\n#define N 4\nint b;");
}

TEST(Technique, TagsTheMostAdvancedOne) {
    EXPECT_EQ(technique_of("y[i] = x[i];"), "plain");
    EXPECT_EQ(technique_of("float4 v = ((const float4*)x)[i];"), "vectorized");
    EXPECT_EQ(technique_of("__shared__ float tile[256]; float4 v;"), "shared_memory");
    EXPECT_EQ(technique_of("__shared__ float t[32]; s += __shfl_down_sync(0xffffffff, s, 16);"), "warp_shuffle");
    EXPECT_EQ(technique_of("wmma::fragment<...> a;"), "tensor_core");
}

TEST(Archive, KeepsTheFastestPerCell) {
    Archive a;
    EXPECT_TRUE(a.insert({1, 1.00, "plain", 100}));
    EXPECT_TRUE(a.insert({2, 1.05, "plain", 100}));      // same bin (1.0 .. 1.19): faster wins
    EXPECT_FALSE(a.insert({3, 1.01, "plain", 100}));     // slower loses
    EXPECT_TRUE(a.insert({4, 1.05, "plain", 50}));       // as fast and shorter wins
    EXPECT_TRUE(a.insert({5, 1.02, "vectorized", 100})); // another technique: another cell
    EXPECT_TRUE(a.insert({6, 2.50, "plain", 100}));      // another speedup bin
    EXPECT_EQ(a.elites().size(), 3u);
    EXPECT_EQ(a.best()->id, 6);
    EXPECT_TRUE(a.contains(4));
    EXPECT_FALSE(a.contains(2));
    Archive b = Archive::from_json(a.to_json());
    EXPECT_EQ(b.to_json(), a.to_json());
}

TEST(Selection, TemperatureControlsGreed) {
    std::vector<double> s = {1.0, 2.0, 4.0};
    EXPECT_EQ(select_index(s, 1e-3, 1e-9), 2u);  // near zero: (almost) always the best
    EXPECT_EQ(select_index(s, 1e-3, 0.999), 2u);
    // Temperature 1: proportional to speedup (1/7, 2/7, 4/7).
    EXPECT_EQ(select_index(s, 1.0, 0.10), 0u);
    EXPECT_EQ(select_index(s, 1.0, 0.20), 1u);
    EXPECT_EQ(select_index(s, 1.0, 0.50), 2u);
    // Very high: nearly uniform.
    EXPECT_EQ(select_index(s, 1e6, 0.30), 0u);
    EXPECT_EQ(select_index(s, 1e6, 0.50), 1u);
}

TEST(Prompts, DefaultsRenderAndOverridesReplaceThem) {
    Prompts p;
    std::map<std::string, std::string> vars = {{"task_name", "gelu"}, {"task", "T"}, {"reference", "R"},
                                               {"abi", p.text("abi")}, {"gpu", "G"}, {"speed_of_light", "S"},
                                               {"to_beat", ""}, {"language", "CUDA"}, {"fence", "cuda"}};
    std::string seed = p.render("seed", vars);
    EXPECT_NE(seed.find("Write a CUDA kernel"), std::string::npos);
    EXPECT_NE(seed.find("one ```cuda code block"), std::string::npos);
    EXPECT_NE(seed.find("# Task: gelu"), std::string::npos);
    EXPECT_NE(seed.find("extern \"C\" int kevo_forward"), std::string::npos);  // the ABI and its example
    EXPECT_EQ(seed.find("{{"), std::string::npos);
    vars.insert({{"parent_code", "P"}, {"parent_fence", "cuda"}, {"parent_metrics", "M"}, {"inspirations", "I"}, {"tried", "T"}, {"feedback", "F"},
                 {"code", "C"}, {"error", "E"}});
    for (const char* t : {"mutate_full", "mutate_diff", "repair"}) EXPECT_EQ(p.render(t, vars).find("{{"), std::string::npos);
    EXPECT_NE(p.render("mutate_diff", vars).find(">>>>>>> REPLACE"), std::string::npos);
    // The Triton flavour: the Triton format instead of the ABI, python blocks.
    vars["abi"] = p.text("triton");
    vars["language"] = "Triton";
    vars["fence"] = "python";
    std::string tseed = p.render("seed", vars);
    EXPECT_NE(tseed.find("Write a Triton kernel"), std::string::npos);
    EXPECT_NE(tseed.find("KEVO_LAUNCH = {"), std::string::npos);
    EXPECT_NE(tseed.find("one ```python code block"), std::string::npos);

    TempDir dir;
    write_file_atomic(dir.path() / "seed.md", "Write {{task_name}} for {{gpu}}; {{unknown}}");
    Prompts custom;
    custom.load_overrides(dir.path());
    EXPECT_EQ(custom.text("repair"), p.text("repair"));  // not overridden
    EXPECT_THROW(custom.render("seed", vars), UsageError);
    write_file_atomic(dir.path() / "seed.md", "Write {{task_name}} for {{gpu}}");
    custom.load_overrides(dir.path());
    EXPECT_EQ(custom.render("seed", vars), "Write gelu for G");
    TempDir empty;
    EXPECT_THROW(custom.load_overrides(empty.path()), UsageError);
}

// A wrapper reference (an imported KernelBench task's generic loader) is not what the prompts show:
// the files its reference.show names are, each under its title; the tolerance's policy is stated.
TEST(PromptText, ShownFilesReplaceAWrapperReference) {
    TempDir d("kevo-prompt-show");
    write_file_atomic(d.path() / "loader.cpp", "std::vector<at::Tensor> forward_generic_loader();\n");
    write_file_atomic(d.path() / "problem.py", "class Model(nn.Module):\n    eps = 1e-5\n");
    write_file_atomic(d.path() / "graph.py", "def forward(x, conv_weight):\n    return torch.conv2d(x, conv_weight)\n");
    nlohmann::json j = nlohmann::json::parse(R"({"name": "kb", "reference": {"source": "loader.cpp", "function": "kb::forward"},
        "inputs": [{"name": "x", "dtype": "float32", "shape": [4]}], "outputs": [{"name": "out", "dtype": "float32", "shape": [4]}],
        "tolerance": {"atol": 3e-4, "rtol": 3e-4, "policy": "ten times the fp32 reference's error against fp64"}})");
    const Task plain = parse_task(j, d.path() / "task.json");
    EXPECT_NE(describe_reference(plain).find("forward_generic_loader"), std::string::npos);
    j["reference"]["show"] = nlohmann::json::array({{{"file", "problem.py"}, {"language", "python"}, {"title", "The PyTorch model"}},
                                                    {{"file", "graph.py"}, {"language", "python"}, {"title", "As traced"}}});
    const Task t = parse_task(j, d.path() / "task.json");
    const std::string ref = describe_reference(t);
    EXPECT_EQ(ref.find("forward_generic_loader"), std::string::npos) << ref;
    EXPECT_NE(ref.find("## The PyTorch model\n\n```python\nclass Model"), std::string::npos) << ref;
    EXPECT_NE(ref.find("## As traced\n\n```python\ndef forward(x, conv_weight)"), std::string::npos) << ref;
    EXPECT_EQ(describe_task(t).find("kb::forward"), std::string::npos) << describe_task(t);
    EXPECT_NE(describe_task(t).find("ten times the fp32 reference's error"), std::string::npos) << describe_task(t);
    EXPECT_NE(describe_reference(t, 20).find("[truncated"), std::string::npos);
    // The precision policy line comes from the task's "precision" (default pytorch), not from a fixed text.
    EXPECT_NE(describe_task(t).find("\nPrecision policy pytorch: as PyTorch and LibTorch run it by default"), std::string::npos)
        << describe_task(t);
    EXPECT_NE(describe_task(t).find("the reference is timed with cuDNN TF32 on, cuBLAS TF32 off; correctness is judged against the "
                                    "reference in strict fp32 (TF32 off)."), std::string::npos) << describe_task(t);
    j["precision"] = "strict";
    const std::string strict = describe_task(parse_task(j, d.path() / "task.json"));
    EXPECT_NE(strict.find("\nPrecision policy strict: strict fp32 everywhere (TF32 off); the reference is timed with cuDNN TF32 off, "
                          "cuBLAS TF32 off"), std::string::npos) << strict;
    // Seed, mutate and repair prompts all carry the section.
    Prompts p;
    std::map<std::string, std::string> vars = {{"task_name", "kb"}, {"task", describe_task(t)}, {"reference", ref}, {"abi", "A"},
                                               {"gpu", "G"}, {"language", "CUDA"}, {"fence", "cuda"}, {"speed_of_light", "S"},
                                               {"to_beat", ""},
                                               {"parent_code", "P"}, {"parent_fence", "cuda"}, {"parent_metrics", "M"}, {"inspirations", "I"},
                                               {"tried", "T"}, {"feedback", "F"}, {"code", "C"}, {"error", "E"}};
    for (const char* name : {"seed", "mutate_full", "mutate_diff", "repair"}) {
        const std::string text = p.render(name, vars);
        EXPECT_NE(text.find("## As traced"), std::string::npos) << name;
        EXPECT_EQ(text.find("forward_generic_loader"), std::string::npos) << name;
    }
}

}  // namespace
}  // namespace kevo::evolve
