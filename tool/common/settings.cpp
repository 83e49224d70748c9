// The table of environment variables as markdown, made from the one table of settings (settings.h).
#include "common/settings.h"

namespace kevo {

std::string environment_markdown() {
    std::string out = "| Variable | Read by | Meaning | Default | Kind |\n|---|---|---|---|---|\n";
    for (const Setting* e : kEnvTable) {
        const char* kind = e->kind == EnvKind::diagnostic  ? "diagnostic"
                           : e->kind == EnvKind::test_hook ? "test hook (test builds only)"
                                                           : "setting";
        out += std::string("| `") + e->variable + "` | " + e->read_by + " | " + e->meaning + " | " + e->default_value +
               " | " + kind + " |\n";
    }
    return out;
}

}  // namespace kevo
