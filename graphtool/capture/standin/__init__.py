"""The accelerator stand-in: the model and its inputs on the meta device standing for a GPU (:mod:`.meta`),
and the concrete values its host syncs replay from a run on the model's own device (:mod:`.host_values`)."""
