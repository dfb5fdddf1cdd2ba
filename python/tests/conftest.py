"""pytest set-up for python/tests: import radixkv from this source tree
unless PYTHONPATH already provides one (ctest points RADIXKV_LIBRARY at
the build's libradixkv.so; see CMakeLists.txt, test python_pytest)."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.normpath(os.path.join(HERE, ".."))
if SRC not in sys.path:
    sys.path.insert(0, SRC)

try:
    import torch  # noqa: F401
    HAVE_TORCH = True
except ImportError:
    HAVE_TORCH = False

try:
    import numpy  # noqa: F401
    HAVE_NUMPY = True
except ImportError:
    HAVE_NUMPY = False
