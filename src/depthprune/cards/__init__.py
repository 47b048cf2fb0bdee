"""The real models' cards (``assets/real/models/<id>/``): what a model is (:mod:`.card`), what it
does through the benchmark's core (:mod:`.measure`, ``depthprune measure card``), and its dense
accuracy on the WordNet tasks (:mod:`.wordnet_accuracy`, ``depthprune measure wordnet-accuracy``)."""
