r"""Writing an output file or folder so that it appears whole or not at all.

Every file and folder gdln writes goes through here: each command's ``-o``,
:func:`gdln.compare`'s folder and :meth:`gdln.Trajectory.save`. The rules:

1. **Checked first.** :func:`check_file` and :func:`check_folder` refuse, before anything
   is computed, an existing output without ``force``, a missing folder, and a folder that
   cannot be written (they create and remove a probe file there, which also catches a
   read-only file system); they also remove stale temporary names of dead runs
   (:func:`~gdln.outputs.remove_stale`).
2. **Written aside.** :func:`atomic_file` and :func:`atomic_folder` hand out a temporary
   file or folder beside the output (same folder, so the same file system). An error
   while writing (a full disk, say) removes it and names the output, never the temporary
   name; so do SIGINT and SIGTERM, which the command line turns into exceptions.
3. **Moved into place exclusively**, holding the folder's lock
   (:func:`~gdln.outputs._temporary.locked`): a file by :func:`os.link`, which fails if
   the name exists, so that of two runs racing without ``force`` one fails instead of
   silently replacing the other (with ``force``: :func:`os.replace`). A new folder by
   one :func:`os.rename`; an existing one (``force``, or when none of its entries is one
   of the output's ``names``) by a swap: the entries that the run does not write are
   hard-linked (copied where links are refused) into the new folder, the old folder is
   renamed aside, the new one renamed into its place (SIGINT and SIGTERM held back for
   the two renames), and the old one removed. A reader sees the old folder or the new
   one, never a mixture.

The current folder (or one holding it) is never replaced, since the swap would leave the
shell in a removed folder.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import tempfile
from collections.abc import Collection, Iterator
from pathlib import Path

from ._errors import OutputError, OutputExistsError, reason, shown
from ._temporary import aside_name, held_signals, locked, prefix, remove_stale

__all__ = ["atomic_file", "atomic_folder", "check_file", "check_folder", "folder_problem"]

PathLike = str | os.PathLike[str]

_NO_HARD_LINKS = frozenset(
    {errno.EPERM, errno.EACCES, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK, errno.ENOSYS}
)
"""Errors of :func:`os.link` that mean "no hard link here", not "the name exists"."""


def _mode(bits: int) -> int:
    """``bits`` less the process's umask: what ``open`` or ``mkdir`` would give."""
    umask = os.umask(0)
    os.umask(umask)
    return bits & ~umask


def _cannot_write(output: Path, err: OSError) -> OutputError:
    return OutputError(f"{shown(output)}: cannot write: {reason(err)}", path=output)


def _cannot_create_in(output: Path, folder: Path, err: OSError) -> OutputError:
    problem = folder_problem(folder)
    if problem is not None:
        return OutputError(f"{shown(output)}: {problem}", path=output)
    return OutputError(
        f"{shown(output)}: cannot write in the folder {shown(folder)}: {reason(err)}", path=output
    )


def folder_problem(folder: PathLike) -> str | None:
    """Why ``folder`` cannot hold an output, in words; ``None`` when it is a folder.

    Each case is told apart: a folder that does not exist, a file where a folder should
    be (``folder`` itself or a folder above it), and one that cannot be reached (no
    permission to search a folder above it, a name too long). Whether the folder can be
    written is for the probe of :func:`check_file` to find.

    Parameters
    ----------
    folder
        The folder an output is to be written in.

    Returns
    -------
    str or None
        E.g. ``"the folder out does not exist"``, ``"out is a file, not a folder"``,
        ``"cannot reach the folder out: Permission denied"``.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> here = pathlib.Path(tempfile.mkdtemp())
    >>> folder_problem(here) is None
    True
    >>> folder_problem(here / "missing") == f"the folder {here / 'missing'} does not exist"
    True
    >>> _ = (here / "note.txt").write_text("")
    >>> folder_problem(here / "note.txt" / "out") == f"{here / 'note.txt'} is a file, not a folder"
    True
    """
    folder = Path(folder)
    try:
        info = os.stat(folder)
    except FileNotFoundError:
        return f"the folder {shown(folder)} does not exist"
    except NotADirectoryError:
        above = next((p for p in folder.parents if os.path.isfile(p)), None)
        if above is None:
            return f"the folder {shown(folder)} does not exist"
        return f"{shown(above)} is a file, not a folder"
    except OSError as err:  # no permission to search a folder above, a name too long
        return f"cannot reach the folder {shown(folder)}: {reason(err)}"
    if not stat.S_ISDIR(info.st_mode):
        return f"{shown(folder)} is a file, not a folder"
    return None


def _probe(folder: Path, output: Path) -> None:
    """Create and remove a file in ``folder``: refuse now what would fail at the end."""
    remove_stale(folder)
    try:
        handle, name = tempfile.mkstemp(dir=folder, prefix=prefix(output.name or "output"))
    except OSError as err:
        raise _cannot_create_in(output, folder, err) from err
    os.close(handle)
    os.unlink(name)


# ----------------------------------------------------------------------------- files


def check_file(path: PathLike, *, force: bool = False) -> Path:
    """Check, before computing, that an output file can be written at ``path``.

    Parameters
    ----------
    path
        The output file.
    force
        Whether an existing file may be replaced.

    Returns
    -------
    Path
        ``path``.

    Raises
    ------
    OutputExistsError
        ``path`` exists and ``force`` is false.
    OutputError
        Its folder does not exist or cannot be written, or ``path`` is a folder.
    """
    path = Path(path)
    problem = folder_problem(path.parent)
    if problem is not None:
        raise OutputError(f"{shown(path)}: {problem}", path=path)
    if path.is_dir():
        raise OutputError(f"{shown(path)}: is a folder; expected a file", path=path)
    if os.path.lexists(path) and not force:
        raise OutputExistsError(path)
    _probe(path.parent, path)
    return path


@contextlib.contextmanager
def atomic_file(path: PathLike, *, force: bool = False) -> Iterator[Path]:
    """A temporary file beside ``path`` (same extension) that becomes ``path`` on success.

    Write to the path this yields; when the block ends normally the file is moved into
    place (exclusively unless ``force``). On any error, or SIGINT/SIGTERM, the temporary
    file is removed and ``path`` is left as it was.

    Parameters
    ----------
    path
        The output file.
    force
        Whether an existing file may be replaced.

    Yields
    ------
    Path
        The temporary file to write (it exists, empty, with the usual permissions).

    Raises
    ------
    OutputExistsError
        ``path`` exists (or appeared while writing) and ``force`` is false.
    OutputError
        The file cannot be written (e.g. ``No space left on device``), named as ``path``.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "note.txt"
    >>> with atomic_file(out) as temporary:
    ...     _ = temporary.write_text("whole")
    >>> out.read_text()
    'whole'
    """
    path = Path(path)
    if path.is_dir():
        raise OutputError(f"{shown(path)}: is a folder; expected a file", path=path)
    if os.path.lexists(path) and not force:
        raise OutputExistsError(path)
    folder = path.parent
    remove_stale(folder)
    try:
        handle, name = tempfile.mkstemp(dir=folder, prefix=prefix(path.name), suffix=path.suffix)
    except OSError as err:
        raise _cannot_create_in(path, folder, err) from err
    os.close(handle)
    temporary = Path(name)
    try:
        temporary.chmod(_mode(0o666))  # mkstemp's 0o600 would make the output private
        try:
            yield temporary
        except OutputError:
            raise
        except OSError as err:
            raise _cannot_write(path, err) from err
        _commit_file(temporary, path, force=force)
    finally:
        with contextlib.suppress(OSError):
            temporary.unlink()


def _commit_file(temporary: Path, path: Path, *, force: bool) -> None:
    """Move ``temporary`` to ``path``: replacing it if ``force``, else only if absent."""
    with locked(path.parent):
        try:
            if force:
                os.replace(temporary, path)
                return
            try:
                os.link(temporary, path)
            except FileExistsError:
                raise OutputExistsError(path) from None
            except OSError as err:
                if err.errno not in _NO_HARD_LINKS:
                    raise
                # no hard links on this file system: claim the name, then fill it
                try:
                    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
                except FileExistsError:
                    raise OutputExistsError(path) from None
                os.replace(temporary, path)
        except OutputError:
            raise
        except IsADirectoryError:
            raise OutputError(f"{shown(path)}: is a folder; expected a file", path=path) from None
        except OSError as err:
            raise _cannot_write(path, err) from err


# ----------------------------------------------------------------------------- folders


def _real(path: Path) -> Path:
    """The folder ``path`` names, symbolic links resolved (the swap happens there)."""
    return Path(os.path.realpath(path))


def _first_clash(real: Path, names: Collection[str] | None) -> str | None:
    """The first entry of ``real`` that an output would replace: one of ``names``, or
    (``names`` ``None``) any entry at all; ``None`` if there is none."""
    try:
        present = set(os.listdir(real))
    except FileNotFoundError:
        return None
    if names is None:
        return min(present) if present else None
    return next((n for n in names if n in present), None)


def _refuse(path: Path, real: Path, *, force: bool, names: Collection[str] | None) -> None:
    """What :func:`check_folder` and :func:`atomic_folder` refuse before writing."""
    if os.path.lexists(real) and not real.is_dir():
        raise OutputError(f"{shown(path)}: is a file; expected a folder", path=path)
    if not real.is_dir():
        return
    try:
        here: Path | None = Path.cwd().resolve()
    except OSError:  # the current folder was removed
        here = None
    if here is not None and (real == here or real in here.parents):
        raise OutputError(
            f"{shown(path)}: is the current folder or holds it; write the output to a folder inside it",
            path=path,
        )
    clash = _first_clash(real, names)
    if clash is not None and not force:
        raise OutputExistsError(path if names is None else path / clash)


def check_folder(
    path: PathLike,
    *,
    force: bool = False,
    names: Collection[str] | None = None,
    parents: bool = False,
) -> Path:
    """Check, before computing, that an output folder can be written at ``path``.

    Parameters
    ----------
    path
        The output folder: missing, or an existing folder.
    force
        Whether existing entries may be replaced.
    names
        The entries the output consists of: an existing folder is refused without
        ``force`` only if it holds one of them. ``None``: if it holds anything.
    parents
        Whether missing folders above ``path`` will be created.

    Returns
    -------
    Path
        ``path``.

    Raises
    ------
    OutputExistsError
        The folder holds an entry it would replace and ``force`` is false.
    OutputError
        ``path`` is a file, is (or holds) the current folder, or the folder above it is
        missing (unless ``parents``) or cannot be written.
    """
    path = Path(path)
    real = _real(path)
    _refuse(path, real, force=force, names=names)
    folder = real.parent
    problem = folder_problem(folder)
    if problem is not None:
        if not parents or not problem.endswith("does not exist"):
            raise OutputError(f"{shown(path)}: {problem}", path=path)
        while not folder.is_dir() and folder != folder.parent:
            folder = folder.parent
    _probe(folder, real)
    return path


@contextlib.contextmanager
def atomic_folder(
    path: PathLike,
    *,
    force: bool = False,
    names: Collection[str] | None = None,
    parents: bool = False,
) -> Iterator[Path]:
    """A temporary folder beside ``path`` that takes its place, whole, on success.

    Write the output's files into the folder this yields. When the block ends normally,
    a missing ``path`` is created by one rename; an existing one is swapped for the new
    folder, which first receives (as hard links, or copies) every entry of the old one
    that it does not hold itself, so that ``force`` replaces the output's own entries
    and keeps the others. On any error, or SIGINT/SIGTERM, the temporary folder is
    removed and ``path`` is left as it was.

    Parameters
    ----------
    path
        The output folder.
    force
        Whether existing entries may be replaced.
    names
        The entries the output consists of (see :func:`check_folder`); every one of
        them in an existing folder is replaced or dropped.
    parents
        Create missing folders above ``path``.

    Yields
    ------
    Path
        The temporary folder to write into.

    Raises
    ------
    OutputExistsError
        ``path`` holds an entry it would replace (or appeared while writing) and
        ``force`` is false.
    OutputError
        Writing failed (named as the file under ``path``), an existing entry could not
        be kept, or the folder could not be replaced.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "result"
    >>> with atomic_folder(out) as temporary:
    ...     _ = (temporary / "a.txt").write_text("1")
    ...     _ = (temporary / "b.txt").write_text("2")
    >>> sorted(p.name for p in out.iterdir())
    ['a.txt', 'b.txt']
    """
    path = Path(path)
    real = _real(path)
    _refuse(path, real, force=force, names=names)
    if parents:
        try:
            real.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise _cannot_create_in(path, path.parent, err) from err
    remove_stale(real.parent)
    try:
        temporary = Path(tempfile.mkdtemp(dir=real.parent, prefix=prefix(real.name)))
    except OSError as err:
        raise _cannot_create_in(path, path.parent, err) from err
    try:
        temporary.chmod(_mode(0o777))  # mkdtemp's 0o700 would make the output private
        try:
            yield temporary
        except OSError as err:
            raise _named_in(err, temporary, path) from err
        _commit_folder(temporary, real, path, force=force, names=names)
    finally:
        if temporary.is_dir():
            shutil.rmtree(temporary, ignore_errors=True)


def _named_in(err: OSError, temporary: Path, path: Path) -> OutputError:
    """``err`` from writing inside ``temporary``, as an error naming the file in ``path``."""
    if isinstance(err, OutputError):
        message = str(err)
        if err.path is not None:  # its message shows the path shortened
            with contextlib.suppress(ValueError):
                inside = path / err.path.relative_to(temporary)
                message = message.replace(shown(err.path), shown(inside))
        return OutputError(message.replace(str(temporary), str(path)), path=path)
    named = path
    if err.filename is not None:
        with contextlib.suppress(ValueError):
            named = path / Path(os.fsdecode(err.filename)).relative_to(temporary)
    return _cannot_write(named, err)


def _commit_folder(
    temporary: Path, real: Path, path: Path, *, force: bool, names: Collection[str] | None
) -> None:
    """Put ``temporary`` in the place of ``real`` (shown to the user as ``path``)."""
    ours = set(os.listdir(temporary)) | set(names or ())
    with locked(real.parent):
        remove_stale(real.parent)
        try:
            present: list[str] | None = sorted(os.listdir(real))
        except FileNotFoundError:
            present = None
        except NotADirectoryError:
            raise OutputError(f"{shown(path)}: is a file; expected a folder", path=path) from None
        except OSError as err:
            raise OutputError(
                f"{shown(path)}: cannot read the folder: {reason(err)}", path=path
            ) from err
        if present:
            clash = _first_clash(real, names)
            if clash is not None and not force:
                raise OutputExistsError(path if names is None else path / clash)
            _carry(real, temporary, [e for e in present if e not in ours], path)
            _swap(temporary, real, path)
            return
        if present is not None:  # an empty folder: the rename below replaces it
            with contextlib.suppress(OSError):
                shutil.copymode(real, temporary)
        try:
            os.rename(temporary, real)
        except OSError as err:
            if err.errno in (errno.ENOTEMPTY, errno.EEXIST):
                raise OutputExistsError(path) from None
            raise OutputError(f"{shown(path)}: cannot create: {reason(err)}", path=path) from err


def _link_or_copy(source: str, target: str) -> None:
    """Hard-link ``source`` as ``target``; copy it where links are refused."""
    try:
        os.link(source, target, follow_symlinks=False)
    except OSError:
        if not stat.S_ISREG(os.lstat(source).st_mode):
            raise
        shutil.copy2(source, target)


def _carry(real: Path, temporary: Path, kept: list[str], path: Path) -> None:
    """Give the new folder the entries of the old one that the output does not replace."""
    for entry in kept:
        source, target = real / entry, temporary / entry
        try:
            if source.is_symlink():
                os.symlink(os.readlink(source), target)
            elif source.is_dir():
                shutil.copytree(source, target, symlinks=True, copy_function=_link_or_copy)
            else:
                _link_or_copy(str(source), str(target))
        except OSError as err:
            raise OutputError(
                f"{shown(path)}: cannot keep {shown(entry)} in the new folder: {reason(err)}; nothing was "
                "changed",
                path=path,
            ) from err


def _swap(temporary: Path, real: Path, path: Path) -> None:
    """Rename ``real`` aside, ``temporary`` into its place, and remove the old folder."""
    with contextlib.suppress(OSError):
        shutil.copymode(real, temporary)
    aside = real.parent / aside_name(real.name)
    with held_signals():
        try:
            os.rename(real, aside)
        except OSError as err:
            raise OutputError(
                f"{shown(path)}: cannot be replaced: {reason(err)}; nothing was changed", path=path
            ) from err
        try:
            os.rename(temporary, real)
        except OSError as err:
            os.rename(aside, real)
            raise OutputError(
                f"{shown(path)}: cannot be replaced: {reason(err)}; nothing was changed", path=path
            ) from err
    shutil.rmtree(aside, ignore_errors=True)
