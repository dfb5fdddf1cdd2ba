"""Registration with SGLang, against a stand-in `sglang` package written
here (a registry function and a BasePrefixCache base), in a subprocess so
the stand-in never leaks into other tests; and the entry point file that
the install puts beside the package."""
import configparser
import os
import subprocess
import sys
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.normpath(os.path.join(HERE, ".."))

FAKE = {
    "sglang/__init__.py": "",
    "sglang/srt/__init__.py": "",
    "sglang/srt/mem_cache/__init__.py": "",
    "sglang/srt/mem_cache/registry.py": """
        BACKENDS = {}
        def register_radix_cache_backend(name, factory):
            BACKENDS[name] = factory
    """,
    "sglang/srt/mem_cache/base_prefix_cache.py": """
        import abc
        class BasePrefixCache(abc.ABC):
            @abc.abstractmethod
            def match_prefix(self, key): ...
            @abc.abstractmethod
            def some_hook_radixkv_does_not_know(self): ...
    """,
}

CHECK = """
import types
import radixkv.sglang as m
from sglang.srt.mem_cache.base_prefix_cache import BasePrefixCache
from sglang.srt.mem_cache.registry import BACKENDS
assert issubclass(m.RadixKVCache, BasePrefixCache)
assert m.register() is True
factory = BACKENDS["radixkv"]
params = types.SimpleNamespace(req_to_token_pool=None, token_to_kv_pool_allocator=None,
                               page_size=4, disable=False, enable_kv_cache_events=False)
cache = factory(params)
assert isinstance(cache, BasePrefixCache)
assert cache.insert(m.RadixKey(list(range(8)))) == 0
assert len(cache.match_prefix(m.RadixKey(list(range(8)))).device_indices) == 8
print("registered")
"""


def write_fake(root):
    for rel, text in FAKE.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(textwrap.dedent(text))


def test_registers_with_sglang_backend_registry(tmp_path):
    write_fake(str(tmp_path))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), SRC]))
    r = subprocess.run([sys.executable, "-c", CHECK], env=env, capture_output=True, text=True)
    assert r.returncode == 0 and "registered" in r.stdout, r.stdout + r.stderr


def test_register_without_sglang_says_so():
    import radixkv.sglang as m
    if "sglang" in sys.modules or any(
            os.path.isdir(os.path.join(p, "sglang")) for p in sys.path if p):
        return  # a real SGLang is installed: the test above covers it
    assert m.register() is False


def test_entry_point_names_the_register_function():
    cp = configparser.ConfigParser()
    cp.read(os.path.join(SRC, "entry_points.txt"))
    target = cp["sglang.srt.plugins"]["radixkv"]
    mod, func = target.split(":")
    import importlib
    assert callable(getattr(importlib.import_module(mod), func))
