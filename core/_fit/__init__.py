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

from __future__ import annotations

from gpuscout._fit.estimate import CACHE_TYPES, Options
from gpuscout._fit.placement import FitResult, Model, Usage, read_model
from gpuscout._fit.reader import ModelError, read_gguf

__all__ = ["CACHE_TYPES", "FitResult", "Model", "ModelError", "Options", "Usage", "read_gguf", "read_model"]
