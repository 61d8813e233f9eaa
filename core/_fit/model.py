"""The files ``fit`` reads: a model (its header, hyperparameters and tensors split into
layers) and a multimodal projector (``--mmproj``), with the projector's rough costs."""

from __future__ import annotations

import os

import attrs

from gpuscout._fit import estimate as est
from gpuscout._fit.hparams import Hparams, read_hparams
from gpuscout._fit.reader import GGUFFile, read_gguf


@attrs.frozen
class Model:
    """A read model: its header, hyperparameters and tensors split into layers."""

    file: GGUFFile
    hparams: Hparams
    layers: est.Layers

    @property
    def path(self) -> str:
        """The file it was read from."""
        return self.file.path


def read_model(path: str | os.PathLike[str], *, timeout: float = 30.0) -> Model:
    """Read ``path`` (bounded, see ``gpuscout._fit.reader``); ModelError when it cannot be used."""
    file = read_gguf(path, timeout=timeout)
    hparams = read_hparams(file)
    return Model(file=file, hparams=hparams, layers=est.split_tensors(file, hparams))


def read_projector(path: str | os.PathLike[str]) -> Model:
    """A multimodal projector file (``--mmproj``): read like a model, any architecture."""
    file = read_gguf(path)
    from gpuscout._fit.hparams import architecture

    arch = architecture(file)
    h = Hparams(
        arch=arch,
        n_layer=0,
        n_embd=0,
        n_ctx_train=0,
        n_vocab=0,
        n_head=(),
        n_head_kv=(),
        n_ff=(),
        head_k=0,
        head_v=0,
        head_k_swa=0,
        head_v_swa=0,
        n_swa=0,
        swa=(),
        kv_layers=(),
        recurrent=(),
        mla=False,
        n_embd_r=0,
        n_embd_s=0,
        n_expert=0,
        n_expert_used=0,
        n_ff_exp=0,
    )
    layers = est.Layers(
        blocks=(),
        output=0,
        input=sum(t.nbytes for t in file.tensors),
        tied=False,
        embedding=None,
        tensors_by_block=(),
        output_tensors=(),
    )
    return Model(file=file, hparams=h, layers=layers)


def projector_weights(p: Model | None) -> int:
    """The projector's weights (all its tensors)."""
    return p.layers.input if p is not None else 0


def projector_graph(p: Model | None) -> int:
    """A rough compute buffer for one image: patches x width activations and the attention
    scores (clip.vision.image_size, patch_size, embedding_length, head_count)."""
    if p is None:
        return 0
    v = p.file.values

    def num(key: str, default: int) -> int:
        value = v.get(key, default)
        return int(value) if isinstance(value, int) and not isinstance(value, bool) and value > 0 else default

    image, patch = num("clip.vision.image_size", 224), num("clip.vision.patch_size", 14)
    width, heads = num("clip.vision.embedding_length", 1024), num("clip.vision.attention.head_count", 16)
    patches = min((image // max(patch, 1)) ** 2, 1 << 20)
    return patches * width * 4 * 8 + patches * patches * heads * 4


__all__ = ["Model", "projector_graph", "projector_weights", "read_model", "read_projector"]
