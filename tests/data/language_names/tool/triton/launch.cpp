// Triton itself may name Triton
const char* kName = "triton";
