// Reply handling: fenced code extraction and SEARCH/REPLACE edits.
#include "llm/reply.h"

#include <cctype>
#include <algorithm>
#include <set>

#include "llm/util.h"

namespace kevo::llm {
namespace {

std::string normalize_newlines(const std::string& text) {
    std::string out;
    out.reserve(text.size());
    for (size_t i = 0; i < text.size(); ++i)
        if (!(text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n')) out += text[i];
    return out;
}

// Lines without their "\n"; a final "\n" does not start another line.
std::vector<std::string> split_lines(const std::string& text) {
    std::vector<std::string> lines;
    size_t pos = 0;
    while (pos < text.size()) {
        size_t end = text.find('\n', pos);
        if (end == std::string::npos) end = text.size();
        lines.push_back(text.substr(pos, end - pos));
        pos = end + 1;
    }
    return lines;
}

std::string join_lines(const std::vector<std::string>& lines, size_t begin, size_t end) {
    std::string out;
    for (size_t i = begin; i < end; ++i) out += lines[i] + "\n";
    return out;
}

std::string rtrim(const std::string& s) {
    size_t e = s.find_last_not_of(" \t\r");
    return e == std::string::npos ? "" : s.substr(0, e + 1);
}

struct Fence {
    char ch = 0;
    size_t length = 0;
    std::string info;   // lower-case first word after the fence
};

// An opening fence: optional indentation, then 3+ backticks or tildes, then an info string.
bool opening_fence(const std::string& line, Fence& fence) {
    std::string t = trim(line);
    if (t.size() < 3 || (t[0] != '`' && t[0] != '~')) return false;
    size_t n = t.find_first_not_of(t[0]);
    if (n == std::string::npos) n = t.size();
    if (n < 3) return false;
    std::string info = trim(t.substr(n));
    if (t[0] == '`' && info.find('`') != std::string::npos) return false;   // inline code, not a fence
    fence.ch = t[0];
    fence.length = n;
    fence.info = lower(info.substr(0, info.find_first_of(" \t{")));
    return true;
}

bool closing_fence(const std::string& line, const Fence& fence) {
    std::string t = trim(line);
    return t.size() >= fence.length && t.find_first_not_of(fence.ch) == std::string::npos;
}

bool is_code_language(const std::string& info, const ReplyLanguages& languages) {
    return std::find(languages.fence_tags.begin(), languages.fence_tags.end(), info) != languages.fence_tags.end();
}

// Blanks out comments and string/char literals (keeping newlines), so that identifiers found
// afterwards are real code.
std::string strip_comments_and_strings(const std::string& s) {
    std::string out = s;
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '/' && i + 1 < s.size() && s[i + 1] == '/') {
            while (i < s.size() && s[i] != '\n') out[i++] = ' ';
        } else if (s[i] == '/' && i + 1 < s.size() && s[i + 1] == '*') {
            size_t end = s.find("*/", i + 2);
            end = end == std::string::npos ? s.size() : end + 2;
            for (; i < end; ++i)
                if (s[i] != '\n') out[i] = ' ';
            --i;
        } else if (s[i] == '"' || s[i] == '\'') {
            char q = s[i];
            out[i] = ' ';
            for (++i; i < s.size() && s[i] != q && s[i] != '\n'; ++i) {
                if (s[i] == '\\' && i + 1 < s.size()) out[i++] = ' ';
                out[i] = ' ';
            }
            if (i < s.size() && s[i] == q) out[i] = ' ';
        }
    }
    return out;
}

bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

size_t skip_space(const std::string& s, size_t i) {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    return i;
}

// From an opening parenthesis at `i`, the index just past its matching close (npos if none).
size_t skip_parens(const std::string& s, size_t i) {
    int depth = 0;
    for (; i < s.size(); ++i) {
        if (s[i] == '(') ++depth;
        else if (s[i] == ')' && --depth == 0) return i + 1;
    }
    return std::string::npos;
}

// A one-line description of a SEARCH part for error messages.
std::string describe_search(const std::vector<std::string>& lines) {
    std::string first;
    for (const auto& l : lines)
        if (!trim(l).empty()) {
            first = trim(l);
            break;
        }
    if (first.size() > 80) first = first.substr(0, 80) + "...";
    return "(" + std::to_string(lines.size()) + (lines.size() == 1 ? " line" : " lines") +
           (first.empty() ? "" : ", starting `" + first + "`") + ")";
}

// Start indices where `needle` occurs as whole lines in `hay`, comparing lines with `same`.
template <class Same>
std::vector<size_t> find_all(const std::vector<std::string>& hay, const std::vector<std::string>& needle, Same same) {
    std::vector<size_t> at;
    for (size_t i = 0; i + needle.size() <= hay.size(); ++i) {
        size_t k = 0;
        while (k < needle.size() && same(hay[i + k], needle[k])) ++k;
        if (k == needle.size()) at.push_back(i);
    }
    return at;
}

std::string line_list(const std::vector<size_t>& at) {
    std::string out;
    for (size_t i = 0; i < at.size() && i < 5; ++i) out += (i ? ", " : "") + std::to_string(at[i] + 1);
    if (at.size() > 5) out += ", ...";
    return out;
}

}  // namespace

bool defines_kevo_forward(const std::string& source) {
    const std::string code = strip_comments_and_strings(source);
    const std::string name = "kevo_forward";
    for (size_t pos = code.find(name); pos != std::string::npos; pos = code.find(name, pos + 1)) {
        if (pos > 0 && ident_char(code[pos - 1])) continue;
        size_t i = skip_space(code, pos + name.size());
        if (i >= code.size() || code[i] != '(') continue;
        i = skip_parens(code, i);
        // After the parameter list a definition may carry specifiers (noexcept, __attribute__((...)))
        // before its body; a call or a declaration is followed by something else (';', ')', ',').
        for (;;) {
            i = skip_space(code, i);
            if (i >= code.size() || !ident_char(code[i])) break;
            while (i < code.size() && ident_char(code[i])) ++i;
            i = skip_space(code, i);
            if (i < code.size() && code[i] == '(') i = skip_parens(code, i);
        }
        if (i < code.size() && code[i] == '{') return true;
    }
    return false;
}

std::string extract_kernel(const std::string& raw_reply, const ReplyLanguages& languages) {
    const std::vector<std::string> lines = split_lines(normalize_newlines(raw_reply));
    std::vector<std::string> blocks;
    size_t other_blocks = 0;
    for (size_t i = 0; i < lines.size(); ++i) {
        Fence fence;
        if (!opening_fence(lines[i], fence)) continue;
        size_t end = i + 1;
        while (end < lines.size() && !closing_fence(lines[end], fence)) ++end;
        if (is_code_language(fence.info, languages)) blocks.push_back(join_lines(lines, i + 1, end));
        else ++other_blocks;
        i = end;
    }
    if (blocks.empty()) {
        std::string whole = normalize_newlines(raw_reply);
        if (other_blocks == 0 && defines_kevo_forward(whole)) return whole;
        throw ReplyError(other_blocks ? "the reply has no CUDA/C++ code block (only blocks in other languages); put "
                                        "the complete kernel source in one ```cuda block"
                                      : "the reply contains no code block; put the complete kernel source in one "
                                        "```cuda block");
    }
    if (blocks.size() == 1) return blocks[0];
    for (auto it = blocks.rbegin(); it != blocks.rend(); ++it)
        if (defines_kevo_forward(*it) || (languages.marks_candidate && languages.marks_candidate(*it))) return *it;
    throw ReplyError("the reply has " + std::to_string(blocks.size()) +
                     " code blocks and none defines kevo_forward; put the complete kernel source, with "
                     "extern \"C\" int kevo_forward(...), in one ```cuda block");
}

std::vector<EditBlock> parse_edit_blocks(const std::string& reply) {
    // Marker lines: 5 to 9 '<', '=' or '>' followed (for the outer two) by " SEARCH" / " REPLACE".
    auto marker = [](const std::string& line, char c, const std::string& word) {
        std::string t = rtrim(line);
        size_t n = t.find_first_not_of(c);
        if (n == std::string::npos) n = t.size();
        if (n < 5 || n > 9) return false;
        return word.empty() ? n == t.size() : t.substr(n) == " " + word;
    };
    const std::vector<std::string> lines = split_lines(normalize_newlines(reply));
    std::vector<EditBlock> blocks;
    for (size_t i = 0; i < lines.size(); ++i) {
        if (!marker(lines[i], '<', "SEARCH")) continue;
        const std::string which = "edit block " + std::to_string(blocks.size() + 1);
        EditBlock block;
        size_t j = i + 1;
        for (; j < lines.size() && !marker(lines[j], '=', ""); ++j) {
            if (marker(lines[j], '<', "SEARCH") || marker(lines[j], '>', "REPLACE"))
                throw ReplyError(which + ": expected a ======= line between <<<<<<< SEARCH and >>>>>>> REPLACE");
            block.search += lines[j] + "\n";
        }
        if (j == lines.size()) throw ReplyError(which + ": <<<<<<< SEARCH is never followed by a ======= line");
        for (++j; j < lines.size() && !marker(lines[j], '>', "REPLACE"); ++j) {
            if (marker(lines[j], '<', "SEARCH") || marker(lines[j], '=', ""))
                throw ReplyError(which + ": expected >>>>>>> REPLACE after the ======= line");
            block.replace += lines[j] + "\n";
        }
        if (j == lines.size()) throw ReplyError(which + ": the block is not closed with a >>>>>>> REPLACE line");
        blocks.push_back(std::move(block));
        i = j;
    }
    return blocks;
}

std::string apply_edits(const std::string& parent, const std::string& reply) {
    const std::vector<EditBlock> blocks = parse_edit_blocks(reply);
    if (blocks.empty())
        throw ReplyError("the reply contains no SEARCH/REPLACE edit block (<<<<<<< SEARCH ... ======= ... "
                         ">>>>>>> REPLACE)");
    const bool crlf = parent.find("\r\n") != std::string::npos;
    const std::string text = normalize_newlines(parent);
    const bool final_newline = !text.empty() && text.back() == '\n';
    std::vector<std::string> lines = split_lines(text);

    for (size_t b = 0; b < blocks.size(); ++b) {
        const std::string which = "edit block " + std::to_string(b + 1);
        const std::vector<std::string> search = split_lines(blocks[b].search);
        const std::vector<std::string> replace = split_lines(blocks[b].replace);
        if (search.empty()) throw ReplyError(which + ": the SEARCH part is empty; copy the lines to replace into it");
        const std::string desc = which + ": the SEARCH part " + describe_search(search);
        const std::string where = b == 0 ? "" : " (line numbers after applying the previous blocks)";

        std::vector<size_t> at = find_all(lines, search, [](const std::string& a, const std::string& s) { return a == s; });
        if (at.empty())   // tolerate whitespace differences at the ends of lines, if unambiguous
            at = find_all(lines, search, [](const std::string& a, const std::string& s) { return trim(a) == trim(s); });
        if (at.size() > 1)
            throw ReplyError(desc + " matches " + std::to_string(at.size()) + " places, at lines " + line_list(at) +
                             where + "; include more surrounding lines so that it matches exactly once");
        if (at.empty()) {
            std::string hint;
            for (const auto& l : search) {
                if (trim(l).empty()) continue;
                std::vector<size_t> first = find_all(lines, {l}, [](const std::string& a, const std::string& s) {
                    return trim(a) == trim(s);
                });
                if (!first.empty()) hint = "; its first line occurs at line " + line_list(first) + where +
                                           " but the following lines differ";
                break;
            }
            throw ReplyError(desc + " does not match the source" + hint +
                             "; SEARCH must copy existing lines exactly, including comments");
        }
        std::vector<std::string> edited(lines.begin(), lines.begin() + at[0]);
        edited.insert(edited.end(), replace.begin(), replace.end());
        edited.insert(edited.end(), lines.begin() + at[0] + search.size(), lines.end());
        lines = std::move(edited);
    }

    const std::string eol = crlf ? "\r\n" : "\n";
    std::string out;
    for (size_t i = 0; i < lines.size(); ++i) out += lines[i] + (i + 1 < lines.size() || final_newline ? eol : "");
    return out;
}

std::string candidate_from_reply(const std::string& reply, const ReplyLanguages& languages, const std::string* parent) {
    if (!parse_edit_blocks(reply).empty()) {
        if (!parent)
            throw ReplyError("the reply has SEARCH/REPLACE edit blocks but there is no parent source to apply them "
                             "to; send the complete kernel source in one ```cuda block");
        return apply_edits(*parent, reply);
    }
    return extract_kernel(reply, languages);
}

}  // namespace kevo::llm
