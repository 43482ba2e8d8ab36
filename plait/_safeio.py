"""Safe reading and atomic writing of every file plait opens or writes for a user.

Files read from a model directory or handed over by a user (Model.from_disk, the CLI's model
directories, the Chainer serializers' load_npz/load_hdf5) may come from a stranger. Every such
read goes through this module, which guarantees:

* only regular files are read: a FIFO, a socket or a device (/dev/zero, /dev/urandom, a tty)
  is refused before any byte is read (opened with O_NONBLOCK, so a FIFO never blocks);
* with `root=`, no symbolic link (of the file or of a folder on its way) leads out of `root`;
* a size limit is checked against the file's size before reading, and reads never go past it;
* .npz/.npy members: the header is parsed and the declared shape and dtype are checked against
  the byte limit (and an optional `expect` callback, e.g. the model's architecture) before
  any data is read or allocated; object arrays (pickles) are always refused;
* HDF5 files: external raw storage, external links, virtual datasets and filters that are not
  built in (HDF5 would load plugin libraries for them) are refused, and each dataset's declared
  size is checked before it is read.

Every refusal raises `UnsafeFileError`, every damaged content `DamagedFileError`: both are
`FileFormatError`, a ValueError whose message names the file, the field, the offending value and
what to do. A file that does not exist raises FileNotFoundError as usual.

Writers: `write_file_atomically(path, data)` (bytes, or a callable writing to a binary file
object), `atomic_path(path)` (a context manager yielding a temporary path for libraries that
want a filename, e.g. h5py) and `write_dir_atomically(folder, {relative path: bytes})` (a whole
folder, swapped into place with one atomic rename). Readers see the old file or folder or the new
one, never a part of one: data go to a temporary sibling, which is fsynced, renamed into place
(os.replace; renameat2 RENAME_EXCHANGE for folders on Linux), and the parent folder fsynced.
Temporary siblings are named `.NAME.tmp-XXXX` (see TMP_MARK) so a cleaner can find the remains of
a killed writer.

API (stable):

    FileFormatError(ValueError), UnsafeFileError(FileFormatError), DamagedFileError(FileFormatError)
        .path, .field, .problem, .fix            (str(err) = "FILE: FIELD: PROBLEM. FIX")
    MAX_FILE_BYTES (4 GiB), MAX_ARRAY_BYTES, MAX_TEXT_BYTES (64 MiB)   default limits
        (the environment's PLAIT_MAX_FILE_BYTES / PLAIT_MAX_ARRAY_BYTES override the first two)
    read_bytes(path, *, limit=None, root=None) -> bytes
    read_source(path | binary file object | bytes, *, limit=None, root=None, what=None) -> (name, bytes)
    read_text(path, *, limit=None, root=None, encoding="utf8") -> str
    read_json(path, *, limit=None, root=None) -> Any
    check_regular_file(path, *, root=None, limit=None) -> os.stat_result
    load_npz(source, *, limit=None, root=None, expect=None, what=None, array_limit=None) -> Dict[str, ndarray]
        source: a path, a binary file object or bytes; expect(name, shape, dtype) may raise to
        refuse a member before its data is read.
    NpzArchive(source, ...): .files, .read(name, expect=None) -- one member at a time
    open_hdf5(path | binary file object | bytes, *, limit=None, root=None) -> h5py.File
        read into memory, opened read-only and checked by check_hdf5(group, name): no external
        storage or links, no virtual datasets, no plugin filters anywhere in the file
    read_hdf5_dataset(dataset, name, *, limit=None, expect=None) -> ndarray
    write_file_atomically(path, data: bytes | Callable[[BinaryIO], Any]) -> None
    atomic_path(path) -> ContextManager[str]
    write_dir_atomically(folder, files: Mapping[str, bytes]) -> None
    remove_dir_atomically(folder) -> None
    fsync_dir(folder) -> None
    TMP_MARK = ".tmp-", OLD_SUFFIX = ".old"   (names of a writer's temporary siblings)

The CLI's model directories add one error format on top (plait.cli._modeldir.damaged):
"Damaged model directory DIR: FILE, FIELD: PROBLEM. WHAT TO DO."
"""
from __future__ import annotations

import contextlib
import ctypes
import io
import json
import os
import shutil
import stat
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any, BinaryIO, Callable, Dict, Iterator, Mapping, Optional, Tuple, Union

import numpy

PathLike = Union[str, "os.PathLike[str]"]


def _env_limit(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None:
        return default
    try:
        return max(0, int(value))
    except ValueError:
        return default


#: Largest file read whole (model.bin, an .npz, an .h5): 4 GiB unless PLAIT_MAX_FILE_BYTES says.
MAX_FILE_BYTES = _env_limit("PLAIT_MAX_FILE_BYTES", 4 << 30)
#: Largest single array a file may declare: the same as the file limit unless told.
MAX_ARRAY_BYTES = _env_limit("PLAIT_MAX_ARRAY_BYTES", MAX_FILE_BYTES)
#: Small text files (config.cfg, meta.json, state.json): 64 MiB.
MAX_TEXT_BYTES = 64 << 20

TMP_MARK = ".tmp-"

ExpectFn = Callable[[str, Tuple[int, ...], numpy.dtype], None]


# ---------------------------------------------------------------------------------------------
# Errors


class FileFormatError(ValueError):
    """A file plait was asked to read is unsafe or damaged: names the file, the field and the fix."""

    def __init__(self, path: Any, field: str, problem: str, fix: str) -> None:
        self.path = os.fspath(path) if isinstance(path, (str, os.PathLike)) else str(path)
        self.field = field
        self.problem = problem
        self.fix = fix
        where = f"{self.path!r}" + (f": {field}" if field else "")
        fix = fix[:1].upper() + fix[1:]
        super().__init__(f"{where}: {problem.rstrip('.')}. {fix.rstrip('.')}.")


class UnsafeFileError(FileFormatError):
    """A file refused before reading: not a regular file, a link out of its folder, too large."""


class DamagedFileError(FileFormatError):
    """A file whose contents cannot be what plait wrote: truncated, corrupted, wrong shapes."""


def _name(path: Any) -> str:
    if isinstance(path, (bytes, bytearray, memoryview)):
        return "<bytes>"
    return os.fspath(path) if isinstance(path, (str, os.PathLike)) else repr(path)


# ---------------------------------------------------------------------------------------------
# Safe reading


def _check_inside(path: str, root: PathLike) -> str:
    real_root = os.path.realpath(os.fspath(root))
    real = os.path.realpath(path)
    if os.path.commonpath([real_root, real]) != real_root:
        raise UnsafeFileError(
            path,
            "",
            f"it is a symbolic link (or lies under one) leading out of {os.fspath(root)!r}, to {real!r}",
            "Links out of a model directory are not followed: copy the file itself into the folder",
        )
    return real


def _open_checked(path: PathLike, limit: Optional[int], root: Optional[PathLike]) -> Tuple[int, os.stat_result]:
    path = os.fspath(path)
    target = _check_inside(path, root) if root is not None else path
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    if root is not None:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(target, flags)
    except FileNotFoundError:
        raise FileNotFoundError(2, "No such file", path) from None
    except OSError as err:
        if os.path.islink(target):
            raise UnsafeFileError(path, "", f"cannot be opened ({err.strerror})", "replace the link with the file itself") from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = (
                "a named pipe (FIFO)" if stat.S_ISFIFO(info.st_mode)
                else "a device" if stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode)
                else "a folder" if stat.S_ISDIR(info.st_mode)
                else "a socket" if stat.S_ISSOCK(info.st_mode)
                else "not a regular file"
            )
            real = os.path.realpath(path)
            shown = f" (the link leads to {real!r})" if real != os.path.abspath(path) else ""
            raise UnsafeFileError(path, "", f"it is {kind}{shown}, not a regular file", "Only regular files are read: put the file itself there")
        limit = MAX_FILE_BYTES if limit is None else limit
        if info.st_size > limit:
            raise UnsafeFileError(
                path, "", f"it is {info.st_size} bytes, over the limit of {limit} bytes",
                "if the file is trusted and meant to be that large, raise the limit (PLAIT_MAX_FILE_BYTES)",
            )
        # The fd was opened non-blocking only to make FIFOs harmless; reads of a regular file block.
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return fd, info
    except BaseException:
        os.close(fd)
        raise


def check_regular_file(path: PathLike, *, root: Optional[PathLike] = None, limit: Optional[int] = None) -> os.stat_result:
    """Stat `path` as read_bytes would check it (regular file, inside root, within limit)."""
    fd, info = _open_checked(path, limit, root)
    os.close(fd)
    return info


def read_bytes(path: PathLike, *, limit: Optional[int] = None, root: Optional[PathLike] = None) -> bytes:
    """The bytes of a regular file, at most `limit` (default MAX_FILE_BYTES); see the module notes."""
    limit = MAX_FILE_BYTES if limit is None else limit
    fd, info = _open_checked(path, limit, root)
    with os.fdopen(fd, "rb") as file:
        # Never ask for more than the file holds: read(n) allocates n bytes up front.
        data = file.read(min(limit, info.st_size) + 1)
        if len(data) > info.st_size and len(data) <= limit:
            # It grew since the stat (or is a /proc-like file reporting size 0): read on in chunks.
            chunks = [data]
            total = len(data)
            while total <= limit:
                chunk = file.read(min(1 << 20, limit + 1 - total))
                if not chunk:
                    break
                chunks.append(chunk)
                total += len(chunk)
            data = b"".join(chunks)
    if len(data) > limit:
        raise UnsafeFileError(path, "", f"it grew past the limit of {limit} bytes while being read", "make sure nothing writes to it while plait reads it")
    return data


def read_text(path: PathLike, *, limit: Optional[int] = None, root: Optional[PathLike] = None, encoding: str = "utf8") -> str:
    data = read_bytes(path, limit=MAX_TEXT_BYTES if limit is None else limit, root=root)
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as err:
        raise DamagedFileError(path, f"byte {err.start}", f"it is not {encoding} text ({err.reason})", "restore the file from a good copy") from None


def read_json(path: PathLike, *, limit: Optional[int] = None, root: Optional[PathLike] = None) -> Any:
    text = read_text(path, limit=limit, root=root)
    try:
        return json.loads(text)
    except RecursionError:
        raise DamagedFileError(path, "", "its JSON is nested too deeply", "restore the file from a good copy") from None
    except ValueError as err:
        raise DamagedFileError(path, f"line {getattr(err, 'lineno', '?')}", f"it is not valid JSON ({err})", "restore the file from a good copy") from None


# ---------------------------------------------------------------------------------------------
# .npz / .npy


def _npy_header(stream: BinaryIO, path: Any, member: str) -> Tuple[Tuple[int, ...], bool, numpy.dtype]:
    fmt = numpy.lib.format
    try:
        version = fmt.read_magic(stream)
        if version == (1, 0):
            shape, fortran, dtype = fmt.read_array_header_1_0(stream, max_header_size=10000)
        elif version in ((2, 0), (3, 0)):
            shape, fortran, dtype = fmt.read_array_header_2_0(stream, max_header_size=10000)
        else:
            raise ValueError(f"unsupported .npy format version {version}")
    except Exception as err:  # untrusted bytes: zlib.error, BadZipFile, EOFError, SyntaxError, ...
        raise DamagedFileError(path, member, f"its .npy header cannot be read ({err})", "the file is damaged; restore it from a good copy") from None
    if dtype.hasobject:
        raise UnsafeFileError(
            path, member, f"it holds Python objects (dtype {dtype})",
            "Pickled objects are never loaded from files (they could run code): save plain numeric arrays instead",
        )
    if not isinstance(shape, tuple) or any(not isinstance(n, int) or n < 0 for n in shape):
        raise DamagedFileError(path, member, f"it declares the invalid shape {shape!r}", "restore the file from a good copy")
    return shape, bool(fortran), dtype


def _declared_bytes(shape: Tuple[int, ...], dtype: numpy.dtype) -> int:
    n = 1
    for dim in shape:
        n *= dim
    return n * dtype.itemsize


def _read_npy(stream: BinaryIO, path: Any, member: str, limit: int, expect: Optional[ExpectFn], declared_size: Optional[int]) -> numpy.ndarray:
    shape, fortran, dtype = _npy_header(stream, path, member)
    nbytes = _declared_bytes(shape, dtype)
    if nbytes > limit:
        raise UnsafeFileError(
            path, member, f"it declares an array of shape {shape} and dtype {dtype}: {nbytes} bytes, over the limit of {limit}",
            "the file is damaged or not meant for this model; if it is trusted, raise the limit (PLAIT_MAX_ARRAY_BYTES)",
        )
    if expect is not None:
        expect(member, shape, dtype)
    if declared_size is not None and nbytes > declared_size:
        raise DamagedFileError(path, member, f"it declares {nbytes} bytes of data but holds at most {declared_size}", "the file is truncated or damaged; restore it from a good copy")
    try:
        data = stream.read(nbytes)
        extra = stream.read(1)
    except Exception as err:  # untrusted bytes: zlib.error, BadZipFile (a CRC), EOFError, ...
        raise DamagedFileError(path, member, f"its data cannot be read ({err})", "the file is damaged; restore it from a good copy") from None
    if len(data) != nbytes:
        raise DamagedFileError(path, member, f"it holds {len(data)} bytes of data where its header declares {nbytes}", "the file is truncated; restore it from a good copy")
    if extra:
        raise DamagedFileError(path, member, "it holds more data than its header declares", "the file is damaged; restore it from a good copy")
    array = numpy.frombuffer(data, dtype=dtype) if nbytes else numpy.zeros(0, dtype=dtype)
    array = array.reshape(shape[::-1]).transpose() if fortran else array.reshape(shape)
    return array.copy()


def read_source(source: Any, *, limit: Optional[int] = None, root: Optional[PathLike] = None,
                what: Optional[str] = None) -> Tuple[str, bytes]:
    """(a name for errors, the bytes) of a path (read_bytes), a binary file object or bytes."""
    limit = MAX_FILE_BYTES if limit is None else limit
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        name = what or "<bytes>"
        if len(data) > limit:
            raise UnsafeFileError(name, "", f"it is {len(data)} bytes, over the limit of {limit}", "if the data are trusted, raise the limit (PLAIT_MAX_FILE_BYTES)")
        return name, data
    if hasattr(source, "read"):
        name = what or str(getattr(source, "name", "<file object>"))
        data = source.read(limit + 1)
        if not isinstance(data, bytes):
            raise TypeError(f"{name!r}: the file object must be opened in binary mode.")
        if len(data) > limit:
            raise UnsafeFileError(name, "", f"it is over the limit of {limit} bytes", "if the file is trusted, raise the limit (PLAIT_MAX_FILE_BYTES)")
        return name, data
    return what or _name(source), read_bytes(source, limit=limit, root=root)


class NpzArchive:
    """An .npz (a path, a binary file object or bytes) read member by member, each checked first.

    `files` lists the array names; `read(name, expect=None)` parses the member's .npy header,
    checks the declared size against `array_limit` (and the total of what was read against it)
    and calls `expect(name, shape, dtype)`, which may raise, before any data is read.
    """

    def __init__(self, source: Any, *, limit: Optional[int] = None, root: Optional[PathLike] = None,
                 what: Optional[str] = None, array_limit: Optional[int] = None) -> None:
        self.name, data = read_source(source, limit=limit, root=root, what=what)
        self.array_limit = MAX_ARRAY_BYTES if array_limit is None else array_limit
        self.total = 0
        try:
            self._zip = zipfile.ZipFile(io.BytesIO(data))
            infos = self._zip.infolist()
        except Exception as err:  # untrusted bytes: BadZipFile, EOFError, struct.error, ...
            raise DamagedFileError(self.name, "", f"it is not a readable .npz (zip) archive ({err})", "the file is damaged or of another kind; restore it from a good copy") from None
        self._infos: Dict[str, zipfile.ZipInfo] = {}
        for info in infos:
            member = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
            if member in self._infos:
                raise DamagedFileError(self.name, member, "the archive holds this array twice", "restore the file from a good copy")
            self._infos[member] = info

    @property
    def files(self) -> list:
        return list(self._infos)

    def keys(self) -> list:
        return list(self._infos)

    def __contains__(self, name: object) -> bool:
        return name in self._infos

    def __getitem__(self, name: str) -> numpy.ndarray:
        return self.read(name)

    def read(self, name: str, expect: Optional[ExpectFn] = None) -> numpy.ndarray:
        if name not in self._infos:
            raise KeyError(name)
        info = self._infos[name]
        try:
            stream = self._zip.open(info)
        except Exception as err:  # untrusted bytes: BadZipFile, NotImplementedError (a method), ...
            raise DamagedFileError(self.name, name, f"the archive member cannot be opened ({err})", "the file is damaged; restore it from a good copy") from None
        with stream:
            array = _read_npy(stream, self.name, name, self.array_limit - self.total, expect, info.file_size)
        self.total += array.nbytes
        return array

    def close(self) -> None:
        self._zip.close()

    def __enter__(self) -> "NpzArchive":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def load_npz(source: Union[PathLike, bytes], *, limit: Optional[int] = None, root: Optional[PathLike] = None,
             expect: Optional[ExpectFn] = None, what: Optional[str] = None,
             array_limit: Optional[int] = None) -> Dict[str, numpy.ndarray]:
    """All arrays of an .npz (a path, a binary file object or bytes), each checked before its data is read.

    `limit` bounds the file, `array_limit` (default MAX_ARRAY_BYTES) each declared array and the
    total; `expect(name, shape, dtype)` may raise to refuse a member before its data is read.
    `what` names the file in errors when `source` is bytes. Never unpickles.
    """
    with NpzArchive(source, limit=limit, root=root, what=what, array_limit=array_limit) as archive:
        return {name: archive.read(name, expect) for name in archive.files}


# ---------------------------------------------------------------------------------------------
# HDF5


def _h5py() -> Any:
    import h5py

    return h5py


def open_hdf5(source: Any, *, limit: Optional[int] = None, root: Optional[PathLike] = None) -> Any:
    """Read an HDF5 file (a path: regular, within limit; a binary file object; bytes) into memory
    and open it read-only, checked by check_hdf5 (no external links/storage, no virtual datasets)."""
    h5py = _h5py()
    path, data = read_source(source, limit=limit, root=root)
    try:
        handle = h5py.File(io.BytesIO(data), "r")
    except Exception as err:
        raise DamagedFileError(path, "", f"it is not a readable HDF5 file ({type(err).__name__}: {err})", "the file is damaged or of another kind; restore it from a good copy") from None
    try:
        check_hdf5(handle, path)
    except BaseException:
        handle.close()
        raise
    return handle


def check_hdf5(group: Any, path: str, *, max_objects: int = 1_000_000) -> None:
    """Refuse external links, external raw storage and virtual datasets anywhere under `group`."""
    h5py = _h5py()
    seen = 0
    stack = [group]
    visited = set()
    while stack:
        current = stack.pop()
        try:
            names = list(current.keys())
        except Exception as err:
            raise DamagedFileError(path, current.name or "/", f"the group cannot be listed ({type(err).__name__}: {err})", "the file is damaged; restore it from a good copy") from None
        for key in names:
            seen += 1
            if seen > max_objects:
                raise UnsafeFileError(path, "", f"it holds more than {max_objects} objects", "the file is damaged or not a saved model")
            where = f"{current.name.rstrip('/')}/{key}"
            try:
                link = current.get(key, getlink=True)
            except Exception as err:
                raise DamagedFileError(path, where, f"the link cannot be read ({type(err).__name__}: {err})", "the file is damaged; restore it from a good copy") from None
            if isinstance(link, h5py.ExternalLink):
                raise UnsafeFileError(
                    path, where, f"it is an external link to {link.filename!r}:{link.path!r}",
                    "Other files named inside an HDF5 file are never read: save the weights into the file itself",
                )
            if isinstance(link, h5py.SoftLink):
                continue  # resolves inside this file, to an object visited by its hard link
            if not isinstance(link, h5py.HardLink):
                raise UnsafeFileError(path, where, f"it is a link of an unsupported kind ({type(link).__name__})", "save the weights as ordinary datasets")
            try:
                obj = current.get(key)
            except Exception as err:
                raise DamagedFileError(path, where, f"the object cannot be opened ({type(err).__name__}: {err})", "the file is damaged; restore it from a good copy") from None
            if obj is None:
                continue
            addr = getattr(obj.id, "addr", None) if hasattr(obj, "id") else None
            if isinstance(obj, h5py.Group):
                if addr is not None and addr in visited:
                    continue
                visited.add(addr)
                stack.append(obj)
            elif isinstance(obj, h5py.Dataset):
                _check_dataset_storage(obj, path, where)


#: HDF5 filters built into the library or h5py: deflate (gzip), shuffle, fletcher32, szip, nbit,
#: scaleoffset, lzf. Any other would make HDF5 search its plugin path for a library to load.
HDF5_FILTERS = frozenset({1, 2, 3, 4, 5, 6, 32000})


def _check_dataset_storage(dataset: Any, path: str, where: str) -> None:
    h5py = _h5py()
    try:
        plist = dataset.id.get_create_plist()
        layout = plist.get_layout()
        external = plist.get_external_count()
    except Exception as err:
        raise DamagedFileError(path, where, f"its storage cannot be read ({type(err).__name__}: {err})", "the file is damaged; restore it from a good copy") from None
    if layout == getattr(h5py.h5d, "VIRTUAL", -12345) or getattr(dataset, "is_virtual", False):
        raise UnsafeFileError(path, where, "it is a virtual dataset (its data live in other files)", "Only data stored in the file itself are read: save the weights as ordinary datasets")
    if external:
        raise UnsafeFileError(path, where, f"its data are stored in {external} external raw file(s)", "Only data stored in the file itself are read: save the weights as ordinary datasets")
    try:
        filters = [plist.get_filter(i)[0] for i in range(plist.get_nfilters())]
    except Exception as err:
        raise DamagedFileError(path, where, f"its filters cannot be read ({err})", "the file is damaged; restore it from a good copy") from None
    unknown = [f for f in filters if f not in HDF5_FILTERS]
    if unknown:
        raise UnsafeFileError(
            path, where, f"its data pass through HDF5 filter(s) {unknown}, which plait does not read "
            "(HDF5 would look for plugin libraries to load them)",
            f"save the weights without filters or with the built-in ones (ids {sorted(HDF5_FILTERS)}: gzip, shuffle, ...)",
        )


def read_hdf5_dataset(dataset: Any, path: str, *, limit: Optional[int] = None, expect: Optional[ExpectFn] = None) -> numpy.ndarray:
    """A dataset's data, its storage, declared shape and dtype checked before reading."""
    where = dataset.name
    _check_dataset_storage(dataset, path, where)
    limit = MAX_ARRAY_BYTES if limit is None else limit
    try:
        shape = tuple(int(n) for n in (dataset.shape or ()))
        dtype = numpy.dtype(dataset.dtype)
    except Exception as err:
        raise DamagedFileError(path, where, f"its shape or type cannot be read ({type(err).__name__}: {err})", "restore the file from a good copy") from None
    if dataset.shape is None:
        raise DamagedFileError(path, where, "it is an empty (null) dataset", "restore the file from a good copy")
    if dtype.hasobject or dtype.kind in "OV" and dtype.fields is None:
        raise UnsafeFileError(path, where, f"it holds values of type {dtype} (not plain numbers)", "save plain numeric arrays")
    nbytes = _declared_bytes(shape, dtype)
    if nbytes > limit:
        raise UnsafeFileError(path, where, f"it declares an array of shape {shape} and dtype {dtype}: {nbytes} bytes, over the limit of {limit}", "the file is damaged or not meant for this model; raise PLAIT_MAX_ARRAY_BYTES only if it is trusted")
    if expect is not None:
        expect(where, shape, dtype)
    try:
        return numpy.asarray(dataset[()])
    except Exception as err:
        raise DamagedFileError(path, where, f"its data cannot be read ({type(err).__name__}: {err})", "the file is damaged; restore it from a good copy") from None


# ---------------------------------------------------------------------------------------------
# Atomic writing


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def fsync_dir(path: PathLike) -> None:
    """Make a folder's entries (a rename into it) durable; a no-op where folders cannot be fsynced."""
    if os.name != "posix":
        return
    try:
        fd = os.open(os.fspath(path), os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_file_atomically(path: PathLike, data: Union[bytes, bytearray, memoryview, Callable[[BinaryIO], Any]]) -> None:
    """Replace `path` with `data` (bytes, or a callable writing into a binary file) atomically.

    Written to a temporary sibling, flushed and fsynced, renamed over `path` (os.replace), then
    the folder fsynced; on any failure (a full disk, an exception, a signal) the temporary file
    is removed and `path` is untouched. The new file gets the usual permissions (0666 & ~umask).
    """
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as file:
            if callable(data):
                data(file)
            else:
                file.write(data)


@contextlib.contextmanager
def atomic_path(path: PathLike) -> Iterator[str]:
    """Yield a temporary path beside `path`; when the block ends without error it replaces `path`.

    For writers that want a filename (h5py): the file they write there is fsynced and renamed
    over `path`; on an error it is deleted and `path` is untouched.
    """
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}{TMP_MARK}", dir=folder)
    os.close(fd)
    try:
        yield tmp
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
        fsync_dir(folder)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_dir_atomically(final: PathLike, files: Mapping[str, bytes]) -> None:
    """Make `final` a folder holding exactly `files` (relative path -> bytes), atomically.

    Written whole into a temporary sibling (each file and folder fsynced), then swapped into
    place with one atomic rename (renameat2 RENAME_EXCHANGE on Linux; elsewhere the previous
    folder is first renamed to `.NAME.old`, which readers take while `final` is missing).
    Relative paths may not be absolute nor climb out with '..'.
    """
    final = Path(final)
    parent = final.parent
    parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}{TMP_MARK}", dir=parent))
    try:
        os.chmod(tmp, 0o777 & ~_umask())
        folders = {tmp}
        for rel, data in files.items():
            parts = Path(rel).parts
            if not parts or Path(rel).is_absolute() or ".." in parts:
                raise ValueError(f"write_dir_atomically: {rel!r} is not a relative path inside the folder")
            target = tmp / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            folders.add(target.parent)
            with open(target, "wb") as file:
                file.write(data)
                file.flush()
                os.fsync(file.fileno())
        for folder in sorted(folders, key=lambda p: len(p.parts), reverse=True):
            fsync_dir(folder)
        _swap_into_place(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


OLD_SUFFIX = ".old"


def _swap_into_place(tmp: Path, final: Path) -> None:
    parent = final.parent
    if not final.exists() and not final.is_symlink():
        os.rename(tmp, final)
        fsync_dir(parent)
        return
    if final.is_dir() and not final.is_symlink() and _exchange(tmp, final):
        fsync_dir(parent)
        shutil.rmtree(tmp, ignore_errors=True)  # now the previous version
        return
    old = parent / f".{final.name}{OLD_SUFFIX}"
    if old.exists():
        shutil.rmtree(old)
    os.rename(final, old)
    os.rename(tmp, final)
    fsync_dir(parent)
    if old.is_dir() and not old.is_symlink():
        shutil.rmtree(old, ignore_errors=True)
    else:
        old.unlink()


def remove_dir_atomically(path: PathLike) -> None:
    """Delete a folder: first renamed away (atomic), so no half-deleted copy is ever seen."""
    path = Path(path)
    if not path.exists():
        return
    doomed = Path(tempfile.mkdtemp(prefix=f".{path.name}{TMP_MARK}", dir=path.parent))
    os.rename(path, doomed / path.name)
    fsync_dir(path.parent)
    shutil.rmtree(doomed, ignore_errors=True)


_renameat2: Any = None


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths with one atomic renameat2(RENAME_EXCHANGE); False where unsupported."""
    global _renameat2
    if not sys.platform.startswith("linux"):
        return False
    if _renameat2 is None:
        try:
            func = ctypes.CDLL(None, use_errno=True).renameat2
            func.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
            func.restype = ctypes.c_int
            _renameat2 = func
        except (AttributeError, OSError):
            _renameat2 = False
    if _renameat2 is False:
        return False
    at_fdcwd, rename_exchange = -100, 2
    return _renameat2(at_fdcwd, os.fsencode(str(a)), at_fdcwd, os.fsencode(str(b)), rename_exchange) == 0


__all__ = [
    "FileFormatError", "UnsafeFileError", "DamagedFileError", "MAX_FILE_BYTES", "MAX_ARRAY_BYTES",
    "MAX_TEXT_BYTES", "TMP_MARK", "OLD_SUFFIX", "read_bytes", "read_source", "read_text", "read_json", "check_regular_file",
    "load_npz", "NpzArchive", "open_hdf5", "check_hdf5", "read_hdf5_dataset", "write_file_atomically", "atomic_path",
    "write_dir_atomically", "remove_dir_atomically", "fsync_dir", "HDF5_FILTERS",
]
