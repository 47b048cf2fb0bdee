"""Task items in the formats of the paper's benchmarks, drawn from the world.

Each generator returns one record with exactly the fields of the real dataset
that lm-eval reads (HellaSwag, WinoGrande, ARC, PIQA, BoolQ, LAMBADA), so the
fixture tasks can mirror lm-eval's own YAMLs.  The same generators feed the
training corpus (rendered as text *with* the answer, on train-split entities
and train-only phrasings) and the evaluation fixtures (held-out entities,
held-out phrasings) -- as in real pretraining, the model has seen the task
*styles*, never the test items.

What each task needs from the model (why it is not n-gram memorisation):

* hellaswag: script knowledge -- which step of an everyday procedure comes next
  after the steps already told, for an unseen person.
* winogrande: two thirds knowledge schemas whose options are things (which of
  two objects is too big for the other, which material floats/burns/breaks,
  how each animal class escapes, which tool does a job), one third name
  schemas in which an unseen name must be bound to a job or a comparison
  stated earlier in the sentence.
* arc_easy: one general rule (class traits, material properties, tool uses,
  workplaces) applied to an unseen species or a stated class.
* arc_challenge: two steps -- binding two unseen species to classes and then a
  trait; adding counts; the maximum of stated ages; town -> region hops.
* piqa: tool/material knowledge under goal phrasings never seen in training.
* boolq: verifying a claim against a passage -- about an unseen person or
  species (reading, sometimes through a class rule: the passage says "bird",
  the question asks about feathers), or about towns, materials, tools and
  animal classes (world knowledge the passage does not spell out).
* lambada: the last word (a workplace, an object, a name, a town) is fixed by
  something said sentences earlier; the last sentence alone does not
  determine it.  Variants range from one cue in the passage (a job -> its
  workplace; the one object carried) to binding among two people.

One module per job; this package re-exports the names its callers use:

* :mod:`depthprune.tiny.items.wording` -- phrasing the generators share (articles, counts, pets);
* :mod:`depthprune.tiny.items.everyday` -- hellaswag, winogrande, piqa, siqa;
* :mod:`depthprune.tiny.items.exam` -- arc_easy, arc_challenge, obqa;
* :mod:`depthprune.tiny.items.reading` -- boolq, lambada;
* :mod:`depthprune.tiny.items.records` -- an item as a Commonsense-170k record or as answered text.
"""

from __future__ import annotations

from .everyday import MATERIAL_GOALS, WINO_MATERIAL, hellaswag, piqa, siqa, winogrande
from .exam import arc_challenge, arc_easy, obqa
from .reading import boolq, lambada
from .records import COMMONSENSE_MIX, any_item, commonsense, commonsense_record, render_answered
from .wording import LETTERS, an, cap, num, pets_phrase, step, two_people

__all__ = ["COMMONSENSE_MIX", "LETTERS", "MATERIAL_GOALS", "WINO_MATERIAL", "an", "any_item", "arc_challenge",
           "arc_easy", "boolq", "cap", "commonsense", "commonsense_record", "hellaswag", "lambada", "num", "obqa",
           "pets_phrase", "piqa", "render_answered", "siqa", "step", "two_people", "winogrande"]
