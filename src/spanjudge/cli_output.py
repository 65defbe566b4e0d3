"""How `spanjudge eval` writes its report: spooled until the whole input is read, then written
to stdout or through ``--output`` (a regular file atomically, anything else written through)."""

from __future__ import annotations

import io
import os
import stat
from collections.abc import Iterator
from typing import Any, TextIO

from spanjudge.errors import OutputError


def make_writer(fmt: str, out: TextIO, colour: bool, strict: bool, show: str) -> Any:
    if fmt == "json":
        from spanjudge.emit.report import JsonReportWriter

        return JsonReportWriter(out)
    if fmt == "junit":
        from spanjudge.emit.junit import JunitWriter

        return JunitWriter(out, strict=strict)
    if fmt == "html":
        from spanjudge.emit.html import HtmlWriter

        return HtmlWriter(out)
    from spanjudge.emit.table import TableWriter, terminal_width

    return TableWriter(out, colour=colour, width=terminal_width(), show=show)


class Spool:
    """The report until the whole input is read: in memory up to ``limit`` characters, then in
    an anonymous temporary file (a bad line late in a big file must not leave half a report)."""

    def __init__(self, limit: int = 16 * 1024 * 1024) -> None:
        self.limit = limit
        self._memory: io.StringIO | None = io.StringIO()
        self._file: Any = None

    def write(self, text: str) -> int:
        if self._memory is not None and self._memory.tell() + len(text) > self.limit:
            import tempfile  # only for a report this big

            self._file = tempfile.TemporaryFile("w+", encoding="utf-8")  # noqa: SIM115 (closed by close)
            self._file.write(self._memory.getvalue())
            self._memory = None
        target = self._memory if self._memory is not None else self._file
        return int(target.write(text))

    def chunks(self, size: int = 1 << 16) -> Iterator[str]:
        if self._memory is not None:
            yield self._memory.getvalue()
            return
        self._file.seek(0)
        while chunk := self._file.read(size):
            yield chunk

    def copy_to(self, out: TextIO) -> None:
        for chunk in self.chunks():
            out.write(chunk)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


class LoggingWriter:
    """Passes everything to ``writer`` and logs each session, at DEBUG, as it is written."""

    def __init__(self, writer: Any, log: Any) -> None:
        self.writer = writer
        self.log = log

    def begin(self) -> None:
        self.writer.begin()

    def session(self, result: Any) -> None:
        outcomes = [v.outcome for v in result.verdicts]
        self.log.debug(
            "session %s: %d verdict(s): %d pass, %d fail, %d not evaluated",
            result.trajectory.session_id,
            len(outcomes),
            outcomes.count("pass"),
            outcomes.count("fail"),
            outcomes.count("not_evaluated"),
        )
        self.writer.session(result)

    def end(self, summary: Any, input_report: dict[str, Any]) -> None:
        self.writer.end(summary, input_report)


def write_report(path: str, buf: Spool) -> None:
    """Write the report to ``path``. A regular file (or a symlink to one, which stays a link)
    is replaced atomically, never left half-written; anything else (`/dev/stdout`, a FIFO, a
    device node) is written through, as a shell redirection would. A name for one of this
    process's descriptors (`/dev/stdout`, `/dev/fd/N`, `/proc/self/fd/N`) is appended to even
    when it is a regular file: ``-o /dev/stdout >> log`` adds the report to the log."""
    try:
        info: os.stat_result | None = os.stat(path)
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise OutputError(f"cannot write the report: {exc.strerror}", file=path) from None
    target = os.path.realpath(path)
    descriptor = _names_a_descriptor(path)
    through_special = descriptor or target.startswith(("/proc/", "/dev/"))
    try:
        if (info is not None and not stat.S_ISREG(info.st_mode)) or through_special:
            try:
                # "a" on a descriptor's name: "w" would truncate the file behind it.
                with open(path, "a" if descriptor else "w", encoding="utf-8") as handle:
                    buf.copy_to(handle)
            except BrokenPipeError:
                pass  # `-o /dev/stdout | head`, a FIFO's reader gone: the verdicts stand
            return
        _replace_atomically(target, buf, mode=None if info is None else info.st_mode)
    except OSError as exc:
        raise OutputError(f"cannot write the report: {exc.strerror}", file=path) from None


def _names_a_descriptor(path: str) -> bool:
    """Whether ``path``, or a symlink it leads through, names an open file descriptor."""
    name = os.path.abspath(path)
    for _ in range(40):  # the kernel's own limit on links followed
        if name in ("/dev/stdout", "/dev/stderr") or _is_fd_name(name):
            return True
        try:
            link = os.readlink(name)
        except OSError:
            return False
        name = os.path.normpath(os.path.join(os.path.dirname(name), link))
    return False


def _is_fd_name(name: str) -> bool:
    parts = name.split("/")  # "", "dev", "fd", "1" / "", "proc", "self", "fd", "1"
    if len(parts) == 4 and parts[1:3] == ["dev", "fd"]:
        return parts[3].isdigit()
    if len(parts) == 5 and parts[1] == "proc" and parts[3] == "fd":
        return parts[4].isdigit() and (parts[2] in ("self", "thread-self") or parts[2].isdigit())
    return False


def _replace_atomically(target: str, buf: Spool, mode: int | None) -> None:
    directory, name = os.path.split(target)
    # The pid alone repeats (a container's process is often pid 1): a crashed run's leftover
    # must neither block this one nor be taken for ours.
    tmp = os.path.join(directory, f".{name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    made = False
    try:
        # "x": a new file with the umask's permissions; an existing report keeps its mode.
        with open(tmp, "x", encoding="utf-8") as handle:
            made = True
            buf.copy_to(handle)
        if mode is not None:
            os.chmod(tmp, stat.S_IMODE(mode))
        os.replace(tmp, target)
        made = False
    finally:
        if made:
            os.remove(tmp)
