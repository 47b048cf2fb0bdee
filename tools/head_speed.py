"""What the output head costs a scored set and an evaluation of a real model (docs/measurements.md).

The real grid's sizes, 1 torch thread: seconds per scored set (3 sets of 4 blocks) with the head as
it is and as it was at 7fa8b64 (the weight converted to float32 per chunk; softcap and logsumexp out
of place), A/B in one process with rounds interleaved, the losses compared; then one evaluation at
the grid's evaluation settings under cProfile.

    python tools/head_speed.py [model]          (default gemma3-270m; ~5 min on one core)
"""
import cProfile
import pstats
import sys
import tempfile
import time

import torch
from torch import nn

torch.set_num_threads(1)

from depthprune.model import output_head as base
from depthprune.model import precision
from depthprune.objectives import make_objective
from depthprune.recipe import Session
from depthprune.scoring.scorer import Scorer

NEW = {k: getattr(base.OutputHead, k) for k in ("logits", "_product", "_chunk_logprobs")}


def old_logits(self, hidden):
    x = self._product(hidden)
    if self.scale != 1.0:
        x = x * self.scale
    if self.softcap:
        x = torch.tanh(x / self.softcap) * self.softcap
    return x.float()


def old_product(self, hidden):
    head = self.head
    if hidden.dtype == torch.float32 or not isinstance(head, nn.Linear):
        return head(hidden)
    bias = None if head.bias is None else head.bias.float()
    exact = hidden.dtype == torch.bfloat16 and head.weight.dtype == torch.bfloat16 and not hidden.is_cuda
    with precision.onednn_bf16_fpmath(exact):
        return nn.functional.linear(hidden.float(), head.weight.float(), bias)


def old_chunk(self, hidden, targets):
    logits = self.logits(hidden)
    return logits.gather(-1, targets[:, None]).squeeze(-1) - torch.logsumexp(logits, dim=-1)


OLD = {"logits": old_logits, "_product": old_product, "_chunk_logprobs": old_chunk}


def use(impl):
    for k, v in impl.items():
        setattr(base.OutputHead, k, v)


s = Session.open(sys.argv[1] if len(sys.argv) > 1 else "gemma3-270m", device="cpu")
print("loaded", s.dtype, f"{s.load_seconds:.1f} s", flush=True)
sets = [frozenset(x) for x in ([13, 14, 16, 17], [7, 9, 13, 16], [3, 8, 11, 15])]
for name in ("ppl", "margin"):
    obj = make_objective(name, s.profile)
    batches = obj.prepare(s.tokenizer, s.profile, s.batch_size)
    scorer = Scorer(s.model, batches, obj)
    times = {"new": [], "old": []}
    losses = {"new": [], "old": []}
    for rnd in range(2):
        for label, impl in (("new", NEW), ("old", OLD)) if rnd == 0 else (("old", OLD), ("new", NEW)):
            use(impl)
            fork = scorer.fork()
            t = time.perf_counter()
            out = [fork(S) for S in sets]
            times[label].append((time.perf_counter() - t) / len(sets))
            losses[label].append(out)
    use(NEW)
    same = all(a == b for a, b in zip(losses["new"][0], losses["old"][0]))
    print(f"{name}: {obj.params()}: per set new {min(times['new']):.2f} s, old {min(times['old']):.2f} s, "
          f"old/new {min(times['old']) / min(times['new']):.2f}; losses identical: {same}", flush=True)
    del scorer, batches

cfg = s.profile.eval_config(tasks=("hypernym", "definition", "cloze"), lambada=False, perplexity=("c4",), seq_len=256,
                            c4_windows=32, limit=603, batch_size=8)
with tempfile.TemporaryDirectory() as cache:
    prof = cProfile.Profile()
    t = time.perf_counter()
    prof.enable()
    r = s.evaluate([13, 14, 16, 17], cfg, cache_dir=cache)
    prof.disable()
    print(f"evaluation: {time.perf_counter() - t:.1f} s; avg_acc {r.metrics.get('avg_acc')}", flush=True)
    pstats.Stats(prof, stream=sys.stdout).sort_stats("cumulative").print_stats(30)
