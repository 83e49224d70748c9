// a part that knows a language by name
#include <string>
bool is_it(const std::string& s) { return s.find("@triton.jit") != std::string::npos; }
