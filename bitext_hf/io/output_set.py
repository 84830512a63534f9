"""Several output files of one run, planned before the work and committed together: all of them or none
(:class:`OutputSet`). Each file is checked as :func:`bitext_hf.io.outputs.check_output_path` checks one, written to a
temporary beside its target (:mod:`bitext_hf.io.temporary_files`), and renamed at the commit with the signals held.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterable, Iterator
from typing import IO

from bitext_hf.errors import OutputWriteError, UsageError
from bitext_hf.io.outputs import (
    StrPath,
    check_name_length,
    check_named_output,
    check_writable_folder,
    folder_is_writable,
    input_ids,
    non_regular_kind,
    open_arguments,
    refuse_input,
    storage_error,
    writes_in_place,
)
from bitext_hf.io.small_files import file_kind
from bitext_hf.io.temporary_files import (
    hold_signals,
    register_folder,
    register_temp,
    release_signals,
    remove_leftovers,
    temp_path,
    unregister_folder,
    unregister_temp,
)

__all__ = ["OutputSet"]


def _inside(path: str, folder: str) -> bool:
    """Whether ``path`` is ``folder`` or under it (both real, absolute paths)."""
    return path == folder or os.path.commonpath([path, folder]) == folder


class OutputSet:
    """The files one run writes, planned before any work and committed together: all of them or none.

    1. Declare every file before the work (:meth:`add`; :meth:`add_folder` first for a folder that holds some, made
       when the first file is written if it does not exist). Each is checked then (``UsageError``, exit 2): at its
       name no symbolic link, FIFO, device, socket or folder (nothing is opened there: no hang); a parent folder that
       exists (or is declared) and is writable; none of the ``inputs`` (by device and inode: links, ``..`` and hard
       links too, as :func:`protect_inputs`' registry) and nothing in or equal to one of the ``input_folders``; no
       two outputs the same file.
    2. Write each into a temporary file beside its target: :meth:`open` gives a handle, :meth:`staged` a path for
       writers that take one (``np.save``, pyarrow, :func:`bitext_hf.io.tables.write_table`). Inside ``with``.
    3. :meth:`commit` renames every temporary onto its target, those added with ``last=True`` (a sidecar that
       vouches for the rest) after the others, with SIGINT and SIGTERM held until the renames are done (a signal
       that comes during the commit is delivered after it). A rename that fails puts back every file the commit had
       replaced (kept as a hard link, or renamed aside) and removes the new ones.

    Leaving the ``with`` block without a commit (an error, Ctrl-C), or SIGTERM before the commit, removes every
    temporary file and the folder the set made (when nothing else was put in it): the earlier state stays exactly,
    earlier outputs included. A new file gets ``0o666 & ~umask``, a replaced one keeps its mode. Files in a folder
    that the run does not declare are left as they are. A SIGKILL leaves temporaries, which the next write of the
    same target removes (as :func:`atomic_output`'s); one during the commit itself (a few renames) can leave some
    targets new and the others as they were. A single output that is a stream (``-``, a FIFO or device the
    user named) is not a set's: write it with :func:`atomic_output` (see :func:`writes_in_place`); a job's
    :class:`bitext_hf.jobs.base.JobOutputs` does so for the one ``--out`` a user names.

    >>> outputs = OutputSet(inputs=documents, input_folders=["de/"])
    >>> outputs.add_folder("aligned/")
    >>> for name in names:
    ...     outputs.add(f"aligned/{name}.align")
    >>> outputs.add("aligned/alignment.meta.json", last=True)
    >>> # ... the work ...
    >>> with outputs:
    ...     for name in names:
    ...         with outputs.open(f"aligned/{name}.align") as handle:
    ...             handle.write(beads[name])
    ...     with outputs.staged("aligned/table.parquet") as path:
    ...         table.to_parquet(path)
    ...     outputs.commit()
    """

    def __init__(
        self,
        *,
        inputs: Iterable[StrPath | None] = (),
        input_folders: Iterable[StrPath | None] = (),
        option: str = "--out",
    ) -> None:
        # Each input by device and inode (hard links, links, `..`) and by real path: one look-up per output.
        self._input_ids = input_ids(inputs)
        self._input_folders = {
            os.path.realpath(path): os.fspath(path) for path in input_folders if path is not None and os.fspath(path)
        }
        self._option = option
        self._targets: dict[str, tuple[str, bool]] = {}  # real target -> (the path as given, last)
        self._given: dict[str, str] = {}  # the path as given -> real target
        self._folders: dict[str, str] = {}  # real folder -> as given, for the folders to make
        self._checked_folders: set[str] = set()
        self._temps: dict[str, str] = {}  # real target -> its temporary file
        self._made: list[str] = []  # folders made by this set, in order
        self._ready: set[str] = set()  # declared folders that exist now
        self._swept: set[str] = set()  # folders cleared of killed runs' leftovers
        self._committed = False

    # ------------------------------------------------------------------------------------------------- the plan

    @property
    def targets(self) -> list[str]:
        """Every file declared, as given, in the order of the commit (``last`` ones at the end)."""
        return [self._targets[key][0] for key in self._ordered(self._targets)]

    def _ordered(self, keys) -> list[str]:
        return [key for key in keys if not self._targets[key][1]] + [key for key in keys if self._targets[key][1]]

    def _refuse_in_input_folder(self, real: str, shown: str, option: str | None) -> None:
        for folder, given in self._input_folders.items():
            if _inside(real, folder):
                where = "is the input folder" if real == folder else "is inside the input folder"
                prefix = f"{option} {shown}" if option else shown
                raise UsageError(
                    f"{prefix}: {where} {given}; an input folder is never written (its files would become inputs "
                    "of the next run): name another folder"
                )

    def _check_folder(self, folder: str, shown: str, option: str | None) -> None:
        """``folder`` (real) exists, is a folder and is writable."""
        if folder in self._checked_folders or folder in self._folders:
            return
        check_writable_folder(folder, f"{option} {shown}" if option else shown, os.path.dirname(shown) or ".")
        self._checked_folders.add(folder)

    def add_folder(self, path: StrPath, *, option: str | None = None) -> str:
        """Declare the folder ``path`` that holds some of the outputs (a symbolic link the user names is followed).
        It exists and is a writable folder, or it does not exist and its parent is one (it is made when the first
        file is written into it, and removed again if the run ends without a commit); it is no input folder and is
        in none. Returns its real path."""
        option = self._option if option is None else option
        text = os.fspath(path)
        if not text.strip():
            raise UsageError(f"{option}: empty output path")
        prefix = f"{option} {text}" if option else text
        real = os.path.realpath(text)
        self._refuse_in_input_folder(real, text, option)
        try:
            mode: int | None = os.lstat(text).st_mode
        except OSError:
            mode = None  # nothing there
        if mode is not None:
            if not os.path.isdir(text):  # a link to a folder is followed
                raise UsageError(
                    f"{prefix}: is {'a link to no folder' if stat.S_ISLNK(mode) else file_kind(mode, brief=True)}; "
                    "a folder is needed here (one file for each document): name a folder"
                )
            if not folder_is_writable(real):
                raise UsageError(f"{prefix}: folder is not writable")
            self._checked_folders.add(real)
            return real
        self._check_folder(os.path.dirname(real), os.path.normpath(text), option)
        check_name_length(real, f"{prefix}", os.path.dirname(real))
        self._folders[real] = text
        return real

    def add(
        self, path: StrPath, *, last: bool = False, option: str | None = None, follow_symlinks: bool = False
    ) -> str:
        """Declare the output file ``path`` and check it (see the class). ``last``: committed after the others.
        ``follow_symlinks``: the output the user named (``--out``), where a link is followed, as
        :func:`atomic_output` does; files a run names itself (in a folder, a sidecar) never are. Returns its real
        path."""
        option = self._option if option is None else option
        text = os.fspath(path)
        if follow_symlinks:
            check_named_output(text, option or "output")
            if writes_in_place(text):
                prefix = f"{option} {text}" if option else text
                raise UsageError(f"{prefix}: is a stream (stdout, a FIFO or a device), which no set of files holds")
        return self._add_file(text, last=last, option=option, follow_symlinks=follow_symlinks)

    def _add_file(self, text: str, *, last: bool, option: str | None, follow_symlinks: bool) -> str:
        """:meth:`add` once ``text`` is known to be no stream (:class:`bitext_hf.jobs.base.JobOutputs` tells so itself
        for the ``--out`` a user names, which it may write as a stream): every check of an output file, the identity
        against the inputs among them (one :func:`refuse_input`), and the declaration."""
        if follow_symlinks:  # the output the user named: a link is followed, and the refusals name the option
            named: str | None = option or "output"
            real = os.path.realpath(text)
        else:
            named = None
            if not text.strip():
                raise UsageError(f"{option}: empty output path")
            kind = non_regular_kind(text, named=True)
            if kind is not None:
                raise UsageError(f"{text}: is {kind}; bitext-hf writes only regular files there (remove it first)")
            real = os.path.join(os.path.realpath(os.path.dirname(os.path.abspath(text))), os.path.basename(text))
        folder = os.path.dirname(real)
        self._check_folder(folder, text, named)
        # A folder still to make is on its parent's file system.
        shown = f"{named} {text}" if named else text
        check_name_length(real, shown, os.path.dirname(folder) if folder in self._folders else folder)
        refuse_input(real, text, named, inputs=self._input_ids)
        self._refuse_in_input_folder(real, text, option if follow_symlinks else None)
        if real in self._targets:
            raise UsageError(f"{text}: two outputs of this run have this name ({self._targets[real][0]}, {text})")
        self._targets[real] = (text, last)
        self._given[text] = real
        return real

    # ------------------------------------------------------------------------------------------------ the writes

    def _key(self, path: StrPath) -> str:
        text = os.fspath(path)
        if text not in self._given:
            raise ValueError(f"{text} was not declared in this OutputSet (add it before the work)")
        return self._given[text]

    def _stage(self, path: StrPath) -> tuple[str, str]:
        """A new temporary file's name beside the target of ``path`` (its folder made if declared so), registered
        so that SIGTERM removes it."""
        key = self._key(path)
        if key in self._temps:
            raise ValueError(f"{os.fspath(path)} is written twice in this OutputSet")
        folder, name = os.path.split(key)
        if folder in self._folders and folder not in self._ready:
            register_folder(folder)  # before it exists: a signal right after mkdir removes it
            try:
                os.mkdir(folder)
            except FileExistsError:
                unregister_folder(folder)  # made by someone else meanwhile: not ours to remove
                if not os.path.isdir(folder) or os.path.islink(folder):
                    raise UsageError(f"{self._folders[folder]}: is no longer a folder") from None
            except OSError as error:
                unregister_folder(folder)
                raise storage_error(self._folders[folder], error, replaced=True) or error from None
            else:
                self._made.append(folder)
            self._ready.add(folder)
        if folder not in self._swept:
            self._swept.add(folder)
            remove_leftovers(
                folder, {os.path.basename(key) for key in self._targets if os.path.dirname(key) == folder}
            )
        temp = temp_path(folder, name)
        register_temp(temp)
        self._temps[key] = temp
        return key, temp

    @contextlib.contextmanager
    def open(self, path: StrPath, mode: str = "w") -> Iterator[IO]:
        """A handle on the temporary file of the declared output ``path``, flushed to disk at the end of the block.
        A full disk or an I/O error raises ``OutputWriteError`` naming ``path``."""
        key, temp = self._stage(path)
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
            with os.fdopen(fd, mode, **open_arguments(mode)) as handle:
                yield handle
                handle.flush()
                os.fsync(handle.fileno())
        except OSError as error:
            raise storage_error(self._targets[key][0], error, replaced=True) or error from None

    @contextlib.contextmanager
    def staged(self, path: StrPath) -> Iterator[str]:
        """The path of the temporary file of the declared output ``path``, for a writer that takes a path (it may
        write it in place or through :func:`atomic_output`). A failed write's ``OutputWriteError`` names ``path``."""
        key, temp = self._stage(path)
        shown = self._targets[key][0]
        try:
            yield temp
        except OSError as error:
            if isinstance(error, OutputWriteError):
                renamed = OutputWriteError(str(error).replace(temp, shown))
                renamed.errno = error.errno
                raise renamed from None
            raise storage_error(shown, error, replaced=True) or error from None
        if non_regular_kind(temp) is not None or not os.path.lexists(temp):
            raise OutputWriteError(f"{shown}: the writer left no regular file; nothing was written")

    def commit(self) -> list[str]:
        """Rename every written temporary file onto its target, ``last`` ones after the others, with SIGINT and
        SIGTERM held until the renames are done; a failed rename puts back every file the commit had replaced.
        Returns the targets written, as given. A signal held during the commit is delivered after it (Ctrl-C: a
        ``KeyboardInterrupt`` with a note that the outputs were written)."""
        if self._committed:
            raise ValueError("this OutputSet was committed already")
        keys = self._ordered([key for key in self._targets if key in self._temps])
        held = hold_signals()
        try:
            self._rename_all(keys)
            self._committed = True
        finally:
            # Signals first: forgetting the temporaries gives SIGINT and SIGTERM back to the application's handler,
            # which CPython may run (for a signal another thread received) before the mask is restored; one that
            # raises would leave both blocked in this thread and in every child it starts.
            try:
                release_signals(held, self._committed)
            finally:
                self._forget()
        return [self._targets[key][0] for key in keys]

    def _rename_all(self, keys: list[str]) -> None:
        done: list[tuple[str, str | None]] = []  # (target, what it was before: a backup's name, or None)
        try:
            for key in keys:
                shown, temp = self._targets[key][0], self._temps[key]
                kind = non_regular_kind(key, named=True)
                if kind is not None:  # put there after the plan was checked
                    raise UsageError(
                        f"{shown}: is {kind}; bitext-hf writes only regular files there (remove it first)"
                    )
                backup = None
                if os.path.lexists(key):
                    os.chmod(temp, stat.S_IMODE(os.stat(key).st_mode))  # a replaced file keeps its mode
                    backup = temp_path(*os.path.split(key))
                    try:
                        os.link(key, backup)  # the old file stays in place until the rename replaces it
                    except OSError:
                        os.replace(key, backup)  # no hard links here: set aside
                    register_temp(backup)
                    self._temps[key + "\0backup"] = backup
                done.append((key, backup))  # before the rename: a failed one is put back too
                os.replace(temp, key)
        except BaseException as error:
            for target, backup in reversed(done):
                with contextlib.suppress(OSError):
                    if backup is None:
                        os.unlink(target)
                    else:
                        os.replace(backup, target)
            wrapped = (
                storage_error(self._targets[key][0], error, replaced=True) if isinstance(error, OSError) else None
            )
            if wrapped is not None:
                raise wrapped from None
            raise

    def _forget(self) -> None:
        """Remove every temporary file and backup left, and (without a commit) the folders this set made."""
        for temp in self._temps.values():
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp)
            unregister_temp(temp)
        self._temps.clear()
        for folder in reversed(self._made):
            if not self._committed:
                with contextlib.suppress(OSError):
                    os.rmdir(folder)  # only when empty: what someone else put in it stays
            unregister_folder(folder)
        self._made.clear()

    def discard(self) -> None:
        """Remove every temporary file and the folders this set made (when still empty); nothing is committed."""
        if not self._committed:
            self._forget()

    def __enter__(self) -> OutputSet:
        return self

    def __exit__(self, *exc_info) -> None:
        self.discard()
