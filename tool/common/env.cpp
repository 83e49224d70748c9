// README.md's table of environment variables, made from the one table in env.h.
#include "common/env.h"

namespace kevo {

namespace {
const char* kind_text(EnvKind k) {
    switch (k) {
        case EnvKind::setting: return "setting";
        case EnvKind::diagnostic: return "diagnostic";
        case EnvKind::test_hook: return "test hook (test builds only)";
    }
    return "";
}
}  // namespace

std::string environment_markdown() {
    std::string out = "| Variable | Read by | Meaning | Default | Kind |\n|---|---|---|---|---|\n";
    for (const EnvInfo& e : kEnvTable)
        out += std::string("| `") + e.name + "` | " + e.read_by + " | " + e.meaning + " | " + e.default_value + " | " + kind_text(e.kind) + " |\n";
    return out;
}

}  // namespace kevo
