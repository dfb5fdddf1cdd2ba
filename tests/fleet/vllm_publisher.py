#!/usr/bin/python3
# tests/fleet/vllm_publisher.py -- a KV-event publisher in the format vLLM
# and SGLang workers use (fleet/kvev.h), written for the test from the
# format alone: a ZMQ PUB socket sending [topic, 8-byte big-endian seq,
# msgpack batch] and a ROUTER replay socket that answers [id, b"", start
# seq] with every kept batch from start on, then seq -1 and an empty
# payload. Driven by tests/fleet/test_fleet_bridge.c through files in a
# control directory (phase2, phase3): each phase's batches go out one per
# tick, then empty batches keep the sequence moving (and tell a late
# subscriber where it is). In phase 2 one batch is kept for replay but
# never sent on PUB: the gap the bridge must fill. Phase 3 is a restarted
# worker: its sequence starts again at 0 and its replay buffer is empty.
# In phase 5 the gap's batch is kept as bytes that do not decode (the
# bridge must give up on that gap yet read the whole answer), in phase 6
# a good gap follows (which must be filled, not answered by leftovers).
#
# usage: vllm_publisher.py PUB_PORT REPLAY_PORT CONTROL_DIR
import os
import sys
import time

import msgpack
import zmq

BS = 16


def tokens(prompt, pages):
    return [(prompt * 1000 + i * 7) % 32000 for i in range(pages * BS)]


def stored_array(hashes, parent, toks, lora_name=None, extra=()):
    ev = ["BlockStored", hashes, parent, toks, BS, None, "GPU", lora_name]
    return ev + list(extra)


def main():
    pub_port, replay_port, ctl = sys.argv[1], sys.argv[2], sys.argv[3]
    ctx = zmq.Context()
    pub = ctx.socket(zmq.PUB)
    pub.bind("tcp://127.0.0.1:" + pub_port)
    rep = ctx.socket(zmq.ROUTER)
    rep.bind("tcp://127.0.0.1:" + replay_port)

    a = tokens(1, 8)
    b = tokens(2, 4)
    c = tokens(3, 6)
    d = tokens(4, 3)
    a_keys = [(1 << 63) + i for i in range(8)]           # unsigned, > 2^63
    a_signed = [k - (1 << 64) for k in a_keys]            # the same bits, signed
    b_keys = [bytes([i]) * 32 for i in range(1, 5)]       # sha256-sized digests
    c_keys = [-(i + 1) for i in range(6)]                 # negative
    d_keys = [900 + i for i in range(3)]

    phases = {
        1: [
            # array form, unsigned hashes, nothing after lora_name
            [stored_array(a_keys[:4], None, a[:4 * BS])],
            # map form, signed hashes (the parent too), unknown fields
            [{"type": "BlockStored", "block_hashes": a_signed[4:],
              "parent_block_hash": a_signed[3], "token_ids": a[4 * BS:],
              "block_size": BS, "lora_id": None, "medium": "GPU",
              "some_future_field": {"x": [1, 2.5, None]}}],
            # byte-string hashes, medium absent (older engines)
            [["BlockStored", b_keys, None, b, BS, None]],
            # a LoRA adapter's blocks, and an event type from the future
            [stored_array(d_keys, None, d, lora_name="adapter-x"),
             ["BlockPinned", [1, 2], "GPU"]],
        ],
        2: [
            # kept for replay only: the gap
            [stored_array(c_keys, None, c, extra=[["unknown", 1], 7])],
            ["BlockRemoved-follows"],
        ],
        3: [
            [stored_array(d_keys, None, d, lora_name="adapter-x")],
        ],
        4: [
            [["AllBlocksCleared"]],
        ],
        5: [
            [stored_array(c_keys, None, c)],            # hidden, junk on replay
            [stored_array(a_keys[:4], None, a[:4 * BS])],
        ],
        6: [
            [stored_array(c_keys, None, c)],            # hidden, good on replay
            [],
        ],
    }
    # phase 2's second batch: B's last two pages leave, as a map
    phases[2][1] = [{"type": "BlockRemoved", "block_hashes": b_keys[2:],
                     "medium": "GPU"}]

    kept = []   # (seq, payload) for the replay socket
    seq = 0
    phase = 1
    queue = list(phases[1])
    skip_pub = {2: 0, 5: 0, 6: 0}  # phase -> index of the batch not sent on PUB
    junk = {5: 0}                  # phase -> index kept as junk for replay
    index = 0
    poller = zmq.Poller()
    poller.register(rep, zmq.POLLIN)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if not queue and phase < 6 and os.path.exists(
                os.path.join(ctl, "phase%d" % (phase + 1))):
            phase += 1
            queue = list(phases[phase])
            index = 0
            if phase == 3:
                seq, kept = 0, []
        if queue:
            events = queue.pop(0)
            hidden = skip_pub.get(phase) == index
            bad = junk.get(phase) == index
            index += 1
        else:
            events, hidden, bad = [], False, False
        # batches as [ts, events, dp_rank] and one extra unknown field
        payload = msgpack.packb([time.time(), events, 0, "extra"],
                                use_bin_type=True)
        kept.append((seq, b"\xc1" if bad else payload))
        kept = kept[-1000:]
        if not hidden:
            pub.send_multipart([b"kv-events", seq.to_bytes(8, "big"), payload])
        seq += 1
        until = time.monotonic() + 0.1
        while True:
            left = until - time.monotonic()
            if left <= 0:
                break
            if dict(poller.poll(int(left * 1000) + 1)).get(rep):
                ident, _, start = rep.recv_multipart()
                first = int.from_bytes(start, "big")
                for s, p in kept:
                    if s >= first:
                        rep.send_multipart([ident, b"", s.to_bytes(8, "big"), p])
                rep.send_multipart([ident, b"", (-1).to_bytes(8, "big", signed=True),
                                    b""])


if __name__ == "__main__":
    main()
