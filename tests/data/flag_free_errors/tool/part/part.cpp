// A fixture of the flag_free_errors check (tests/CMakeLists.txt): three faults, at lines 4, 7 and 8.
// throw UsageError("--in-a-comment: never read");
void f(int x) {
    if (x < 0) throw UsageError("--count must be positive");  // a fault
    if (x == 1)
        throw UsageError("the count is one; " + std::to_string(x) +
                         " and --other-flag too");  // a fault: the statement goes on to its ;
    std::vector<std::string> argv = {"nvcc", "--version"};  // a fault: every literal is read
    if (x == 2) throw SettingError({kCount}, "{part.count} must not be 2");
}
