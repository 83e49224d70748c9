#include "compile/ptxas.h"

#include <cxxabi.h>

#include <cstdlib>
#include <regex>
#include <sstream>

#include "common/fs.h"

namespace kevo {

namespace {

std::string demangle(const std::string& name) {
    int status = 0;
    char* d = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
    std::string out = status == 0 && d ? d : name;
    std::free(d);
    return out;
}

std::filesystem::path sidecar(const std::filesystem::path& library) {
    std::filesystem::path p = library;
    p += ".ptxas.json";
    return p;
}

}  // namespace

std::vector<KernelResources> parse_ptxas_info(const std::string& log) {
    static const std::regex entry(R"(Compiling entry function '([^']+)' for '([^']+)')");
    static const std::regex props(R"(Function properties for (\S+))");
    static const std::regex frame(R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
    static const std::regex regs(R"(Used (\d+) registers)");
    static const std::regex smem(R"((\d+) bytes smem)");
    static const std::regex bars(R"(used (\d+) barriers)");
    std::vector<KernelResources> out;
    std::string props_of;  // the function the next "stack frame" line belongs to
    std::istringstream in(log);
    std::string line;
    std::smatch m;
    auto find = [&](const std::string& mangled) -> KernelResources* {
        for (auto& k : out)
            if (k.mangled == mangled) return &k;
        return nullptr;
    };
    while (std::getline(in, line)) {
        if (std::regex_search(line, m, entry)) {
            KernelResources k;
            k.mangled = m[1].str();
            k.name = demangle(k.mangled);
            k.arch = m[2].str();
            out.push_back(k);
            props_of.clear();
        } else if (std::regex_search(line, m, props)) {
            props_of = m[1].str();
        } else if (std::regex_search(line, m, frame)) {
            if (KernelResources* k = find(props_of)) {
                k->stack_bytes = std::stoll(m[1].str());
                k->spill_stores = std::stoll(m[2].str());
                k->spill_loads = std::stoll(m[3].str());
            }
        } else if (line.find("ptxas info") != std::string::npos && std::regex_search(line, m, regs) && !out.empty()) {
            KernelResources& k = out.back();  // "Used ..." follows its entry's "Compiling entry function"
            k.registers = std::stoi(m[1].str());
            if (std::regex_search(line, m, smem)) k.smem_bytes = std::stoll(m[1].str());
            if (std::regex_search(line, m, bars)) k.barriers = std::stoi(m[1].str());
        }
    }
    return out;
}

std::string strip_ptxas_info(const std::string& log) {
    static const std::regex frame(R"(^\s*\d+ bytes stack frame, \d+ bytes spill stores, \d+ bytes spill loads\s*$)");
    std::istringstream in(log);
    std::string line, out;
    while (std::getline(in, line)) {
        if (line.rfind("ptxas info", 0) == 0 || std::regex_match(line, frame)) continue;
        out += line + "\n";
    }
    return out;
}

std::string resources_summary(const std::vector<KernelResources>& kernels) {
    std::string out;
    for (const auto& k : kernels) {
        std::string line = k.name + ": " + std::to_string(k.registers) + " registers";
        if (k.smem_bytes > 0) line += ", " + std::to_string(k.smem_bytes) + " B static shared memory";
        if (k.spill_stores > 0 || k.spill_loads > 0)
            line += ", SPILLS " + std::to_string(k.spill_stores) + " B stored / " + std::to_string(k.spill_loads) + " B loaded";
        else
            line += ", no spills";
        if (k.stack_bytes > 0) line += ", " + std::to_string(k.stack_bytes) + " B stack";
        out += (out.empty() ? "" : "\n") + line;
    }
    return out;
}

void save_kernel_resources(const std::filesystem::path& library, const std::vector<KernelResources>& kernels) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& k : kernels) j.push_back(k.to_json());
    write_file_atomic(sidecar(library), j.dump());
}

std::vector<KernelResources> load_kernel_resources(const std::filesystem::path& library) {
    std::vector<KernelResources> out;
    std::error_code ec;
    if (!std::filesystem::exists(sidecar(library), ec)) return out;
    try {
        for (const auto& k : nlohmann::json::parse(read_file(sidecar(library)))) out.push_back(KernelResources::from_json(k));
    } catch (const std::exception&) {
        out.clear();  // a damaged sidecar costs the figures, not the compile
    }
    return out;
}

}  // namespace kevo
