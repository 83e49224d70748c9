// The model folder the test made (MODEL_DIR, set on this file only: main.cpp stays the same in every test).
extern const char* const kModelDir;
const char* const kModelDir = MODEL_DIR;
