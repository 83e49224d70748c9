// What cache_command.cpp (status, add, remove, prune, hash) shares with cache_stats_command.cpp
// (`cache stats`): the tasks a command is given and their hashes. Internal to tool/commands.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "cache/cache.h"
#include "task/task.h"

namespace kevo {

struct StatsArgs {
    std::string cache_dir, build_dir;
    std::vector<std::string> tasks;
    bool json = false;
};

// Tasks given with --task, plus those kernelevo_optimize() wrote under BUILD/kernelevo/*/task.json.
std::map<std::string, Task> collect_tasks(const std::vector<std::string>& task_files, const std::string& build_dir);
std::map<std::string, cache::TaskHashes> hashes_of(const std::map<std::string, Task>& tasks);
// `cache stats`: prints (or --json) the summary; rc 0.
void run_stats(const StatsArgs& a, int& rc);

}  // namespace kevo
