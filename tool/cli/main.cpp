// kernelevo — find fast CUDA kernels for LibTorch functions, validate them, cache them per GPU
// architecture for the CMake integration.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <iostream>

#include "cli/commands.h"
#include "common/error.h"
#include "common/process.h"

#ifndef KEVO_VERSION
#define KEVO_VERSION "0.0.0"
#endif

int main(int argc, char** argv) {
    CLI::App app{"kernelevo " KEVO_VERSION
                 " — LLM-driven evolutionary search for fast CUDA kernels, built into CMake projects.\n"
                 "Exit codes: 0 success, 1 the candidate or the work failed, 2 bad usage, task or setup."};
    app.require_subcommand(1);
    app.set_version_flag("--version", std::string(KEVO_VERSION));
    int rc = 0;
    kevo::register_validate_command(app, rc);
#ifdef KEVO_WITH_LLM
    kevo::register_llm_command(app, rc);
#endif
#ifdef KEVO_WITH_SEARCH
    kevo::register_search_command(app, rc);
#endif
#ifdef KEVO_WITH_CACHE
    kevo::register_cache_command(app, rc);
#endif
#ifdef KEVO_WITH_KERNELBENCH
    kevo::register_import_command(app, rc);
#endif
#ifdef KEVO_WITH_BENCH
    kevo::register_bench_command(app, rc);
#endif
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        int code = app.exit(e);
        return code == 0 ? 0 : 2;
    } catch (const kevo::UsageError& e) {
        std::cerr << "kernelevo: error: " << kevo::redact(e.what()) << "\n";
        return 2;
    } catch (const std::exception& e) {
        std::cerr << "kernelevo: internal error: " << kevo::redact(e.what()) << "\n";
        return 2;
    }
    return rc;
}
