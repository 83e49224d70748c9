// Turning an LLM reply into a candidate kernel source: extract a fenced code block, or apply
// aider-style SEARCH/REPLACE edit blocks to the parent source. Error messages are precise enough to
// be fed back to the model in a repair prompt.
#pragma once
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace kevo::llm {

// The reply holds no usable kernel or edit.
struct ReplyError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// The languages a reply's code may be written in (language/registry.h has them for every candidate
// language): the tags their code fences carry ("" for an untagged fence), and what marks a block as
// a whole candidate besides a definition of kevo_forward (empty: nothing else).
struct ReplyLanguages {
    std::vector<std::string> fence_tags;
    std::function<bool(const std::string&)> marks_candidate;
};

// The kernel source in a reply. Code blocks are fenced with ``` or ~~~ and tagged with one of
// `languages`' tags (CUDA's: cuda, cu, cpp, c++, cxx, cc, c, h, hpp or nothing); blocks in other
// languages are ignored. With one such block, that block; with several, the last one that defines
// kevo_forward or that a language marks (models tend to put the final version last). A reply with no fence at all is taken whole when it defines kevo_forward (some
// local models answer with bare code). An unterminated last fence runs to the end of the reply.
// Line endings come back as "\n". Throws ReplyError when there is no block, or when several blocks
// are present and none defines kevo_forward.
std::string extract_kernel(const std::string& reply, const ReplyLanguages& languages);

// True when `source` defines (not just declares or calls) a function named kevo_forward.
bool defines_kevo_forward(const std::string& source);

struct EditBlock {
    std::string search, replace;   // "\n"-terminated lines; either may be empty
};
// The SEARCH/REPLACE blocks of a reply, in order:
//   <<<<<<< SEARCH
//   lines of the parent, exactly
//   =======
//   their replacement
//   >>>>>>> REPLACE
// (5 to 9 marker characters; fences and prose around the blocks are ignored). Throws ReplyError on
// a block that is not closed properly. Returns an empty vector when the reply has no blocks.
std::vector<EditBlock> parse_edit_blocks(const std::string& reply);

// Applies the reply's edit blocks, in order, each to the result of the previous one. A SEARCH part
// must match whole lines exactly once; when it matches nowhere, a match that ignores whitespace at
// the start and end of each line is accepted if it is unique. CRLF and LF are interchangeable in the reply
// and the parent; the result keeps the parent's line ending. Throws ReplyError naming the block
// (1-based) when the reply has no blocks, a SEARCH part is empty, matches nowhere, or matches more
// than once (with the line numbers). The parent is never partially edited.
std::string apply_edits(const std::string& parent, const std::string& reply);

// The candidate a reply describes: apply_edits() when the reply has edit blocks and a parent is
// given, otherwise extract_kernel().
std::string candidate_from_reply(const std::string& reply, const ReplyLanguages& languages, const std::string* parent = nullptr);

}  // namespace kevo::llm
