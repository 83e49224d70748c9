// the allowed line, and one more that is not
const char* prefixes[] = {"LC_", "TRITON_"};
const char* other = "TRITON_HOME";
