"""PyTorchGradScaler: loss scaling for mixed-precision (float16) PyTorch models on CUDA."""
from __future__ import annotations

import numbers
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Tuple, Union

from .. import compat as _compat

if TYPE_CHECKING:
    import torch


def _require_torch(where: str) -> Any:
    """The torch module, or an ImportError that says what needs it and how to get it."""
    if not _compat.has_torch:
        raise ImportError(
            f"{where} needs PyTorch, which is not installed (or is switched off with "
            f"PLAIT_NO_TORCH). Install it with `pip install torch`."
        )
    return _compat.torch


class PyTorchGradScaler:
    """Scales gradients up before a float16 backward pass and back down after it.

    float16 flushes gradients below ~6e-8 to zero. Multiplying the output gradient by
    `scale` multiplies every gradient behind it by the same factor (chain rule), which
    keeps them representable; `unscale` divides them again in float32 and reports
    infinities, after which the step is skipped and the scale shrinks by
    `backoff_factor`. After `growth_interval` clean steps the scale grows by
    `growth_factor`. A disabled scaler passes everything through unchanged.

    Scaling needs CUDA tensors: bfloat16 autocast (the CPU's mixed precision) keeps
    float32's exponent range and needs no scaling.
    """

    def __init__(
        self,
        enabled: bool = False,
        init_scale: float = 2.0**16,
        backoff_factor: float = 0.5,
        growth_factor: float = 2.0,
        growth_interval: int = 2000,
    ) -> None:
        torch = _require_torch("PyTorchGradScaler")
        for name, value, low in (
            ("init_scale", init_scale, 0.0),
            ("backoff_factor", backoff_factor, 0.0),
            ("growth_factor", growth_factor, 0.0),
        ):
            if not value > low:
                raise ValueError(
                    f"PyTorchGradScaler: '{name}' must be a positive number, got {value!r}."
                )
        if not isinstance(growth_interval, numbers.Integral) or growth_interval < 1:
            raise ValueError(
                f"PyTorchGradScaler: 'growth_interval' must be an int >= 1 (a number of steps), "
                f"got {growth_interval!r}."
            )
        self._enabled = bool(enabled)
        self._growth_factor = growth_factor
        self._backoff_factor = backoff_factor
        self._growth_interval = growth_interval
        self._growth_tracker = torch.full((1,), 0, dtype=torch.int32)
        self._scale = torch.full((1,), float(init_scale), dtype=torch.float32)
        self._found_inf = False

    @property
    def found_inf(self) -> bool:
        """Whether an unscaled gradient was inf or NaN since the last `update()`."""
        return self._found_inf

    def to_(self, device: Any) -> None:
        """Keep the scale (and step counter) on `device`, next to the gradients."""
        self._growth_tracker = self._growth_tracker.to(device)
        self._scale = self._scale.to(device)

    def scale(
        self, tensors: Union["torch.Tensor", Iterable["torch.Tensor"]], inplace: bool = False
    ) -> Union["torch.Tensor", List["torch.Tensor"]]:
        """Multiply a tensor, or each tensor of an iterable (returned as a list), by the scale."""
        if not self._enabled:
            return tensors  # type: ignore[return-value]
        torch = _compat.torch
        cache: Dict[Any, "torch.Tensor"] = {}
        if isinstance(tensors, torch.Tensor):
            return self._scale_one(tensors, cache, inplace)
        if isinstance(tensors, Iterable) and not isinstance(tensors, (str, bytes)):
            scaled = []
            for i, tensor in enumerate(tensors):
                if not isinstance(tensor, torch.Tensor):
                    raise ValueError(
                        f"PyTorchGradScaler.scale: item {i} is a {type(tensor).__name__}, not a "
                        "torch.Tensor. Pass a Tensor or an iterable of Tensors."
                    )
                scaled.append(self._scale_one(tensor, cache, inplace))
            return scaled
        raise ValueError(
            f"PyTorchGradScaler.scale: expected a torch.Tensor or an iterable of Tensors, got "
            f"{type(tensors).__name__} ({tensors!r:.40})."
        )

    def _scale_one(self, tensor: "torch.Tensor", cache: Dict[Any, "torch.Tensor"], inplace: bool) -> "torch.Tensor":
        if not _compat.has_torch_amp:
            raise ValueError(
                "PyTorchGradScaler.scale: gradient scaling is not supported by this PyTorch: it "
                f"needs torch>=1.9.0 with a CUDA device (torch {_compat.torch_version}, "
                f"tensor on '{tensor.device}'). Create the scaler with enabled=False, or turn "
                "mixed precision off."
            )
        if not tensor.is_cuda:
            raise ValueError(
                f"PyTorchGradScaler.scale: got a tensor on '{tensor.device}'. Gradient scaling is "
                "only supported for CUDA tensors. Create the scaler with enabled=False (bfloat16 "
                "autocast on the CPU needs no scaling), or turn mixed precision off."
            )
        # One copy of the scale per device, not one per tensor.
        scale = cache.get(tensor.device)
        if scale is None:
            scale = cache[tensor.device] = self._scale.to(tensor.device)
        return tensor.mul_(scale) if inplace else tensor * scale

    def unscale(self, tensors: Iterable["torch.Tensor"]) -> bool:
        """Divide the tensors by the scale in place; True when any of them holds inf or NaN."""
        if not self._enabled:
            return False
        torch = _compat.torch
        # The reciprocal in float64 first, so that a power-of-two scale unscales exactly.
        inv_scale = self._scale.double().reciprocal().float()
        groups: Dict[Tuple[Any, Any], List["torch.Tensor"]] = {}
        for tensor in tensors:
            groups.setdefault((tensor.device, tensor.dtype), []).append(tensor)
        for (device, _), group in groups.items():
            found = torch.zeros((1,), dtype=torch.float32, device=device)
            torch._amp_foreach_non_finite_check_and_unscale_(group, found, inv_scale.to(device))
            if bool(found.item()):
                self._found_inf = True
        return self._found_inf

    def update(self) -> None:
        """After an optimizer step: back off after an overflow, grow after a clean run; clear found_inf."""
        if not self._enabled:
            return
        torch = _compat.torch
        found = torch.full((1,), float(self._found_inf), dtype=torch.float32, device=self._scale.device)
        torch._amp_update_scale_(
            self._scale,
            self._growth_tracker,
            found,
            self._growth_factor,
            self._backoff_factor,
            self._growth_interval,
        )
        self._found_inf = False


__all__ = ["PyTorchGradScaler"]
