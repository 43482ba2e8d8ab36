"""MLPConvolution2D: Network in Network's mlpconv, a convolution followed by 1x1 convolutions."""
import numbers
from typing import Any, Callable, Optional

from ... import link
from ...functions.activation import relu as _relu
from . import _weights as _w
from . import convolution_2d as _conv


class MLPConvolution2D(link.ChainList):
    """conv_0 (ksize, stride, pad), then 1x1 conv_1 .. conv_{L-1}. (n, c_I, h, w) -> (n, out_channels[-1], h_O, w_O)

    Child i (npz prefix 'i/') maps out_channels[i-1] to out_channels[i] channels. `activation`
    runs after every convolution except the last: the link's output is not activated.
    """

    def __init__(self, in_channels: Optional[int], out_channels: Any, ksize: Any, stride: Any = 1,
                 pad: Any = 0, wscale: float = 1, activation: Callable = _relu.relu,
                 use_cudnn: bool = True) -> None:
        if isinstance(out_channels, (str, bytes)) or not hasattr(out_channels, "__len__"):
            raise TypeError(
                f"MLPConvolution2D: out_channels must be a tuple of ints (one per convolution), "
                f"got {type(out_channels).__name__} {out_channels!r}."
            )
        out_channels = tuple(out_channels)
        if not out_channels:
            raise ValueError("MLPConvolution2D: out_channels is empty; give at least one channel count.")
        for i, n in enumerate(out_channels):
            if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n <= 0:
                raise ValueError(f"MLPConvolution2D: out_channels[{i}] must be a positive int, got {n!r}.")
        _w.check_positive("MLPConvolution2D", "in_channels", in_channels, allow_none=True)
        if not callable(activation):
            raise TypeError(f"MLPConvolution2D: activation must be callable, got {type(activation).__name__}.")
        convs = [_conv.Convolution2D(in_channels, out_channels[0], ksize, stride, pad, wscale=wscale,
                                     use_cudnn=use_cudnn)]
        for n_in, n_out in zip(out_channels[:-1], out_channels[1:]):
            convs.append(_conv.Convolution2D(n_in, n_out, 1, wscale=wscale, use_cudnn=use_cudnn))
        super().__init__(*convs)
        self.activation = activation

    def __call__(self, x: Any) -> Any:
        """Apply the convolutions to x (n, c_I, h, w), activating all but the last output."""
        *hidden, last = self._children
        for conv in hidden:
            x = self.activation(conv(x))
        return last(x)
