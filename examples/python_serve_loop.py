#!/usr/bin/env python3
"""A serving loop on CPU whose KV lives in torch tensors it owns, with
radixkv caching prompt prefixes over them (and a host tier below).

What it shows: Pool.from_tensors over the loop's own per-layer K/V tensors
([num_blocks, page_size, heads, head_dim]); Tree.match_tiers / load /
tier_poll to bring demoted prefixes back from the host tier; lock, then
alloc_blocks (which evicts, writing evicted pages back to the host tier),
then insert. The model is a tiny random-weight transformer (2 layers);
every request is also run without the cache, and the generated tokens
must be identical. Prints the prefill tokens the cache saved.

    PYTHONPATH=python RADIXKV_LIBRARY=build/libradixkv.so \\
        python3 examples/python_serve_loop.py [--requests N] [--seed S]

Exit status 0 when every output matched, 1 otherwise.
"""
import argparse
import random
import sys

import torch

import radixkv

VOCAB, DIM, LAYERS, HEADS, HEAD_DIM, MAX_POS = 96, 32, 2, 2, 16, 512
PAGE, DEVICE_BLOCKS, HOST_BLOCKS = 4, 40, 256


class TinyModel:
    """Pre-norm attention + MLP blocks, learned positions, greedy decode."""

    def __init__(self, seed):
        g = torch.Generator().manual_seed(seed)

        def w(*shape):
            return torch.randn(*shape, generator=g) / shape[0] ** 0.5

        self.emb, self.pos = w(VOCAB, DIM), w(MAX_POS, DIM)
        self.layers = [dict(q=w(DIM, HEADS * HEAD_DIM), k=w(DIM, HEADS * HEAD_DIM),
                            v=w(DIM, HEADS * HEAD_DIM), o=w(HEADS * HEAD_DIM, DIM),
                            up=w(DIM, 4 * DIM), down=w(4 * DIM, DIM))
                       for _ in range(LAYERS)]
        self.out = w(DIM, VOCAB)

    def forward(self, tokens, start, past):
        """tokens at positions start.. given past[l] = (K, V) of positions
        0..start, each [start, HEADS, HEAD_DIM]. Returns the last logits
        and the new tokens' (K, V) per layer."""
        n = len(tokens)
        x = self.emb[torch.tensor(tokens)] + self.pos[start:start + n]
        new = []
        for l, p in enumerate(self.layers):
            h = torch.nn.functional.layer_norm(x, (DIM,))
            q = (h @ p["q"]).view(n, HEADS, HEAD_DIM)
            k = (h @ p["k"]).view(n, HEADS, HEAD_DIM)
            v = (h @ p["v"]).view(n, HEADS, HEAD_DIM)
            new.append((k, v))
            K = torch.cat([past[l][0], k]) if start else k
            V = torch.cat([past[l][1], v]) if start else v
            att = torch.einsum("qhd,khd->hqk", q, K) / HEAD_DIM ** 0.5
            # query i (position start + i) sees keys 0 .. start + i
            mask = torch.arange(start + n)[None, :] > (start + torch.arange(n))[:, None]
            att = att.masked_fill(mask[None], float("-inf")).softmax(-1)
            x = x + torch.einsum("hqk,khd->qhd", att, V).reshape(n, -1) @ p["o"]
            h = torch.nn.functional.layer_norm(x, (DIM,))
            x = x + torch.relu(h @ p["up"]) @ p["down"]
        return x[-1] @ self.out, new


def generate(model, prompt, max_new, past=None, start=0):
    """Greedy decode; past holds positions 0..start of the prompt."""
    past = past or [(None, None)] * LAYERS
    logits, new = model.forward(prompt[start:], start, past)
    kv = [(torch.cat([p[0], n[0]]) if start else n[0],
           torch.cat([p[1], n[1]]) if start else n[1]) for p, n in zip(past, new)]
    out = []
    pos = len(prompt)
    for _ in range(max_new):
        t = int(logits.argmax())
        out.append(t)
        logits, step = model.forward([t], pos, kv)
        kv = [(torch.cat([a[0], b[0]]), torch.cat([a[1], b[1]])) for a, b in zip(kv, step)]
        pos += 1
    return out, kv


class CachedServer:
    """Serves requests with radixkv over KV tensors this object owns."""

    def __init__(self, model):
        self.model = model
        shape = (DEVICE_BLOCKS, PAGE, HEADS, HEAD_DIM)
        self.k = [torch.zeros(shape) for _ in range(LAYERS)]  # the server's KV memory
        self.v = [torch.zeros(shape) for _ in range(LAYERS)]
        self.pool = radixkv.Pool.from_tensors(self.k, self.v, page_size=PAGE)
        self.tree = radixkv.Tree(self.pool)
        self.host = radixkv.Store("host", capacity_blocks=HOST_BLOCKS,
                                  block_bytes=self.pool.bytes_per_block)
        self.tree.attach_tiers(host=self.host)  # write-back: evicted pages go down
        self.computed = self.host_hits = 0

    def _promote(self, prompt):
        """Loads the prompt's host-tier continuation onto the device."""
        m = self.tree.match_tiers(prompt, peek=True)
        if not m.lower_tokens:
            return
        try:
            ld = self.tree.load(prompt, max_pages=m.lower_tokens // PAGE)
        except radixkv.NoSpaceError:
            return  # no room to load into: those tokens are computed instead
        done = self.tree.tier_poll()  # host copies complete in the poll
        ok = all(d["status"] == 0 for d in done)
        if ld["lease"] is not None:
            ld["lease"].release()
        if ok:
            self.host_hits += ld["num_pages"] * PAGE

    def serve(self, prompt, max_new):
        self._promote(prompt)
        m = self.tree.match(prompt)
        with self.tree.lock(m.node):  # the prefix stays put while we read it
            c = m.matched_tokens
            mb = torch.as_tensor(m.blocks.astype("int64"))
            # the cached prefix's KV, gathered from the pages' blocks
            past = [(self.k[l][mb].reshape(-1, HEADS, HEAD_DIM)[:c],
                     self.v[l][mb].reshape(-1, HEADS, HEAD_DIM)[:c])
                    for l in range(LAYERS)] if c else None
            out, kv = generate(self.model, prompt, max_new, past, c)
            self.computed += len(prompt) - c
            full = len(prompt) // PAGE * PAGE
            pages = (full - c) // PAGE
            if pages:
                try:
                    blocks = self.tree.alloc_blocks(pages)  # may evict to host
                except radixkv.NoSpaceError:
                    return out  # everything else is locked: not cached
                idx = torch.as_tensor(blocks.astype("int64"))
                for l in range(LAYERS):
                    self.k[l][idx] = kv[l][0][c:full].reshape(pages, PAGE, HEADS, HEAD_DIM)
                    self.v[l][idx] = kv[l][1][c:full].reshape(pages, PAGE, HEADS, HEAD_DIM)
                self.tree.insert(prompt[:full], list(m.blocks) + list(blocks))
                self.pool.unref(blocks)  # the tree holds its own references
        return out


def workload(n, rng):
    """Chat-like prompts: a few system prompts, users who come back with
    their previous turns as the prefix, a share of one-off prompts."""
    systems = [[rng.randrange(VOCAB) for _ in range(rng.randrange(12, 30))]
               for _ in range(3)]
    history = {}
    for _ in range(n):
        user = rng.randrange(8)
        if rng.random() < 0.15:
            yield [rng.randrange(VOCAB) for _ in range(rng.randrange(8, 40))]
            continue
        base = history.get(user) or list(systems[user % len(systems)])
        turn = base + [rng.randrange(VOCAB) for _ in range(rng.randrange(3, 12))]
        history[user] = turn if len(turn) < 160 else None
        yield turn


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=60)
    ap.add_argument("--max-new", type=int, default=4)
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args(argv)
    torch.manual_seed(a.seed)
    model = TinyModel(a.seed)
    server = CachedServer(model)
    total = mismatches = 0
    for prompt in workload(a.requests, random.Random(a.seed)):
        got = server.serve(prompt, a.max_new)
        want, _ = generate(model, prompt, a.max_new)  # no cache: full prefill
        total += len(prompt)
        if got != want:
            mismatches += 1
            print(f"MISMATCH: {len(prompt)}-token prompt: {got} != {want}")
    server.tree.check()
    st = server.tree.tier_stats()
    saved = total - server.computed
    print(f"requests {a.requests}, prompt tokens {total}, prefill computed "
          f"{server.computed}, saved {saved} ({100 * saved / max(total, 1):.1f}%), "
          f"of them loaded from the host tier {server.host_hits}; "
          f"pages written to host {st['stores_blocks'][1]}")
    print("outputs identical with and without the cache" if not mismatches
          else f"{mismatches} outputs differ")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
