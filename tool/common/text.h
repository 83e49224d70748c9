// Small text helpers: XML/HTML escaping for the parts that write reports, line iteration for the
// parts that read JSON Lines files, escaping of outside text (a model's reply, a file's bytes)
// for terminals.
#pragma once
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <string>

namespace kevo {

// ASCII lower case (header names, host names, file extensions, option words).
// `s` with comments and string/character literals (quotes included) blanked to spaces, newlines and
// length kept (offsets and line numbers hold): a candidate's code as its checks read it.
inline std::string blank_comments_and_literals(const std::string& s) {
    std::string m = s;
    size_t i = 0;
    auto blank = [&](size_t from, size_t to) {
        for (size_t k = from; k < to && k < m.size(); ++k)
            if (m[k] != '\n') m[k] = ' ';
    };
    while (i < s.size()) {
        if (s.compare(i, 2, "//") == 0) {
            size_t e = s.find('\n', i);
            e = e == std::string::npos ? s.size() : e;
            blank(i, e);
            i = e;
        } else if (s.compare(i, 2, "/*") == 0) {
            size_t e = s.find("*/", i + 2);
            e = e == std::string::npos ? s.size() : e + 2;
            blank(i, e);
            i = e;
        } else if (s[i] == '"' || s[i] == '\'') {
            const char q = s[i];
            size_t e = i + 1;
            while (e < s.size() && s[e] != q && s[e] != '\n') e += s[e] == '\\' ? 2 : 1;
            blank(i, e + 1 < s.size() ? e + 1 : s.size());
            i = e + 1;
        } else {
            ++i;
        }
    }
    return m;
}

inline std::string lower(std::string s) {
    for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

// Escapes the five characters that are special in XML/HTML text and attribute values.
inline std::string xml_escape(const std::string& s) {
    std::string out;
    out.reserve(s.size());
    for (char c : s) {
        switch (c) {
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '&': out += "&amp;"; break;
            case '"': out += "&quot;"; break;
            case '\'': out += "&#39;"; break;
            default: out += c;
        }
    }
    return out;
}

// printf of one number ("%.3f", "%g", "%.1f us"...), for reports and tables.
inline std::string format_double(const char* printf_format, double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, printf_format, v);
    return buf;
}

// A token count for people: "950", "12.3k", "1.25M".
// "48.2 kB": sizes as ccache -s prints them (decimal units).
inline std::string human_size(std::uintmax_t bytes) {
    const char* units[] = {"bytes", "kB", "MB", "GB", "TB"};
    double v = static_cast<double>(bytes);
    int u = 0;
    while (v >= 1000 && u < 4) v /= 1000, ++u;
    return u == 0 ? std::to_string(bytes) + " bytes" : format_double("%.1f ", v) + units[u];
}

inline std::string tokens_str(double t) {
    if (t >= 1e6) return format_double("%.2fM", t / 1e6);
    if (t >= 1e3) return format_double("%.1fk", t / 1e3);
    return format_double("%.0f", t);
}

// Text from outside (a model's reply, a server's message, bytes of a file in an error) made safe
// to print to a terminal, and valid UTF-8 for JSON: C0 control characters other than newline and
// tab, DEL and bytes that are not UTF-8 become "\x1b"-style escapes; C1 controls (U+0080-U+009F,
// which some terminals obey) and the bidirectional overrides (U+202A-U+202E, U+2066-U+2069, which
// reorder what is shown) become "\u009b"-style escapes. Everything else is unchanged.
inline std::string printable(const std::string& text) {
    std::string out;
    out.reserve(text.size());
    char esc[16];
    for (size_t i = 0; i < text.size();) {
        const unsigned char c = static_cast<unsigned char>(text[i]);
        if (c < 0x80) {
            if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) {
                std::snprintf(esc, sizeof esc, "\\x%02x", c);
                out += esc;
            } else {
                out += static_cast<char>(c);
            }
            ++i;
            continue;
        }
        // A UTF-8 sequence: its length, and the code point when it is well formed.
        const size_t len = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? (c <= 0xef ? 3 : 0) : c >= 0xc2 ? 2 : 0;
        unsigned cp = len == 2 ? c & 0x1f : len == 3 ? c & 0x0f : c & 0x07;
        bool ok = len != 0 && i + len <= text.size();
        for (size_t k = 1; ok && k < len; ++k) {
            const unsigned char cc = static_cast<unsigned char>(text[i + k]);
            ok = (cc & 0xc0) == 0x80;
            cp = (cp << 6) | (cc & 0x3f);
        }
        ok = ok && !(len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) && !(len == 4 && (cp < 0x10000 || cp > 0x10ffff));
        if (!ok) {
            std::snprintf(esc, sizeof esc, "\\x%02x", c);
            out += esc;
            ++i;
            continue;
        }
        if (cp <= 0x9f || (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069)) {
            std::snprintf(esc, sizeof esc, "\\u%04x", cp);
            out += esc;
        } else {
            out.append(text, i, len);
        }
        i += len;
    }
    return out;
}

// printable() for a name or a cell of a table: a newline or a tab of its own would start a row or
// a column that is not there, so they are escaped too ("\x0a").
inline std::string printable_name(const std::string& text) {
    std::string flat;
    for (char c : text) flat += c == '\n' ? std::string("\\x0a") : c == '\t' ? std::string("\\x09") : std::string(1, c);
    return printable(flat);
}

// Calls f(line, number) for every line of `text` that is not blank (spaces, tabs, "\r"), `line`
// without its "\n" (a string the callee may move from), `number` counting every line from 1 so that
// messages can point at it. A final "\n" does not start another line.
template <class F>
void for_each_nonblank_line(const std::string& text, F&& f) {
    size_t number = 0;
    for (size_t pos = 0; pos < text.size();) {
        size_t end = text.find('\n', pos);
        if (end == std::string::npos) end = text.size();
        std::string line = text.substr(pos, end - pos);
        pos = end + 1;
        ++number;
        if (line.find_first_not_of(" \t\r") != std::string::npos) f(line, number);
    }
}

}  // namespace kevo
