# A stand-in for an old Triton whose AOT compiler has no --grid option.
__version__ = "2.1.0"
