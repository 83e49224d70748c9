// A fixture of the flag_free_errors check: the commands name their flags.
void g() { throw UsageError("--count: the command's own flag"); }
