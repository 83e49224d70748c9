// `kernelevo import kernelbench` and whole models (issue 38): values derived from shapes (an attention
// scaled by 1/sqrt(k.size(-1))) import while a branch on the data is still refused with its line;
// dropout with p = 0 and eval-mode modules import.
#include <gtest/gtest.h>

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
    (void)load_task(imp.out / "kb1_904_ShapeScaledAttention" / "task.json");
    ASSERT_TRUE(imp.by_name.count("kb1_905_DataBranchAttention")) << imp.run.err;
    const auto& refused = imp.by_name.at("kb1_905_DataBranchAttention");
    EXPECT_EQ(refused.value("status", ""), "refused") << refused.dump();
    EXPECT_NE(refused.value("reason", "").find("data-dependent control flow at line 20"), std::string::npos) << refused.dump();
    EXPECT_FALSE(fs::exists(imp.out / "kb1_905_DataBranchAttention"));
}

}  // namespace
}  // namespace kevo
