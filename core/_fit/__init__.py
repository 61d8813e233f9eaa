"""``gpuscout fit``: read a GGUF model safely, estimate what llama.cpp allocates, place it.

- ``gpuscout._fit.reader``: the bounded GGUF header reader (``read_gguf``, ``ModelError``);
- ``gpuscout._fit.hparams``: the hyperparameters llama.cpp reads;
- ``gpuscout._fit.estimate``: model buffers, KV cache, recurrent state, compute buffers;
- ``gpuscout._fit.model``: the model and projector files read for ``fit``;
- ``gpuscout._fit.placement``: ``Scout.fit``'s work: where the layers land, ``FitResult``;
- ``gpuscout._fit.usage``: what each backend holds under a placement;
- ``gpuscout._fit.verdict``: whether that fits the devices' and the system's free memory.

Nothing here touches a device; see docs/fit.md.
"""
