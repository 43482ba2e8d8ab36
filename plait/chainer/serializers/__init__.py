"""Serializers (chainer.serializers): NPZ and HDF5 files in Chainer's key layout.

A (de)serializer is called as `s(key, value)` and indexed as `s[child]`; Link and Optimizer
`serialize` walk their hierarchy with it, so a parameter lands at 'predictor/l1/W' and an
optimizer state at 'predictor/l1/W/m'.
"""
from ..serializer import AbstractSerializer, Deserializer, Serializer  # noqa: F401
from .hdf5 import HDF5Deserializer, HDF5Serializer, load_hdf5, save_hdf5
from .npz import DictionarySerializer, NpzDeserializer, load_npz, save_npz

__all__ = [
    "AbstractSerializer", "Serializer", "Deserializer", "DictionarySerializer",
    "NpzDeserializer", "save_npz", "load_npz", "HDF5Serializer", "HDF5Deserializer",
    "save_hdf5", "load_hdf5",
]
