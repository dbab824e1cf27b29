"""Reading a zip archive of JSON and ``.npy`` members without trusting it.

Both loaders (``tg.load`` and ``tg.jit.load``) read files that someone else may
have written. This module reads such an archive with every size checked *before*
anything is allocated:

* each member's declared size, and the total, against ``max_bytes``, and its
  compression ratio against ``max_compression_ratio`` (a zip bomb declares a small
  compressed size and a huge real one);
* a JSON member against ``max_json_bytes``, and its nesting depth against
  :data:`MAX_NESTING`, so neither parsing nor checking it can exhaust memory or
  the stack;
* an ``.npy`` member's header (its shape times its itemsize) against the member's
  declared size, before its data is read. The data is then read into a buffer of
  exactly that size, so a member holding more or less than it says is an error,
  never a bigger allocation.

Nothing here is ever unpickled or imported. Problems are raised as
:class:`ArchiveError` (what is wrong, and in which member); each loader turns
that into its own error class with its own wording.
"""
from __future__ import annotations

import json
import os
import struct
import tokenize
import zipfile
import zlib
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO, Any, BinaryIO, Iterator

import numpy as np

#: The most bytes a loader reads from one file, after decompression (2 GiB).
DEFAULT_MAX_BYTES = 2 * 1024**3
#: The largest JSON description (manifest or graph) a loader parses (16 MiB; parsed,
#: JSON takes up to ~20 times its size in Python objects).
DEFAULT_MAX_JSON_BYTES = 16 * 1024**2
#: How much bigger than its compressed size a member may be (teachgrad writes
#: uncompressed members, ratio 1; numpy's ``savez_compressed`` of real weights is ~1-10).
DEFAULT_MAX_COMPRESSION_RATIO = 100
#: How deeply lists and dicts may nest in a JSON description.
MAX_NESTING = 100
#: The most dimensions an array in a file may have (numpy's own limit is 64).
MAX_NDIM = 32

_CHUNK = 1 << 20  # read data in 1 MiB steps, into a buffer sized from the checked header
# What the zip and zlib modules raise on a damaged archive (their error surface is wide).
_ZIP_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, EOFError, OSError,
               ValueError, struct.error, NotImplementedError, RuntimeError, OverflowError,
               IndexError, KeyError)
# What numpy's header parser (tokenize + ast.literal_eval) raises on a damaged header.
_NPY_HEADER_ERRORS = (ValueError, TypeError, SyntaxError, tokenize.TokenError, OverflowError,
                      RecursionError, MemoryError, KeyError, IndexError)
_METHODS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)  # what numpy and teachgrad write


class ArchiveError(Exception):
    """A problem with the archive: ``member`` is where (None: the archive itself)."""

    def __init__(self, problem: str, member: str | None = None) -> None:
        super().__init__(problem if member is None else f"{member}: {problem}")
        self.problem, self.member = problem, member


@dataclass(frozen=True)
class Limits:
    """How much a loader may read: see the ``DEFAULT_*`` constants of this module."""

    max_bytes: int = DEFAULT_MAX_BYTES
    max_json_bytes: int = DEFAULT_MAX_JSON_BYTES
    max_compression_ratio: float = DEFAULT_MAX_COMPRESSION_RATIO

    def check(self, function: str) -> None:
        """Refuse limits that are not positive numbers (before any file is opened)."""
        for name, value in vars(self).items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"{function}: {name} must be a positive number, got {value!r}")


@dataclass(frozen=True)
class ArrayHeader:
    """What an ``.npy`` member says it holds, read before its data."""

    shape: tuple[int, ...]
    dtype: np.dtype
    fortran_order: bool
    nbytes: int


@contextmanager
def open_file(f: str | os.PathLike | BinaryIO) -> Iterator[IO[bytes]]:
    """``f`` as an open binary file: a path is opened (and closed) here, so a missing
    file raises FileNotFoundError as usual, before any format checks."""
    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as handle:
            yield handle
    elif hasattr(f, "read") and hasattr(f, "seek"):
        yield f
    else:
        raise TypeError(f"expected a path or a binary file object, not {type(f).__name__}. Fix: "
                        "pass the file's name, or wrap bytes in io.BytesIO(data)")


def describe(f: str | os.PathLike | BinaryIO) -> str:
    """How error messages name ``f``."""
    return os.fspath(f) if isinstance(f, (str, os.PathLike)) else "the file object"


@contextmanager
def open_archive(f: str | os.PathLike | BinaryIO, limits: Limits) -> Iterator["SafeArchive"]:
    """``f`` opened as a :class:`SafeArchive` (its member sizes already checked)."""
    with open_file(f) as handle:
        archive = SafeArchive(handle, limits)
        try:
            yield archive
        finally:
            archive.close()


class SafeArchive:
    """A zip archive whose members are read only after their sizes are checked."""

    def __init__(self, file: IO[bytes], limits: Limits) -> None:
        self.limits = limits
        try:
            self.zip = zipfile.ZipFile(file)
            infos = self.zip.infolist()
        except _ZIP_ERRORS as error:
            raise ArchiveError(str(error)) from None
        self.members: dict[str, zipfile.ZipInfo] = {}
        total = 0
        for info in infos:
            self._check_member(info)
            total += info.file_size
            if total > limits.max_bytes:
                raise ArchiveError(f"its members add up to more than max_bytes={limits.max_bytes} "
                                   "bytes. Fix: pass a larger max_bytes= if you trust this file")
            self.members[info.filename] = info

    def _check_member(self, info: zipfile.ZipInfo) -> None:
        name = info.filename
        if name in self.members:
            raise ArchiveError("the archive holds two members of this name", name)
        if info.flag_bits & 0x1:
            raise ArchiveError("the member is encrypted", name)
        if info.compress_type not in _METHODS:
            raise ArchiveError(f"the member uses compression method {info.compress_type}; only "
                               "stored and deflated members are read", name)
        if info.file_size > self.limits.max_bytes:
            raise ArchiveError(f"the member declares {info.file_size} bytes, more than "
                               f"max_bytes={self.limits.max_bytes}", name)
        ratio = info.file_size / max(info.compress_size, 1)
        if ratio > self.limits.max_compression_ratio:
            raise ArchiveError(f"the member expands {ratio:.0f}x when decompressed, more than "
                               f"max_compression_ratio={self.limits.max_compression_ratio} (a "
                               "zip bomb looks like this)", name)

    def close(self) -> None:
        self.zip.close()

    # -- reading ------------------------------------------------------------------
    def read_json(self, name: str) -> Any:
        """The member ``name`` parsed as JSON (size and nesting checked)."""
        info = self.members[name]
        if info.file_size > self.limits.max_json_bytes:
            raise ArchiveError(f"the member declares {info.file_size} bytes, more than "
                               f"max_json_bytes={self.limits.max_json_bytes}", name)
        with self._open(name) as stream:
            data = self._read_exactly(stream, info.file_size, name)
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as error:
            raise ArchiveError(f"it is not UTF-8 text ({error})", name) from None
        return parse_json(text, name)

    def array_header(self, name: str) -> ArrayHeader:
        """The shape and dtype the ``.npy`` member ``name`` declares, checked against its size."""
        info = self.members[name]
        with self._open(name) as stream:
            header, offset = self._read_npy_header(stream, name)
        if offset + header.nbytes != info.file_size:
            raise ArchiveError(f"its header declares a {header.shape} {header.dtype} array "
                               f"({header.nbytes} bytes of data), but the member holds "
                               f"{info.file_size - offset}", name)
        return header

    def read_array(self, name: str, header: ArrayHeader) -> np.ndarray:
        """The array of member ``name`` (whose header :meth:`array_header` checked)."""
        with self._open(name) as stream:
            self._read_npy_header(stream, name)
            data = self._read_exactly(stream, header.nbytes, name)
        array = np.frombuffer(data, dtype=header.dtype)  # (a bytearray: writable, no copy)
        if header.dtype == np.bool_ and np.any(array.view(np.uint8) > 1):
            raise ArchiveError("a bool array holds bytes other than 0 and 1", name)
        return array.reshape(header.shape, order="F" if header.fortran_order else "C")

    @contextmanager
    def _open(self, name: str) -> Iterator[IO[bytes]]:
        try:
            with self.zip.open(self.members[name]) as stream:
                yield stream
        except _ZIP_ERRORS as error:  # (no member named: zipfile's messages name it)
            raise ArchiveError(f"{error} ({type(error).__name__} while reading {name!r})") from None

    @staticmethod
    def _read_exactly(stream: IO[bytes], size: int, name: str) -> bytearray:
        """``size`` bytes, into a buffer of that size; the member must end right there."""
        buffer = bytearray(size)
        view, done = memoryview(buffer), 0
        while done < size:
            got = stream.readinto(view[done:done + _CHUNK])
            if not got:
                raise ArchiveError(f"it ends after {done} of its {size} bytes", name)
            done += got
        if stream.read(1):  # (reaching the end also makes zipfile check the CRC)
            raise ArchiveError(f"it holds more than the {size} bytes it declares", name)
        return buffer

    @staticmethod
    def _read_npy_header(stream: IO[bytes], name: str) -> tuple[ArrayHeader, int]:
        """The ``.npy`` header at the start of ``stream`` and how many bytes it took."""
        fmt = np.lib.format
        try:
            version = fmt.read_magic(stream)
            if version == (1, 0):
                shape, fortran, dtype = fmt.read_array_header_1_0(stream)
            elif version == (2, 0):
                shape, fortran, dtype = fmt.read_array_header_2_0(stream)
            else:
                raise ValueError(f".npy format version {version} is not read here")
            offset = stream.tell()
        except _NPY_HEADER_ERRORS as error:
            raise ArchiveError(f"its .npy header is damaged ({error})", name) from None
        if dtype.hasobject or dtype.fields is not None or dtype.subdtype is not None:
            raise ArchiveError(f"the array has dtype {dtype}, which holds Python objects or "
                               "records; teachgrad reads plain numbers only (allow_pickle=False)",
                               name)
        if len(shape) > MAX_NDIM or not all(isinstance(s, int) and s >= 0 for s in shape):
            raise ArchiveError(f"its .npy header declares the shape {shape}", name)
        count = 1
        for s in shape:
            count *= s  # (Python ints: a declared 2**40 x 2**40 cannot overflow)
        return ArrayHeader(tuple(shape), dtype, bool(fortran), count * dtype.itemsize), offset


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON")


def parse_json(text: str, member: str) -> Any:
    """``text`` as JSON: no NaN/Infinity literals, no nesting deeper than MAX_NESTING."""
    try:
        data = json.loads(text, parse_constant=_refuse_constant)
    except RecursionError:
        raise ArchiveError(f"its JSON nests deeper than {MAX_NESTING} levels", member) from None
    except ValueError as error:  # (JSONDecodeError, and ints too long to convert)
        raise ArchiveError(f"it is not valid JSON ({error})", member) from None
    if nesting_depth(data) > MAX_NESTING:
        raise ArchiveError(f"its JSON nests deeper than {MAX_NESTING} levels", member)
    return data


def nesting_depth(data: Any) -> int:
    """How deeply lists and dicts nest in ``data`` (level by level, not by recursion)."""
    depth, level = 0, [data]
    while True:
        containers = [v for v in level if isinstance(v, (dict, list))]
        if not containers:
            return depth
        depth += 1
        level = [item for v in containers for item in (v.values() if isinstance(v, dict) else v)]
