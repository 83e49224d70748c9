// A hostile candidate for the compiler: the preprocessor would read /dev/zero forever.
#include </dev/zero>
