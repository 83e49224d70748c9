# A stand-in for Triton in CI (no Triton in Debian): only triton.tools.compile, which answers
# from the recorded AOT output in tests/data/triton/aot instead of compiling.
__version__ = "3.6.0+recorded"
