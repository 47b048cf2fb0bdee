"""What slicing the head's row-wise passes saves a gemma3 scored set and an evaluation (docs/measurements.md).

A/B in one process, rounds interleaved, 1 torch thread: the head's scale, softcap, logsumexp and
log-softmax on cache-sized row slices (:meth:`OutputHead.logit_rows`, now) against one pass over the
whole 2,048-row chunk (before); the losses, per-item log-probabilities and greedy flags compared bit
for bit, and the peak RSS of each evaluation's process heap (ru_maxrss grows only: "now" runs first).

    python tools/head_slices.py [model]          (default gemma3-270m; ~4 min on one core)
"""
import resource
import sys
import tempfile
import time

import torch

torch.set_num_threads(1)

from depthprune.evaluation.lm_adapter import SharedPrefixLM
from depthprune.model import output_head as base
from depthprune.objectives import make_objective
from depthprune.recipe import Session
from depthprune.scoring.scorer import Scorer

NOW = {"chunk": base.OutputHead._chunk_logprobs, "adapter": SharedPrefixLM.__dict__["_target_logprobs"]}


def whole_chunk(self, hidden, targets):
    logits = self.logits(hidden)
    picked = logits.gather(-1, targets[:, None]).squeeze(-1)
    return picked - (torch.logsumexp(logits, dim=-1) if logits.requires_grad else base._logsumexp_(logits))


def whole_adapter(head, hidden, targets):
    lps, greedy = [], []
    for s in range(0, hidden.shape[0], head.chunk_tokens):
        logprobs = torch.log_softmax(head.logits(hidden[s : s + head.chunk_tokens]), dim=-1)
        tgt = targets[s : s + head.chunk_tokens]
        lps.append(logprobs.gather(-1, tgt[:, None]).squeeze(-1))
        greedy.append(logprobs.argmax(dim=-1) == tgt)
    return torch.cat(lps), torch.cat(greedy)


BEFORE = {"chunk": whole_chunk, "adapter": staticmethod(whole_adapter)}


def use(impl):
    base.OutputHead._chunk_logprobs = impl["chunk"]
    SharedPrefixLM._target_logprobs = impl["adapter"]


def rss_gb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


s = Session.open(sys.argv[1] if len(sys.argv) > 1 else "gemma3-270m", device="cpu")
print("loaded", s.dtype, f"{s.load_seconds:.1f} s", flush=True)
sets = [frozenset(x) for x in ([13, 14, 16, 17], [7, 9, 13, 16], [3, 8, 11, 15])]
for name in ("ppl", "margin"):
    obj = make_objective(name, s.profile)
    batches = obj.prepare(s.tokenizer, s.profile, s.batch_size)
    scorer = Scorer(s.model, batches, obj)
    times, losses = {"now": [], "before": []}, {"now": [], "before": []}
    for rnd in range(2):
        for label in ("now", "before") if rnd == 0 else ("before", "now"):
            use(NOW if label == "now" else BEFORE)
            fork = scorer.fork()
            t = time.perf_counter()
            losses[label].append([fork(S) for S in sets])
            times[label].append((time.perf_counter() - t) / len(sets))
    same = losses["now"] == losses["before"] and losses["now"][0] == losses["now"][1]
    print(f"{name}: per set now {min(times['now']):.2f} s, before {min(times['before']):.2f} s, "
          f"before/now {min(times['before']) / min(times['now']):.2f}; losses identical: {same}", flush=True)
    del scorer, batches

cfg = s.profile.eval_config(tasks=("hypernym", "definition", "cloze"), lambada=False, perplexity=("c4",), seq_len=256,
                            c4_windows=32, limit=603, batch_size=8)
out = {}
for label in ("now", "before"):
    use(NOW if label == "now" else BEFORE)
    with tempfile.TemporaryDirectory() as cache:
        t = time.perf_counter()
        r = s.evaluate([13, 14, 16, 17], cfg, cache_dir=cache)
        out[label] = r
        print(f"evaluation {label}: {time.perf_counter() - t:.1f} s; avg_acc {r.metrics.get('avg_acc')}; "
              f"peak RSS so far {rss_gb():.2f} GB", flush=True)
print("evaluations identical (metrics, per-item outcomes, window NLLs):",
      out["now"].metrics == out["before"].metrics and out["now"].items == out["before"].items
      and out["now"].windows == out["before"].windows)
