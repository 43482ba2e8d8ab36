"""EmbedID: a link holding a word-embedding matrix W (in_size, out_size)."""
from typing import Any, Optional

import numpy

from ... import link
from ...functions.connection import embed_id as _embed_id


class EmbedID(link.Link):
    """Embedding lookup. int IDs (...) -> (..., out_size)

    W (in_size, out_size) is drawn from N(0, 1) unless initialW is given; IDs equal to
    ignore_label map to zero vectors.
    """

    def __init__(self, in_size: int, out_size: int, initialW: Any = None, ignore_label: Optional[int] = None) -> None:
        super().__init__()
        for name, value in (("in_size", in_size), ("out_size", out_size)):
            if isinstance(value, bool) or not isinstance(value, (int, numpy.integer)) or value <= 0:
                raise ValueError(f"EmbedID: {name} must be a positive int, got {value!r}.")
        self.ignore_label = ignore_label
        self.add_param("W", (int(in_size), int(out_size)))
        if initialW is None:
            self.W.data[...] = numpy.random.normal(0, 1, self.W.data.shape)
        else:
            initialW = numpy.asarray(initialW) if isinstance(initialW, (list, tuple)) else initialW
            if hasattr(initialW, "shape") and tuple(initialW.shape) != self.W.data.shape:
                raise ValueError(
                    f"EmbedID: initialW has shape {tuple(initialW.shape)}, expected {self.W.data.shape}."
                )
            self.W.data[...] = initialW

    def __call__(self, x: Any) -> Any:
        """The embeddings of the IDs in x."""
        return _embed_id.embed_id(x, self.W, ignore_label=self.ignore_label)
