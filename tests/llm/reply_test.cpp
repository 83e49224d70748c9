// Kernel extraction and SEARCH/REPLACE edits on awkward replies.
#include <gtest/gtest.h>

#include "language/registry.h"
#include "llm/reply.h"

namespace kevo::llm {
namespace {

// The reply parser as the search calls it: with every candidate language's fences (the registry's).
const ReplyLanguages& languages() {
    static const ReplyLanguages l{language::fence_tags(), language::marks_candidate};
    return l;
}
std::string extract_kernel(const std::string& reply) { return llm::extract_kernel(reply, languages()); }
std::string candidate_from_reply(const std::string& reply, const std::string* parent = nullptr) {
    return llm::candidate_from_reply(reply, languages(), parent);
}

const std::string kKernel =
    "#include <kernelevo/abi.h>\n"
    "__global__ void k(float* y) { y[threadIdx.x] = 0; }\n"
    "extern \"C\" int kevo_forward(const kevo_tensor* in, int n_in, kevo_tensor* out, int n_out,\n"
    "                              cudaStream_t stream) {\n"
    "    k<<<1, 32, 0, stream>>>((float*)out[0].data);\n"
    "    return 0;\n"
    "}\n";

std::string message_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const ReplyError& e) {
        return e.what();
    }
    ADD_FAILURE() << "no ReplyError";
    return "";
}

TEST(LlmExtractKernel, SingleCudaBlock) {
    EXPECT_EQ(extract_kernel("Here is the kernel:\n```cuda\n" + kKernel + "```\nIt is fast."), kKernel);
}

TEST(LlmExtractKernel, AcceptsCppAndUntaggedFencesAndTildes) {
    for (const std::string fence : {"```cpp", "```c++", "```", "```CUDA", "~~~cu", "```cuda title=k.cu"}) {
        const std::string close = fence[0] == '~' ? "~~~" : "```";
        EXPECT_EQ(extract_kernel("text\n" + fence + "\n" + kKernel + close + "\n"), kKernel) << fence;
    }
}

TEST(LlmExtractKernel, SeveralBlocksPicksTheOneDefiningKevoForward) {
    std::string reply = "First the helper:\n```cuda\n__device__ float sq(float x) { return x * x; }\n```\n"
                        "Usage:\n```cpp\nint rc = kevo_forward(in, 1, out, 1, s);\n```\n"
                        "The kernel:\n```cuda\n" + kKernel + "```\n"
                        "And a test:\n```python\nprint('kevo_forward')\n```\n";
    EXPECT_EQ(extract_kernel(reply), kKernel);
}

TEST(LlmExtractKernel, SeveralDefinitionsPicksTheLast) {
    std::string draft = "extern \"C\" int kevo_forward(const kevo_tensor*, int, kevo_tensor*, int, cudaStream_t) { return 1; }\n";
    EXPECT_EQ(extract_kernel("Draft:\n```cuda\n" + draft + "```\nFinal:\n```cuda\n" + kKernel + "```\n"), kKernel);
}

TEST(LlmExtractKernel, NoBlockIsAClearError) {
    std::string m = message_of([] { extract_kernel("I think you should use shared memory tiling."); });
    EXPECT_NE(m.find("no code block"), std::string::npos) << m;
    m = message_of([] { extract_kernel("```javascript\nlet a = 1;\n```"); });
    EXPECT_NE(m.find("only blocks in other languages"), std::string::npos) << m;
}

TEST(LlmExtractKernel, TritonCandidatesComeInPythonBlocks) {
    EXPECT_EQ(extract_kernel("Here:\n```python\n@triton.jit\ndef k(): pass\nKEVO_LAUNCH = {}\n```\n"),
              "@triton.jit\ndef k(): pass\nKEVO_LAUNCH = {}\n");
    // Several blocks: the one with the launch description.
    EXPECT_EQ(extract_kernel("```python\nprint(1)\n```\n```python\nKEVO_LAUNCH = {}\n```\n"), "KEVO_LAUNCH = {}\n");
}

TEST(LlmExtractKernel, SeveralBlocksWithoutKevoForwardIsAnError) {
    std::string m = message_of([] { extract_kernel("```cuda\nint a;\n```\n```cuda\nint b;\n```\n"); });
    EXPECT_NE(m.find("2 code blocks and none defines kevo_forward"), std::string::npos) << m;
}

TEST(LlmExtractKernel, CrlfRepliesComeBackWithLf) {
    std::string crlf;
    for (char c : "Kernel:\n```cuda\n" + kKernel + "```\n") {
        if (c == '\n') crlf += '\r';
        if (c) crlf += c;
    }
    EXPECT_EQ(extract_kernel(crlf), kKernel);
}

TEST(LlmExtractKernel, BareCodeAndUnterminatedFence) {
    EXPECT_EQ(extract_kernel(kKernel), kKernel);
    EXPECT_EQ(extract_kernel("```cuda\n" + kKernel), kKernel);
}

TEST(LlmExtractKernel, NestedFenceInsideALongerFence) {
    std::string inner = "// usage in docs:\n// ```cuda\n" + kKernel;
    EXPECT_EQ(extract_kernel("````cuda\n" + inner + "````\n"), inner);
}

TEST(LlmDefinesKevoForward, DefinitionsOnly) {
    EXPECT_TRUE(defines_kevo_forward(kKernel));
    EXPECT_TRUE(defines_kevo_forward("extern \"C\" int kevo_forward(A a) noexcept\n{ return 0; }"));
    EXPECT_TRUE(defines_kevo_forward("int kevo_forward(A a) __attribute__((used)) { return 0; }"));
    EXPECT_FALSE(defines_kevo_forward("extern \"C\" int kevo_forward(A a);"));
    EXPECT_FALSE(defines_kevo_forward("if (kevo_forward(a)) { fail(); }"));
    EXPECT_FALSE(defines_kevo_forward("// int kevo_forward(A a) { }\n"));
    EXPECT_FALSE(defines_kevo_forward("const char* s = \"int kevo_forward(A a) { }\";"));
    EXPECT_FALSE(defines_kevo_forward("int my_kevo_forward(A a) { return 0; }"));
}

// ---- Edits ----------------------------------------------------------------------------------------

const std::string kParent =
    "__global__ void k(float* y, int n) {\n"
    "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i < n) y[i] = 0;\n"
    "}\n"
    "__global__ void k2(float* y, int n) {\n"
    "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i < n) y[i] = 1;\n"
    "}\n";

TEST(LlmApplyEdits, ReplacesAUniqueMatch) {
    std::string reply = "Make k2 write 2:\n```cuda\n<<<<<<< SEARCH\n    if (i < n) y[i] = 1;\n=======\n"
                        "    if (i < n) y[i] = 2;\n>>>>>>> REPLACE\n```\n";
    std::string out = apply_edits(kParent, reply);
    EXPECT_NE(out.find("y[i] = 2;"), std::string::npos);
    EXPECT_EQ(out.find("y[i] = 1;"), std::string::npos);
    EXPECT_EQ(out.size(), kParent.size());
}

TEST(LlmApplyEdits, SeveralBlocksApplyInOrder) {
    std::string reply =
        "<<<<<<< SEARCH\n    if (i < n) y[i] = 0;\n=======\n    if (i < n) y[i] = 3;\n>>>>>>> REPLACE\n"
        "then\n"
        "<<<<<<< SEARCH\n    if (i < n) y[i] = 3;\n}\n=======\n    if (i < n) y[i] = 4;\n}\n// end k\n>>>>>>> REPLACE\n";
    std::string out = apply_edits(kParent, reply);
    EXPECT_NE(out.find("y[i] = 4;\n}\n// end k\n__global__ void k2"), std::string::npos) << out;
}

TEST(LlmApplyEdits, ASearchThatMatchesTwiceIsAPreciseError) {
    std::string reply = "<<<<<<< SEARCH\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n=======\n"
                        "    int i = threadIdx.x;\n>>>>>>> REPLACE\n";
    std::string m = message_of([&] { apply_edits(kParent, reply); });
    EXPECT_NE(m.find("edit block 1"), std::string::npos) << m;
    EXPECT_NE(m.find("matches 2 places, at lines 2, 6"), std::string::npos) << m;
}

TEST(LlmApplyEdits, ASearchThatMatchesNowhereIsAPreciseError) {
    std::string ok = "<<<<<<< SEARCH\n    if (i < n) y[i] = 0;\n=======\n    if (i < n) y[i] = 9;\n>>>>>>> REPLACE\n";
    std::string bad = "<<<<<<< SEARCH\n__global__ void k2(float* y, int n) {\n    int j = 0;\n=======\nx\n>>>>>>> REPLACE\n";
    std::string m = message_of([&] { apply_edits(kParent, ok + bad); });
    EXPECT_NE(m.find("edit block 2"), std::string::npos) << m;
    EXPECT_NE(m.find("does not match"), std::string::npos) << m;
    EXPECT_NE(m.find("starting `__global__ void k2"), std::string::npos) << m;
    EXPECT_NE(m.find("first line occurs at line 5"), std::string::npos) << m;
}

TEST(LlmApplyEdits, CrlfEverywhere) {
    auto to_crlf = [](const std::string& s) {
        std::string out;
        for (char c : s) out += c == '\n' ? std::string("\r\n") : std::string(1, c);
        return out;
    };
    std::string reply = "<<<<<<< SEARCH\n    if (i < n) y[i] = 1;\n=======\n    if (i < n) y[i] = 2;\n>>>>>>> REPLACE\n";
    std::string expected = kParent;
    expected.replace(expected.find("y[i] = 1"), 8, "y[i] = 2");
    // CRLF reply, LF parent.
    EXPECT_EQ(apply_edits(kParent, to_crlf(reply)), expected);
    // LF reply, CRLF parent: the result keeps CRLF.
    EXPECT_EQ(apply_edits(to_crlf(kParent), reply), to_crlf(expected));
}

TEST(LlmApplyEdits, ToleratesIndentationDifferencesWhenUnambiguous) {
    std::string reply = "<<<<<<< SEARCH\n  if (i < n) y[i] = 1;   \n=======\n    if (i < n) y[i] = 5;\n>>>>>>> REPLACE\n";
    EXPECT_NE(apply_edits(kParent, reply).find("y[i] = 5;"), std::string::npos);
}

TEST(LlmApplyEdits, MalformedOrMissingBlocks) {
    EXPECT_NE(message_of([] { apply_edits(kParent, "no edits here"); }).find("no SEARCH/REPLACE edit block"),
              std::string::npos);
    EXPECT_NE(message_of([] { apply_edits(kParent, "<<<<<<< SEARCH\nx\n>>>>>>> REPLACE\n"); }).find("edit block 1"),
              std::string::npos);
    EXPECT_NE(message_of([] { apply_edits(kParent, "<<<<<<< SEARCH\nx\n=======\ny\n"); }).find("not closed"),
              std::string::npos);
    EXPECT_NE(message_of([] { apply_edits(kParent, "<<<<<<< SEARCH\n=======\ny\n>>>>>>> REPLACE\n"); })
                  .find("SEARCH part is empty"),
              std::string::npos);
}

TEST(LlmApplyEdits, DeletionAndNoFinalNewline) {
    std::string parent = "a\nb\nc";
    EXPECT_EQ(apply_edits(parent, "<<<<<<< SEARCH\nb\n=======\n>>>>>>> REPLACE\n"), "a\nc");
}

TEST(LlmCandidateFromReply, EditsNeedAParent) {
    std::string edit = "<<<<<<< SEARCH\n    if (i < n) y[i] = 1;\n=======\n    if (i < n) y[i] = 2;\n>>>>>>> REPLACE\n";
    EXPECT_NE(candidate_from_reply(edit, &kParent).find("y[i] = 2"), std::string::npos);
    EXPECT_THROW(candidate_from_reply(edit), ReplyError);
    EXPECT_EQ(candidate_from_reply("```cuda\n" + kKernel + "```", &kParent), kKernel);
}

}  // namespace
}  // namespace kevo::llm
