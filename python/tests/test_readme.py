"""The documents' Python examples run as written (every ```python block of
README.md and docs/*.md)."""
import glob
import os
import re

import pytest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
DOCS = ["README.md"] + sorted(
    os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))


def blocks():
    """(document, index in it, code) of every ```python block."""
    out = []
    for doc in DOCS:
        with open(os.path.join(ROOT, doc)) as f:
            text = f.read()
        for i, code in enumerate(re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)):
            out.append((doc, i, code))
    return out


def test_readme_has_python_examples():
    assert any(doc == "README.md" for doc, _, _ in blocks())
    assert len(blocks()) >= 3


@pytest.mark.parametrize("doc,i,code", blocks(), ids=[f"{d}:{i}" for d, i, _ in blocks()])
def test_readme_python_block_runs(doc, i, code, capsys):
    exec(compile(code, f"{doc} python block {i}", "exec"), {})
