"""One item in the shapes other users need: a Commonsense-170k instruction record (the commonsense
calibration mix, :data:`COMMONSENSE_MIX`) and plain text with its answer (the training corpus).
"""

from __future__ import annotations

import random

from ..world import World
from .everyday import hellaswag, piqa, siqa, winogrande
from .exam import arc_challenge, arc_easy, obqa
from .reading import boolq
from .wording import cap


# ---------------------------------------------------------------------------
# Commonsense-170k (LLM-Adapters) records
# ---------------------------------------------------------------------------
def commonsense_record(kind: str, item: dict) -> dict:
    """Render an item as a Commonsense-170k record (instruction/input/output/answer)."""
    if kind == "boolq":
        ins = (f"Please answer the following question with true or false, question: "
               f"{item['passage']} {item['question']}?\n\nAnswer format: true/false")
        ans = "true" if item["label"] else "false"
    elif kind == "piqa":
        ins = (f"Please choose the correct solution to the question: {item['goal']}\n\n"
               f"Solution1: {item['sol1']}\n\nSolution2: {item['sol2']}\n\nAnswer format: solution1/solution2")
        ans = f"solution{item['label'] + 1}"
    elif kind == "siqa":
        ins = (f"Please choose the correct answer to the question: {item['context']} {item['question']}\n\n"
               f"Answer1: {item['answerA']}\n\nAnswer2: {item['answerB']}\n\nAnswer3: {item['answerC']}\n\n"
               f"Answer format: answer1/answer2/answer3")
        ans = f"answer{item['label']}"
    elif kind == "hellaswag":
        ends = "\n\n".join(f"Ending{i + 1}: {e}" for i, e in enumerate(item["endings"]))
        ins = (f"Please choose the correct ending to complete the given sentence: "
               f"{item['activity_label']}: {item['ctx']}\n\n{ends}\n\nAnswer format: ending1/ending2/ending3/ending4")
        ans = f"ending{int(item['label']) + 1}"
    elif kind == "winogrande":
        ins = (f"Please choose the correct answer to fill in the blank to complete the given sentence: "
               f"{item['sentence']}\n\nOption1: {item['option1']}\n\nOption2: {item['option2']}\n\n"
               f"Answer format: option1/option2")
        ans = f"option{item['answer']}"
    elif kind in ("arc_easy", "arc_challenge", "obqa"):
        q = item.get("question", item.get("question_stem"))
        opts = "\n\n".join(f"Answer{i + 1}: {t}" for i, t in enumerate(item["choices"]["text"]))
        n = len(item["choices"]["text"])
        fmt = "/".join(f"answer{i + 1}" for i in range(n))
        ins = f"Please choose the correct answer to the question: {q}\n\n{opts}\n\nAnswer format: {fmt}"
        ans = f"answer{item['choices']['label'].index(item['answerKey']) + 1}"
    else:
        raise ValueError(kind)
    return {"instruction": ins, "input": "", "output": f"the correct answer is {ans}", "answer": ans}


# Mix of the real Commonsense-170k (approximate shares of its eight sources).
COMMONSENSE_MIX = {"boolq": 0.06, "piqa": 0.10, "siqa": 0.20, "hellaswag": 0.23, "winogrande": 0.24,
                   "arc_easy": 0.05, "arc_challenge": 0.03, "obqa": 0.09}


def any_item(kind: str, world: World, rng: random.Random, split: str) -> dict:
    return {"boolq": lambda: boolq(world, rng, split), "piqa": lambda: piqa(world, rng, split),
            "siqa": lambda: siqa(world, rng, split), "hellaswag": lambda: hellaswag(world, rng, split),
            "winogrande": lambda: winogrande(world, rng, split),
            "arc_easy": lambda: arc_easy(world, rng, split), "arc_challenge": lambda: arc_challenge(world, rng, split),
            "obqa": lambda: obqa(world, rng, split)}[kind]()


def commonsense(world: World, rng: random.Random, split: str) -> dict:
    kinds = list(COMMONSENSE_MIX)
    kind = rng.choices(kinds, weights=[COMMONSENSE_MIX[k] for k in kinds])[0]
    return commonsense_record(kind, any_item(kind, world, rng, split))


def render_answered(kind: str, item: dict) -> str:
    """Render an item with its answer as plain text in the lm-eval prompt style."""
    if kind == "hellaswag":
        return f"{item['activity_label']}: {item['ctx']} {item['endings'][int(item['label'])]}"
    if kind == "winogrande":
        opt = item["option" + item["answer"]]
        return item["sentence"].replace("_", opt)
    if kind in ("arc_easy", "arc_challenge"):
        ans = item["choices"]["text"][item["choices"]["label"].index(item["answerKey"])]
        return f"Question: {item['question']}\nAnswer: {ans}"
    if kind == "obqa":
        ans = item["choices"]["text"][item["choices"]["label"].index(item["answerKey"])]
        return f"{item['question_stem']} {ans}."
    if kind == "piqa":
        return f"Question: {item['goal']}\nAnswer: {item['sol' + str(item['label'] + 1)]}"
    if kind == "boolq":
        return f"{item['passage']}\nQuestion: {item['question']}?\nAnswer: {'yes' if item['label'] else 'no'}"
    if kind == "siqa":
        ans = item["answer" + "ABC"[int(item["label"]) - 1]]
        return f"{item['context']} {item['question']} {cap(ans)}."
    if kind == "lambada":
        return item["text"]
    raise ValueError(kind)
