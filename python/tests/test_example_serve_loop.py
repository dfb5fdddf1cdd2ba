"""examples/python_serve_loop.py runs, its outputs match an uncached run,
and the cache (and its host tier) saved prefill."""
import os
import re
import subprocess
import sys

import pytest

from conftest import HAVE_TORCH

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "..", "examples", "python_serve_loop.py")


@pytest.mark.skipif(not HAVE_TORCH, reason="needs torch (python3-torch)")
def test_python_serve_loop():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.join(HERE, "..")] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    r = subprocess.run([sys.executable, EXAMPLE, "--requests", "60"], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "outputs identical with and without the cache" in r.stdout
    m = re.search(r"prompt tokens (\d+), prefill computed (\d+), saved (\d+) .*"
                  r"host tier (\d+)", r.stdout)
    assert m, r.stdout
    total, computed, saved, host = map(int, m.groups())
    assert saved == total - computed and saved > 0
    assert host > 0  # some prefixes came back from the host tier
