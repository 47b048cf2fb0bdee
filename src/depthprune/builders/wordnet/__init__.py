"""The WordNet 3.0 multiple-choice tasks: the database read (:mod:`.reader`), candidate items
(:mod:`.candidates`), splits and distractors (:mod:`.distractors`), and the writer
(:mod:`.tasks`, ``depthprune build wordnet-tasks``)."""
