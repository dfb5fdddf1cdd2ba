"""The README's Python examples run as written (every ```python block)."""
import os
import re

import pytest

README = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "README.md")


def blocks():
    with open(README) as f:
        text = f.read()
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


def test_readme_has_python_examples():
    assert len(blocks()) >= 2


@pytest.mark.parametrize("i", range(len(blocks())))
def test_readme_python_block_runs(i, capsys):
    exec(compile(blocks()[i], f"README.md python block {i}", "exec"), {})
