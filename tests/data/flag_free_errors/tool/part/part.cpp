// A fixture of the flag_free_errors check (tests/CMakeLists.txt): two faults, at lines 4 and 7.
// throw UsageError("--in-a-comment: never read");
void f(int x) {
    if (x < 0) throw UsageError("--count must be positive");  // a fault
    if (x == 1)
        throw UsageError("the count is one; " + std::to_string(x) +
                         " and --other-flag too");  // a fault: the statement goes on to its ;
    std::vector<std::string> argv = {"nvcc", "--version"};  // not an error
    if (x == 2) throw SettingError({kCount}, "{part.count} must not be 2");
}
