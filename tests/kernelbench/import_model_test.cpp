// `kernelevo import kernelbench` and whole models (issue 38): values derived from shapes (an attention
// scaled by 1/sqrt(k.size(-1))) import while a branch on the data is still refused with its line;
// dropout with p = 0 and eval-mode modules import.
#include <cstdio>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "kb_suite.h"
#include "reference/reference.h"
#include "task/task.h"

namespace kevo {
namespace {

// The attention of KernelBench's level-3 transformer blocks, scaled by a size turned into a float,
// with an eval-mode BatchNorm and Dropout (p > 0, eval: no randomness) and a p = 0 Dropout in
// training mode. `branch`: the same with a branch on the data at line 20.
std::string attention_problem(bool branch) {
    return std::string(
               "import math\n"
               "import torch\n"
               "import torch.nn as nn\n\n\n"
               "class Model(nn.Module):\n"
               "    def __init__(self, n_embd):\n"
               "        super().__init__()\n"
               "        self.c_attn = nn.Linear(n_embd, 3 * n_embd)\n"
               "        self.norm = nn.BatchNorm1d(n_embd).eval()\n"
               "        self.drop_eval = nn.Dropout(0.1).eval()\n"
               "        self.drop_zero = nn.Dropout(0.0)\n"
               "        self.n_embd = n_embd\n\n"
               "    def forward(self, x):\n"
               "        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)\n"
               "        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))\n"
               "        hs = int(k.shape[-1])\n"
               "        att = self.drop_zero(torch.softmax(att, dim=-1))\n") +
           (branch ? "        if att.mean() > 0.5:\n            att = att * 2\n" : "        att = att + 0\n        att = att * 1\n") +
           "        y = (att @ v)[..., :hs]\n"
           "        return self.drop_eval(self.norm(y.transpose(1, 2)).transpose(1, 2))\n\n\n"
           "def get_inputs():\n    return [torch.randn(4, 16, 32)]\n\n\n"
           "def get_init_inputs():\n    return [32]\n";
}

const kbtest::Import& shapes_import() {
    static const kbtest::Import imp = [] {
        const fs::path src = fs::path(KEVO_BINARY_DIR) / "test-cache" / "kernelbench-shapes-src" / "level1";
        std::vector<std::string> args = {"--max-numel", "4096"};
        for (auto [file, branch] : {std::pair{"904_ShapeScaledAttention.py", false}, std::pair{"905_DataBranchAttention.py", true}}) {
            const std::string text = attention_problem(branch);
            std::error_code ec;
            if (!fs::exists(src / file, ec) || read_file(src / file) != text) write_file_atomic(src / file, text);
            args.push_back((src / file).string());
        }
        return kbtest::cached_import("kernelbench-shapes", args);
    }();
    return imp;
}

TEST(KernelBenchImportShapes, AScaleFromASizeImportsAndABranchOnTheDataIsRefusedWithItsLine) {
    const auto& imp = shapes_import();
    ASSERT_TRUE(imp.run.started) << imp.run.error;
    ASSERT_FALSE(imp.report.is_null()) << imp.run.describe() << "\n" << imp.run.err;
    ASSERT_TRUE(imp.by_name.count("kb1_904_ShapeScaledAttention")) << imp.run.err;
    const auto& ok = imp.by_name.at("kb1_904_ShapeScaledAttention");
    ASSERT_EQ(ok.value("status", ""), "ok") << ok.dump();
    EXPECT_TRUE(ok["verify"].value("ok", false)) << ok.dump();
    // Sizes turned into Python values are not data: no second draw of inputs is needed to trust the trace.
    EXPECT_EQ(ok["verify"].value("second_draw", "").rfind("skipped: ", 0), 0u) << ok.dump();
    (void)load_task(imp.out / "kb1_904_ShapeScaledAttention" / "task.json");
    ASSERT_TRUE(imp.by_name.count("kb1_905_DataBranchAttention")) << imp.run.err;
    const auto& refused = imp.by_name.at("kb1_905_DataBranchAttention");
    EXPECT_EQ(refused.value("status", ""), "refused") << refused.dump();
    EXPECT_NE(refused.value("reason", "").find("data-dependent control flow at line 20"), std::string::npos) << refused.dump();
    EXPECT_FALSE(fs::exists(imp.out / "kb1_905_DataBranchAttention"));
}

// ---- level 3: a problem as a whole model (a model folder of region tasks) ----

fs::path level3(const std::string& file) {
    return fs::path(KEVO_SOURCE_DIR) / "tests" / "data" / "kernelbench_problems" / "level3" / file;
}

// The transformer block and the MLP (level 3: model folders) beside a level-1 problem (one task).
const kbtest::Import& models_import() {
    static const kbtest::Import imp = kbtest::cached_import(
        "kernelbench-models",
        {"--max-numel", "4096", level3("44_MiniGPTBlock.py").string(), level3("1_MLP.py").string(),
         (fs::path(KEVO_SOURCE_DIR) / "tests" / "data" / "kernelbench_problems" / "level1" /
          "83_conv_depthwise_2D_square_input_asymmetric_kernel.py").string()});
    return imp;
}

// Each region task of an installed model folder loads as a task and uses the tool's reference.
int check_regions(const fs::path& dir, const nlohmann::json& plan) {
    int tasks = 0;
    for (const auto& r : plan["regions"]) {
        if (r["status"] != "task") {
            EXPECT_TRUE(r["task"].is_null()) << r.dump();
            continue;
        }
        ++tasks;
        const std::string task_name = r["task_name"].get<std::string>();
        EXPECT_EQ(r["task"], "regions/" + task_name);
        Task t = load_task(dir / "regions" / task_name / "task.json");
        EXPECT_EQ(t.name, task_name);
        EXPECT_EQ(t.reference_source, fs::absolute(dir / "regions" / "kernelbench_reference.cpp").lexically_normal());
        EXPECT_TRUE(fs::exists(dir / "regions" / task_name / "model.pt"));
        EXPECT_TRUE(fs::exists(dir / "regions" / task_name / "pytorch.json"));
    }
    return tasks;
}

TEST(KernelBenchImportModels, Level3ProblemsBecomeModelFoldersOfRegionTasks) {
    const auto& imp = models_import();
    ASSERT_TRUE(imp.run.started) << imp.run.error;
    ASSERT_FALSE(imp.report.is_null()) << imp.run.describe() << "\n" << imp.run.err;
    EXPECT_EQ(imp.run.exit_code, 0) << imp.run.err;
    EXPECT_EQ(imp.report["imported"], 3) << imp.run.err;
    struct Case {
        const char* name;
        const char* kind;  // a region kind the plan must hold
        int min_tasks;
    };
    for (const Case& c : {Case{"kb3_44_MiniGPTBlock", "attention", 4}, Case{"kb3_1_MLP", "gemm", 3}}) {
        ASSERT_TRUE(imp.by_name.count(c.name)) << imp.run.err;
        const auto& r = imp.by_name.at(c.name);
        ASSERT_EQ(r.value("status", ""), "ok") << r.dump();
        const fs::path dir = imp.out / c.name;
        EXPECT_FALSE(fs::exists(dir / "task.json")) << "a model folder, not one task";
        const auto plan = nlohmann::json::parse(read_file(dir / "plan.json"));
        EXPECT_EQ(plan["format"], "kernelevo-model-plan/1");
        EXPECT_TRUE(fs::exists(dir / "plan.md"));
        bool kind = false;
        for (const auto& region : plan["regions"]) kind = kind || region["kind"] == c.kind;
        EXPECT_TRUE(kind) << c.name << " has no " << c.kind << " region: " << plan.dump();
        const int tasks = check_regions(dir, plan);
        EXPECT_GE(tasks, c.min_tasks) << plan.dump();
        // import.json and the line per model say the same as the plan.
        const auto& m = r["model"];
        EXPECT_EQ(m["tasks"], tasks);
        EXPECT_EQ(m["regions"].size(), plan["regions"].size());
        EXPECT_EQ(m["plan"], (dir / "plan.json").string());
        EXPECT_NE(imp.run.err.find("imported model " + std::string(c.name) + ": " + std::to_string(plan["regions"].size()) +
                                   " regions, " + std::to_string(tasks) + " tasks, " + std::to_string(m.value("refused", 0)) + " refused, "),
                  std::string::npos)
            << imp.run.err;
        // ... and the share of the model's time its tasks hold, summed from the plan's regions.
        double share = 0;
        for (const auto& region : plan["regions"])
            if (region["status"] == "task" || region["status"] == "repeat") share += region["share"].get<double>();
        char figure[64];
        std::snprintf(figure, sizeof figure, "; the tasks are %.1f%% of its time (", 100 * share);
        EXPECT_NE(imp.run.err.find(figure), std::string::npos) << figure << "\n" << imp.run.err;
    }
    // A level-1 problem in the same import is still one task, verified against the Python model.
    const auto& one = imp.by_name.at("kb1_83_conv_depthwise_2D_square_input_asymmetric_kernel");
    EXPECT_EQ(one.value("status", ""), "ok") << one.dump();
    EXPECT_FALSE(one.contains("model"));
    EXPECT_TRUE(one["verify"].value("ok", false)) << one.dump();
    (void)load_task(imp.out / "kb1_83_conv_depthwise_2D_square_input_asymmetric_kernel" / "task.json");
}

// --whole: the transformer block as one task (its size-derived scale and p = 0 dropouts import).
TEST(KernelBenchImportModels, WholeImportsALevel3ProblemAsOneTask) {
    const auto imp = kbtest::cached_import("kernelbench-whole", {"--whole", "--max-numel", "4096", level3("44_MiniGPTBlock.py").string()});
    ASSERT_FALSE(imp.report.is_null()) << imp.run.describe() << "\n" << imp.run.err;
    ASSERT_TRUE(imp.by_name.count("kb3_44_MiniGPTBlock")) << imp.run.err;
    const auto& r = imp.by_name.at("kb3_44_MiniGPTBlock");
    ASSERT_EQ(r.value("status", ""), "ok") << r.dump();
    EXPECT_TRUE(r["verify"].value("ok", false)) << r.dump();
    EXPECT_FALSE(r.contains("model"));
    EXPECT_FALSE(fs::exists(imp.out / "kb3_44_MiniGPTBlock" / "plan.json"));
    (void)load_task(imp.out / "kb3_44_MiniGPTBlock" / "task.json");
}

// A model that breaks at the sizes --max-numel shrinks it to (KernelBench's Swin models assert their
// image size) is tried again at larger ones, as a whole-task import is.
TEST(KernelBenchImportModels, AModelThatBreaksWhenShrunkIsTriedAgainLarger) {
    TempDir dir("kevo-kb-model-shrink");
    fs::create_directories(dir.path() / "level3");
    write_file_atomic(dir.path() / "level3" / "901_FixedImageSize.py",
                      "import torch\nimport torch.nn as nn\n\n"
                      "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                      "        self.image_size = 64\n        self.conv = nn.Conv2d(3, 8, 3, padding=1)\n\n"
                      "    def forward(self, x):\n"
                      "        assert x.shape[-1] == self.image_size, \"Input image size doesn't match model\"\n"
                      "        return torch.relu(self.conv(x))\n\n"
                      "batch_size = 8\nimage_size = 64\n\n"
                      "def get_inputs():\n    return [torch.rand(batch_size, 3, image_size, image_size)]\n\n"
                      "def get_init_inputs():\n    return []\n");
    auto r = kbtest::kernelevo({"import", "kernelbench", (dir.path() / "level3").string(), "--out", (dir.path() / "suite").string(),
                                "--max-numel", "4096"}, 600);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("imported model kb3_901_FixedImageSize: "), std::string::npos) << r.err;
    const auto plan = nlohmann::json::parse(read_file(dir.path() / "suite" / "kb3_901_FixedImageSize" / "plan.json"));
    EXPECT_EQ(plan["inputs"][0]["shape"].back(), 64) << plan["inputs"].dump();
}

TEST(KernelBenchImportModels, RegionsAndWholeTogetherIsExitTwo) {
    auto r = kbtest::kernelevo({"import", "kernelbench", level3("1_MLP.py").string(), "--out", "/tmp/kevo-kb-never", "--regions",
                                "--whole"}, 120);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("--regions"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists("/tmp/kevo-kb-never"));
}

// A problem is untrusted code in the importer's process: it can change what export_model writes. The
// tool installs nothing of a model whose plan names a task folder outside regions/ or whose region
// holds a link instead of a file; an honest model of the same import is installed.
TEST(KernelBenchImportModels, AHostilePlanOrALinkedRegionFileIsNotInstalled) {
    const fs::path src = fs::path(KEVO_BINARY_DIR) / "test-cache" / "kernelbench-hostile-models-src" / "level3";
    const std::string head =
        "import os, sys\nimport torch\nimport torch.nn as nn\n"
        "sys.path.insert(0, sys.argv[sys.argv.index('--kernelevo-python') + 1])\n"
        "import kernelevo.model_export as me\n_orig = me._write\n";
    const std::string model =
        "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(64, 64)\n\n"
        "    def forward(self, x):\n        return torch.relu(self.fc(x))\n\n"
        "def get_inputs():\n    return [torch.rand(32, 64)]\n\ndef get_init_inputs():\n    return []\n";
    const std::string escape = head +
        "def _write(out_dir, plan, overwrite):\n"
        "    for r in plan['regions']:\n"
        "        if r['status'] == 'task':\n            r['task'] = 'regions/../../../escaped'\n"
        "    _orig(out_dir, plan, overwrite)\nme._write = _write\n" + model;
    const std::string linked = head +
        "def _write(out_dir, plan, overwrite):\n"
        "    _orig(out_dir, plan, overwrite)\n"
        "    for r in plan['regions']:\n"
        "        if r['status'] == 'task':\n"
        "            d = os.path.join(out_dir, r['task'])\n"
        "            os.remove(os.path.join(d, 'model.pt'))\n"
        "            os.symlink('/etc/passwd', os.path.join(d, 'model.pt'))\n"
        "me._write = _write\n" + model;
    std::vector<std::string> args = {"--max-numel", "4096"};
    for (auto [file, text] : {std::pair{"901_EscapingPlan.py", escape}, std::pair{"902_LinkedRegionFile.py", linked},
                              std::pair{"903_Honest.py", head + model}}) {
        std::error_code ec;
        if (!fs::exists(src / file, ec) || read_file(src / file) != text) write_file_atomic(src / file, text);
        args.push_back((src / file).string());
    }
    const auto imp = kbtest::cached_import("kernelbench-hostile-models", args);
    ASSERT_FALSE(imp.report.is_null()) << imp.run.describe() << "\n" << imp.run.err;
    struct Case {
        const char* name;
        const char* reason;
    };
    for (const Case& c : {Case{"kb3_901_EscapingPlan", "names a task folder other than regions/"},
                          Case{"kb3_902_LinkedRegionFile", "model.pt is missing or not a regular file"}}) {
        ASSERT_TRUE(imp.by_name.count(c.name)) << imp.run.err;
        const auto& r = imp.by_name.at(c.name);
        EXPECT_EQ(r.value("status", ""), "failed") << r.dump();
        EXPECT_NE(r.value("reason", "").find("the importer's model was not installed: "), std::string::npos) << r.dump();
        EXPECT_NE(r.value("reason", "").find(c.reason), std::string::npos) << r.dump();
        EXPECT_FALSE(r.contains("model"));
        EXPECT_FALSE(fs::exists(imp.out / c.name));
    }
    EXPECT_FALSE(fs::exists(imp.out.parent_path() / "escaped"));
    EXPECT_FALSE(fs::exists(imp.out / "escaped"));
    ASSERT_TRUE(imp.by_name.count("kb3_903_Honest")) << imp.run.err;
    EXPECT_EQ(imp.by_name.at("kb3_903_Honest").value("status", ""), "ok") << imp.by_name.at("kb3_903_Honest").dump();
    EXPECT_TRUE(fs::exists(imp.out / "kb3_903_Honest" / "plan.json"));
    // Nothing is left of the private folders or the staging.
    for (const auto& e : fs::directory_iterator(imp.out)) EXPECT_NE(e.path().filename().string().rfind(".", 0), 0u) << e.path();
}

// Importing a level-3 problem again into the same suite replaces its plan and region tasks and keeps
// what `kernelevo search --model-dir` wrote there: search/ (the regions' states, summary.json) and
// cache/ (their kernels), byte for byte (issue 50 item 8).
TEST(KernelBenchImportModels, ImportingAModelAgainKeepsItsSearchesAndKernels) {
    TempDir dir("kevo-kb-model-again");
    fs::create_directories(dir.path() / "level3");
    write_file_atomic(dir.path() / "level3" / "904_Again.py",
                      "import torch\nimport torch.nn as nn\n\n"
                      "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                      "        self.fc = nn.Linear(64, 64)\n\n"
                      "    def forward(self, x):\n        return torch.relu(self.fc(x))\n\n"
                      "def get_inputs():\n    return [torch.rand(32, 64)]\n\ndef get_init_inputs():\n    return []\n");
    const std::vector<std::string> args = {"import", "kernelbench", (dir.path() / "level3").string(), "--out",
                                           (dir.path() / "suite").string(), "--max-numel", "4096"};
    auto first = kbtest::kernelevo(args, 600);
    ASSERT_EQ(first.exit_code, 0) << first.err;
    const fs::path model = dir.path() / "suite" / "kb3_904_Again";
    ASSERT_TRUE(fs::exists(model / "plan.json")) << first.err;
    const std::map<fs::path, std::string> kept = {
        {"search/kb3_904_again_fc.db", "SQLite format 3 (a region's state)"},
        {"search/summary.json", "{\"format\": \"kernelevo-model-search/1\"}\n"},
        {"cache/kb3_904_again_fc/sm_90.cu", "// a kernel\n"},
        {"cache/kb3_904_again_fc/sm_90.json", "{}\n"}};
    for (const auto& [file, text] : kept) write_file_atomic(model / file, text);
    auto again = kbtest::kernelevo(args, 600);
    ASSERT_EQ(again.exit_code, 0) << again.err;
    EXPECT_NE(again.err.find("imported model kb3_904_Again: "), std::string::npos) << again.err;
    EXPECT_TRUE(fs::exists(model / "plan.json"));
    for (const auto& [file, text] : kept) {
        ASSERT_TRUE(fs::is_regular_file(model / file)) << file << " was lost by the re-import";
        EXPECT_EQ(read_file(model / file), text) << file;
    }
    for (const auto& e : fs::directory_iterator(dir.path() / "suite"))  // no staging or private folder left
        EXPECT_NE(e.path().filename().string().rfind(".", 0), 0u) << e.path();
}

}  // namespace
}  // namespace kevo
