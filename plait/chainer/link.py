"""Link, Chain and ChainList: parameter holders that compose into a tree of named links.

A Link owns parameters (Variables registered with add_param) and persistent values
(add_persistent); a Chain holds named child links, a ChainList numbered ones. Paths through
the tree ('/predictor/l1/W') name parameters in optimizers and serialized files.
"""
import copy as _copy
from typing import Any, Iterator, Optional, Tuple

import numpy

from ..util import is_cupy_array
from . import cuda
from .variable import Variable

__all__ = ["Link", "Chain", "ChainList"]


class Link:
    """A building block that holds parameters and persistent values.

    Link(W=(3, 4), b=3) registers parameters 'W' and 'b' of those shapes (filled with NaN).
    """

    def __init__(self, **params: Any) -> None:
        self._params: list = []
        self._persistent: list = []
        self._cpu = True
        self._device_id: Optional[int] = None
        self.name: Optional[str] = None
        for name, shape in params.items():
            self.add_param(name, shape)

    @property
    def xp(self) -> Any:
        """numpy while the link is on the CPU, cupy once it is on a GPU."""
        return numpy if self._cpu else cuda.cupy

    def _check_new_name(self, name: str, what: str) -> None:
        if not isinstance(name, str):
            raise TypeError(f"{type(self).__name__}.add_{what}: the name must be a str, got {type(name).__name__}.")
        if name in self.__dict__:
            raise AttributeError(
                f"{type(self).__name__}.add_{what}: cannot register {what} {name!r}: the link "
                f"already has an attribute of that name."
            )

    def add_param(self, name: str, shape: Any, dtype: Any = numpy.float32) -> None:
        """Register a parameter Variable `name` of the given shape; data and grad start as NaN."""
        self._check_new_name(name, "param")
        xp = self.xp
        if self._cpu:
            data = xp.full(shape, numpy.nan, dtype=dtype)
        else:
            with cuda.get_device(self._device_id):
                data = xp.full(shape, numpy.nan, dtype=dtype)
        var = Variable(data, volatile="auto", name=name)
        var.grad = xp.full_like(data, numpy.nan)
        self._params.append(name)
        self.__dict__[name] = var

    def add_persistent(self, name: str, value: Any) -> None:
        """Register a value (array, scalar, ...) that is serialized with the link."""
        self._check_new_name(name, "persistent")
        self._persistent.append(name)
        self.__dict__[name] = value

    def copy(self) -> "Link":
        """A copy of the hierarchy whose parameter Variables are new and share the data arrays
        (their grads start as None, as in Chainer 1.7.2); the copy has no name."""
        ret = _copy.copy(self)
        ret._params = list(self._params)
        ret._persistent = list(self._persistent)
        ret.name = None
        d = ret.__dict__
        for name in ret._params:
            d[name] = _copy.copy(d[name])
        return ret

    def to_cpu(self) -> "Link":
        """Move parameters and array persistent values to the host; returns self."""
        if self._cpu:
            return self
        d = self.__dict__
        for name in self._params:
            d[name].to_cpu()
        for name in self._persistent:
            value = d[name]
            if is_cupy_array(value):
                d[name] = cuda.to_cpu(value)
        self._cpu = True
        self._device_id = None
        return self

    def to_gpu(self, device: Any = None) -> "Link":
        """Move parameters and array persistent values to a GPU (default: the current one); returns self."""
        cuda.check_cuda_available()
        if not self._cpu:
            return self
        dev = cuda.get_device(device) if device is not None else cuda.get_device(None)
        with dev:
            d = self.__dict__
            for name in self._params:
                d[name].to_gpu()
            for name in self._persistent:
                value = d[name]
                if isinstance(value, numpy.ndarray):
                    d[name] = cuda.to_gpu(value)
            self._device_id = int(dev.id)
        self._cpu = False
        return self

    def params(self) -> Iterator[Variable]:
        """All parameter Variables of the hierarchy."""
        d = self.__dict__
        for name in self._params:
            yield d[name]

    def namedparams(self) -> Iterator[Tuple[str, Variable]]:
        """(path, parameter) pairs, paths relative to this link ('/W')."""
        d = self.__dict__
        for name in self._params:
            yield "/" + name, d[name]

    def links(self, skipself: bool = False) -> Iterator["Link"]:
        """All links of the hierarchy (this one first unless skipself)."""
        if not skipself:
            yield self

    def namedlinks(self, skipself: bool = False) -> Iterator[Tuple[str, "Link"]]:
        """(path, link) pairs of the hierarchy; this link's path is '/'."""
        if not skipself:
            yield "/", self

    def children(self) -> Iterator["Link"]:
        """The direct child links (none for a plain Link)."""
        return iter(())

    def copyparams(self, link: "Link") -> None:
        """Copy the data of every parameter from the same place in `link` (not the grads)."""
        d, src = self.__dict__, link.__dict__
        for name in self._params:
            d[name].copydata(src[name])

    def zerograds(self) -> None:
        """Set every gradient of the hierarchy to zeros."""
        for param in self.params():
            param.zerograd()

    def cleargrads(self) -> None:
        """Drop every gradient of the hierarchy (set to None); backward then assigns instead of adding."""
        for param in self.params():
            param.cleargrad()

    def addgrads(self, link: "Link") -> None:
        """Add the gradients of the same-shaped `link` to this one's, across host and devices."""
        d, src = self.__dict__, link.__dict__
        for name in self._params:
            d[name].addgrad(src[name])

    def serialize(self, serializer: Any) -> None:
        """Save or load parameters and persistent values through a (de)serializer."""
        d = self.__dict__
        for name in self._params:
            serializer(name, d[name].data)
        for name in self._persistent:
            d[name] = serializer(name, d[name])


class Chain(Link):
    """A link with named child links: Chain(l1=Linear(...), l2=Linear(...)) sets self.l1, self.l2."""

    def __init__(self, **links: Link) -> None:
        super().__init__()
        self._children: list = []
        for name, link in links.items():
            self.add_link(name, link)

    def __getitem__(self, name: str) -> Any:
        """Equivalent to getattr(self, name)."""
        return getattr(self, name)

    def add_link(self, name: str, link: Link) -> None:
        """Register `link` as the child `name` (and set it as that attribute)."""
        self._check_new_name(name, "link")
        if not isinstance(link, Link):
            raise TypeError(
                f"{type(self).__name__}.add_link: {name!r} must be a Link, got {type(link).__name__}."
            )
        if link.name is not None:
            raise ValueError(
                f"{type(self).__name__}.add_link: the link given as {name!r} is already registered "
                f"in another chain as {link.name!r}; use link.copy() to register a copy."
            )
        link.name = name
        self.__dict__[name] = link
        self._children.append(name)

    def copy(self) -> "Chain":
        ret = super().copy()
        ret._children = list(self._children)
        d = ret.__dict__
        for name in ret._children:
            child = d[name].copy()
            child.name = name
            d[name] = child
        return ret

    def to_cpu(self) -> "Chain":
        super().to_cpu()
        for child in self.children():
            child.to_cpu()
        return self

    def to_gpu(self, device: Any = None) -> "Chain":
        cuda.check_cuda_available()
        with cuda.get_device(device) if device is not None else cuda.get_device(None):
            super().to_gpu()
            for child in self.children():
                child.to_gpu()
        return self

    def params(self) -> Iterator[Variable]:
        yield from super().params()
        for child in self.children():
            yield from child.params()

    def namedparams(self) -> Iterator[Tuple[str, Variable]]:
        yield from super().namedparams()
        d = self.__dict__
        for name in self._children:
            prefix = "/" + name
            for path, param in d[name].namedparams():
                yield prefix + path, param

    def links(self, skipself: bool = False) -> Iterator[Link]:
        if not skipself:
            yield self
        for child in self.children():
            yield from child.links()

    def namedlinks(self, skipself: bool = False) -> Iterator[Tuple[str, Link]]:
        if not skipself:
            yield "/", self
        d = self.__dict__
        for name in self._children:
            child = d[name]
            prefix = "/" + name
            yield prefix, child
            for path, link in child.namedlinks(skipself=True):
                yield prefix + path, link

    def children(self) -> Iterator[Link]:
        d = self.__dict__
        for name in self._children:
            yield d[name]

    def copyparams(self, link: "Chain") -> None:
        super().copyparams(link)
        d, src = self.__dict__, link.__dict__
        for name in self._children:
            d[name].copyparams(src[name])

    def addgrads(self, link: "Chain") -> None:
        super().addgrads(link)
        d, src = self.__dict__, link.__dict__
        for name in self._children:
            d[name].addgrads(src[name])

    def serialize(self, serializer: Any) -> None:
        super().serialize(serializer)
        d = self.__dict__
        for name in self._children:
            d[name].serialize(serializer[name])


class ChainList(Link):
    """A link with a list of child links, named '0', '1', ... in paths."""

    def __init__(self, *links: Link) -> None:
        super().__init__()
        self._children: list = []
        for link in links:
            self.add_link(link)

    def __getitem__(self, index: int) -> Link:
        """The index-th child link."""
        return self._children[index]

    def __iter__(self) -> Iterator[Link]:
        return iter(self._children)

    def __len__(self) -> int:
        """The number of child links."""
        return len(self._children)

    def add_link(self, link: Link) -> None:
        """Append `link` as the next child."""
        if not isinstance(link, Link):
            raise TypeError(f"{type(self).__name__}.add_link: expected a Link, got {type(link).__name__}.")
        if link.name is not None:
            raise ValueError(
                f"{type(self).__name__}.add_link: the link is already registered in another chain "
                f"as {link.name!r}; use link.copy() to register a copy."
            )
        link.name = str(len(self._children))
        self._children.append(link)

    append = add_link

    def copy(self) -> "ChainList":
        ret = super().copy()
        ret._children = []
        for i, child in enumerate(self._children):
            c = child.copy()
            c.name = str(i)
            ret._children.append(c)
        return ret

    def to_cpu(self) -> "ChainList":
        super().to_cpu()
        for child in self._children:
            child.to_cpu()
        return self

    def to_gpu(self, device: Any = None) -> "ChainList":
        cuda.check_cuda_available()
        with cuda.get_device(device) if device is not None else cuda.get_device(None):
            super().to_gpu()
            for child in self._children:
                child.to_gpu()
        return self

    def params(self) -> Iterator[Variable]:
        yield from super().params()
        for child in self._children:
            yield from child.params()

    def namedparams(self) -> Iterator[Tuple[str, Variable]]:
        yield from super().namedparams()
        for i, child in enumerate(self._children):
            prefix = f"/{i}"
            for path, param in child.namedparams():
                yield prefix + path, param

    def links(self, skipself: bool = False) -> Iterator[Link]:
        if not skipself:
            yield self
        for child in self._children:
            yield from child.links()

    def namedlinks(self, skipself: bool = False) -> Iterator[Tuple[str, Link]]:
        if not skipself:
            yield "/", self
        for i, child in enumerate(self._children):
            prefix = f"/{i}"
            yield prefix, child
            for path, link in child.namedlinks(skipself=True):
                yield prefix + path, link

    def children(self) -> Iterator[Link]:
        yield from self._children

    def copyparams(self, link: "ChainList") -> None:
        super().copyparams(link)
        for a, b in zip(self._children, link._children):
            a.copyparams(b)

    def addgrads(self, link: "ChainList") -> None:
        super().addgrads(link)
        for a, b in zip(self._children, link._children):
            a.addgrads(b)

    def serialize(self, serializer: Any) -> None:
        super().serialize(serializer)
        for i, child in enumerate(self._children):
            child.serialize(serializer[str(i)])
