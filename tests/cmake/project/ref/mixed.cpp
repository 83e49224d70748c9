// References for the variant functions (hashed, not built by the tests).
#include <ATen/ATen.h>
