"""Does rounding the output head's logits to bf16 change a decision? (issue 21, item 2)

Same bf16 model, same bf16 hidden states; head A = the model's bf16 matmul (logits rounded to bf16,
then cast), head B = the suite's OutputHead (float32 product of the exact bf16 inputs). Decisions:
the argmin of greedy's first two steps and the order of every pair of candidate losses.

    python tools/head_precision.py smollm2-135m [out.json]      (DESIGN.md, "Numeric precision")
"""
import itertools
import json
import sys
import time

import torch

torch.set_num_threads(2)
from depthprune.model.output_head import OutputHead
from depthprune.recipe import Session
from depthprune.scoring.scorer import Scorer

model_id = sys.argv[1] if len(sys.argv) > 1 else "smollm2-135m"
s = Session.open(model_id, device="cpu", dtype="bfloat16", batch_size=8)
print("loaded", s.dtype, f"{s.load_seconds:.1f}s")
fp32_product = OutputHead._product  # the suite's head: float32 logits


def bf16_product(self, hidden):  # a bf16 matmul: logits rounded to bf16 (then cast by logits())
    return self.head(hidden)


params = {"ppl": dict(dataset="c4_train", n_samples=8, seq_len=128, seed=0),
          "margin": dict(dataset="commonsense170k", n_items=8, seed=0, answer="cloze")}
if model_id.startswith("tiny"):
    params = {"ppl": dict(dataset="c4_train", n_samples=32, seq_len=128, seed=0),
              "margin": dict(dataset="commonsense170k", n_items=128, seed=0, answer="cloze")}
from depthprune.objectives import make_objective

out = {}
for name, p in params.items():
    obj = make_objective(name, s.profile, **p)
    batches = obj.prepare(s.tokenizer, s.profile, s.batch_size)
    losses = {}
    for head in ("bf16", "fp32"):
        OutputHead._product = bf16_product if head == "bf16" else fp32_product
        t = time.perf_counter()
        sc = Scorer(s.model, batches, obj)
        L = sc.n_layers
        d = {frozenset(): sc.dense_loss}
        for i in range(L):
            d[frozenset([i])] = sc(frozenset([i]))
        losses[head] = (sc, d, time.perf_counter() - t)
    OutputHead._product = fp32_product
    # step 1 decisions on both heads, step 2 from each head's own argmin
    a, b = losses["bf16"][1], losses["fp32"][1]
    L = losses["bf16"][0].n_layers
    singles = [frozenset([i]) for i in range(L)]
    la, lb = [a[x] for x in singles], [b[x] for x in singles]
    ia, ib = min(range(L), key=la.__getitem__), min(range(L), key=lb.__getitem__)
    srt = sorted(lb)
    diffs = [abs(x - y) for x, y in zip(la, lb)]
    rel = [abs(x - y) / abs(y) for x, y in zip(la, lb)]
    # step 2
    pairs = [frozenset([ib, j]) for j in range(L) if j != ib]
    pa = [losses["bf16"][0](p) for p in pairs]
    pb = [losses["fp32"][0](p) for p in pairs]
    ja, jb = min(range(len(pairs)), key=pa.__getitem__), min(range(len(pairs)), key=pb.__getitem__)
    srt2 = sorted(pb)
    # rank agreement of all candidate losses
    from scipy.stats import kendalltau
    tau1 = kendalltau(la, lb).statistic
    tau2 = kendalltau(pa, pb).statistic
    flips = sum(1 for (x1, y1), (x2, y2) in itertools.combinations(list(zip(la + pa, lb + pb)), 2)
                if (x1 - x2) * (y1 - y2) < 0)
    out[name] = dict(dense=(a[frozenset()], b[frozenset()]), dense_rel=abs(a[frozenset()] - b[frozenset()]) / abs(b[frozenset()]),
                     step1_argmin=(ia, ib), step1_gap_fp32=srt[1] - srt[0], max_abs_change=max(diffs + [abs(x-y) for x,y in zip(pa,pb)]),
                     max_rel_change=max(rel), step2_argmin=(sorted(pairs[ja]), sorted(pairs[jb])), step2_gap_fp32=srt2[1] - srt2[0],
                     kendall_tau=(tau1, tau2), pair_order_flips=flips,
                     seconds={"bf16": losses["bf16"][2], "fp32": losses["fp32"][2]})
    print(name, json.dumps(out[name], default=str))
json.dump(out, sys.stdout if len(sys.argv) < 3 else open(sys.argv[2], "w"), indent=1, default=str)
