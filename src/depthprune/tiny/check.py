"""Quality checks for the tiny family (``python -m depthprune.tiny.build check``).

Measures, for one model directory:

* dense validation loss / perplexity on C4-like validation rows;
* zero-shot accuracy of the six fixture tasks and LAMBADA-like ppl/acc with
  lm-eval (``simple_evaluate`` on ``HFLM(pretrained=model, tokenizer=tok)``),
  next to the chance level of each task;
* a single-layer-removal sweep: the increase of the C4-like validation loss
  and of the commonsense margin loss when each decoder layer alone is removed
  (a sanity check only -- the library has the real masking mechanism);
* the dense margin on the Commonsense-like set (64 records, seed 0): for each
  record the mean log-prob of each answer label's tokens (`` answer2``) given
  ``instruction + "\\n\\n" + "the correct answer is"``; margin =
  sum_{j != gold} (l_gold - l_j).  Also with the option's own text scored
  instead of its label (the library's ``answer="option"`` variant).

Results are stored under ``"evaluation"`` in the model's card.json (and README).
"""

from __future__ import annotations

import json
import math
import random
import time
from pathlib import Path

import numpy as np

from .fixtures import parse_answer_format

CHANCE = {"tiny_hellaswag": 0.25, "tiny_winogrande": 0.5, "tiny_arc_easy": 0.25, "tiny_arc_challenge": 0.25,
          "tiny_piqa": 0.5, "tiny_boolq": 0.5}
TASKS = list(CHANCE) + ["tiny_lambada"]


def _assets() -> Path:
    return Path(__file__).resolve().parents[1] / "assets" / "tiny"


def c4_rows(tok, seq_len: int = 128, n: int = 32, split: str = "validation") -> np.ndarray:
    """Non-overlapping ``seq_len`` windows from the start of each long-enough document."""
    with open(_assets() / "data" / "c4" / f"{split}.jsonl", encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f]
    rows = []
    for t in texts:
        ids = tok(t)["input_ids"]
        if len(ids) >= seq_len:
            rows.append(ids[:seq_len])
        if len(rows) == n:
            break
    return np.asarray(rows, dtype=np.int64)


def mean_nll(model, rows: np.ndarray, batch_size: int = 32) -> float:
    import torch

    tot, n = 0.0, 0
    with torch.no_grad():
        for i in range(0, len(rows), batch_size):
            x = torch.from_numpy(rows[i:i + batch_size])
            logits = model(input_ids=x, use_cache=False).logits.float()
            tot += torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)), x[:, 1:].reshape(-1),
                                                     reduction="sum").item()
            n += x[:, 1:].numel()
    return tot / n


def option_texts(instruction: str, labels: list[str]) -> list[str]:
    """The text after each ``Label:`` line (``Answer2: feathers``); ``true``/``false`` are their own text."""
    import re

    marks = [re.search(rf"\b{re.escape(lab)}\s*:", instruction, re.IGNORECASE) for lab in labels]
    if not all(marks):
        return list(labels)
    end = instruction.rfind("Answer format:")
    stops = sorted([m.start() for m in marks] + [end])
    return [" ".join(instruction[m.end():min(x for x in stops if x > m.start())].split()) for m in marks]


def margin_items(tok, n: int = 64, seed: int = 0, answer: str = "label") -> list[dict]:
    """Items of the margin objective: ``answer="label"`` scores `` answer2``, ``"option"`` the option's text."""
    recs = json.loads((_assets() / "data" / "commonsense" / "train.json").read_text())
    recs = random.Random(seed).sample(recs, n)
    out = []
    for r in recs:
        labels = parse_answer_format(r["instruction"])
        prompt = r["instruction"] + "\n\n" + "the correct answer is"
        p_ids = tok(prompt)["input_ids"]
        conts = []
        for lab in (labels if answer == "label" else option_texts(r["instruction"], labels)):
            full = tok(prompt + " " + lab)["input_ids"]
            assert full[:len(p_ids)] == p_ids
            conts.append(full[len(p_ids):])
        out.append({"prompt": p_ids, "conts": conts, "gold": labels.index(r["answer"])})
    return out


def margin(model, items: list[dict]) -> tuple[float, float]:
    """(mean margin, accuracy of argmax label)."""
    import torch

    margins, correct = [], 0
    with torch.no_grad():
        for it in items:
            seqs = [it["prompt"] + c for c in it["conts"]]
            L = max(map(len, seqs))
            x = torch.full((len(seqs), L), 2, dtype=torch.long)
            for i, s in enumerate(seqs):
                x[i, :len(s)] = torch.tensor(s)
            lp = torch.log_softmax(model(input_ids=x, use_cache=False).logits.float(), -1)
            ells = []
            for i, c in enumerate(it["conts"]):
                pos = range(len(it["prompt"]) - 1, len(it["prompt"]) - 1 + len(c))
                ells.append(float(np.mean([lp[i, p, t].item() for p, t in zip(pos, c)])))
            g = it["gold"]
            margins.append(sum(ells[g] - e for j, e in enumerate(ells) if j != g))
            correct += int(np.argmax(ells) == g)
    return float(np.mean(margins)), correct / len(items)


class removed_layer:
    """Context manager: the model without decoder layer ``i`` (sanity-check only)."""

    def __init__(self, model, i: int):
        self.model, self.i = model, i

    def __enter__(self):
        import torch

        inner = self.model.model
        self.saved = (inner.layers, self.model.config.num_hidden_layers, getattr(self.model.config, "layer_types", None))
        inner.layers = torch.nn.ModuleList([l for j, l in enumerate(self.saved[0]) if j != self.i])
        self.model.config.num_hidden_layers -= 1
        if self.saved[2] is not None:
            self.model.config.layer_types = [t for j, t in enumerate(self.saved[2]) if j != self.i]
        return self.model

    def __exit__(self, *exc):
        inner = self.model.model
        inner.layers, self.model.config.num_hidden_layers, lt = self.saved
        if lt is not None:
            self.model.config.layer_types = lt


def lm_eval_scores(model, tok, limit: int | None = None, batch_size: int = 32) -> dict:
    from lm_eval import simple_evaluate
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager

    tm = TaskManager(include_path=str(_assets() / "tasks"), include_defaults=False)
    lm = HFLM(pretrained=model, tokenizer=tok, batch_size=batch_size, device="cpu")
    t0 = time.time()
    res = simple_evaluate(model=lm, tasks=TASKS, task_manager=tm, limit=limit, log_samples=False,
                          bootstrap_iters=0, random_seed=0, numpy_random_seed=0, torch_random_seed=0,
                          fewshot_random_seed=0)
    out = {"seconds": round(time.time() - t0, 1)}
    for t in TASKS:
        r = res["results"][t]
        d = {k.split(",")[0]: round(float(v), 4) for k, v in r.items() if "," in k and "stderr" not in k}
        if t in CHANCE:
            d["chance"] = CHANCE[t]
        out[t] = d
    return out


def check_model(model_dir: str | Path, threads: int = 1, limit: int | None = None, sweep: bool = True,
                lm_eval: bool = True, write: bool = True) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from .train import write_card

    torch.set_num_threads(threads)
    model_dir = Path(model_dir)
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    rows = c4_rows(tok, 128, 32)
    res: dict = {"c4_validation_128x32": {}}
    dense = mean_nll(model, rows)
    res["c4_validation_128x32"] = {"loss": round(dense, 4), "ppl": round(math.exp(dense), 3)}
    items = margin_items(tok, 64)
    m, acc = margin(model, items)
    res["commonsense_margin_64"] = {"mean_margin": round(m, 4), "label_accuracy": round(acc, 4),
                                    "prompt": "instruction + '\\n\\n' + 'the correct answer is' + ' ' + label"}
    items_opt = margin_items(tok, 64, answer="option")
    m_opt, acc_opt = margin(model, items_opt)
    res["commonsense_margin_64_option_text"] = {
        "mean_margin": round(m_opt, 4), "accuracy": round(acc_opt, 4),
        "prompt": "instruction + '\\n\\n' + 'the correct answer is' + ' ' + option text"}
    if sweep:
        t0 = time.time()
        d_loss, d_margin, d_margin_opt = [], [], []
        for i in range(model.config.num_hidden_layers):
            with removed_layer(model, i) as pm:
                d_loss.append(round(mean_nll(pm, rows) - dense, 4))
                d_margin.append(round(-(margin(pm, items)[0]) + m, 4))
                d_margin_opt.append(round(-(margin(pm, items_opt)[0]) + m_opt, 4))
        res["single_layer_removal"] = {"delta_c4_loss": d_loss, "delta_margin_loss": d_margin,
                                       "delta_margin_loss_option_text": d_margin_opt,
                                       "seconds": round(time.time() - t0, 1)}
    if lm_eval:
        res["lm_eval"] = lm_eval_scores(model, tok, limit=limit)
    if write:
        card_p = model_dir / "card.json"
        card = json.loads(card_p.read_text())
        card["evaluation"] = res
        write_card(model_dir, card)
    return res
