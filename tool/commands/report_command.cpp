// `kernelevo report`: a search's history, plot and candidates (evolve/report.h), reading the state only.
#include <CLI/CLI.hpp>

#include <initializer_list>
#include <iostream>
#include <memory>
#include <string>

#include "cli/cli.h"
#include "cli/validators.h"
#include "commands/commands.h"
#include "common/error.h"
#include "common/exit_code.h"
#include "common/fs.h"
#include "common/log.h"
#include "common/text.h"
#include "evolve/report.h"
#include "serve/search_report.h"
#include "store/store.h"

namespace kevo {

void register_report_command(CLI::App& app, int& rc) {
    struct ReportArgs {
        std::string state, plot, candidates;
        bool json = false;
    };
    auto r = std::make_shared<ReportArgs>();
    CLI::App* rep = app.add_subcommand("report",
        "Print a search's history, plot it and export its candidates. The history: best speedup by generation and "
        "by tokens, migrations, restarts. Reads the state only: it never writes to it or creates one.");
    rep->add_option("--state", r->state, "The search's state store: SQLite file or redis://... URL (as for search)")
        ->required()->check(cli::NonEmpty);
    rep->add_option("--plot", r->plot, "Write a plot: FILE.svg, or FILE.html with the report (charts drawn by the embedded uPlot; one file, works offline)");
    rep->add_option("--candidates", r->candidates,
                    "Write every candidate (id, generation, island, origin, status, speedup, timings, ...): FILE.csv, "
                    "or FILE.json (with source and feedback)");
    rep->add_flag("--json", r->json, "Print the report as one JSON object on stdout (schema: README, JSON output)");
    cli::add_verbosity_flags(*rep);
    cli::set_examples(*rep, {
        {"The history of a search", "kernelevo report --state ~/.cache/kernelevo/search/gelu-sm_90-0123456789ab.db"},
        {"A plot and every candidate as CSV", "kernelevo report --state run.db --plot run.html --candidates run.csv"},
        {"A run on Redis, as JSON", "kernelevo report --state 'redis://host:6379/0?prefix=gelu' --json"},
    });
    rep->callback([r, &rc] {
        auto output_kind = [](const std::string& file, std::initializer_list<const char*> exts, const char* opt) {
            const std::string ext = lower(fs::path(file).extension().string());
            for (const char* e : exts)
                if (ext == e) return ext;
            std::string list;
            for (const char* e : exts) list += (list.empty() ? "" : ", ") + std::string(e);
            throw UsageError(std::string(opt) + ": " + file + ": the file name must end in " + list);
        };
        const std::string plot_kind = r->plot.empty() ? "" : output_kind(r->plot, {".svg", ".html", ".htm"}, "--plot");
        const std::string cand_kind = r->candidates.empty() ? "" : output_kind(r->candidates, {".csv", ".json"}, "--candidates");
        auto store = store::open_store(r->state, store::Access::read_only);
        if (r->json) std::cout << evolve::report_json(*store).dump(2) << std::endl;
        else std::cout << printable(evolve::report_text(*store));  // its names and reasons: no control characters
        if (!r->plot.empty()) {
            write_file_atomic(r->plot, plot_kind == ".svg" ? evolve::report_svg(*store) : serve::search_report_html(*store));
            if (!quiet()) std::cerr << "kernelevo: plot written to " << r->plot << "\n";
        }
        if (!r->candidates.empty()) {
            write_file_atomic(r->candidates, cand_kind == ".csv" ? evolve::candidates_csv(*store)
                                                                : evolve::candidates_json(*store).dump(2) + "\n");
            if (!quiet()) std::cerr << "kernelevo: candidates written to " << r->candidates << "\n";
        }
        rc = kExitSuccess;
    });
}

}  // namespace kevo
