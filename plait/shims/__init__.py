"""Shims: adapters that let a Model hold a model of another framework."""
from .shim import Shim

__all__ = ["Shim"]
