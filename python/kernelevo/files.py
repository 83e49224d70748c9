"""Reading the files of a model folder or a task, which may be someone else's: the twin of
tool/common/fs.cpp read_input_file(). stat() first (a FIFO or a device is refused before it is opened:
opening one may block, reading one may never end), opened without waiting (O_NONBLOCK, should a FIFO have
replaced the file since), checked again on the open file, and read to at most a bound: never more bytes
than the file is expected to have."""
import json
import os
import stat

MAX_INPUT_FILE_BYTES = 16 << 20  # tool/common/fs.h kMaxInputFileBytes: a JSON file read whole (task.json, plan.json)


class FileRefused(ValueError):
    """A file that is not what it must be (missing, not a regular file, too large, of the wrong size);
    the message is one line naming the file."""


def _kind(mode):
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _mb(n):
    return "%.1f MB" % (n / float(1 << 20))


def open_regular(path, what):
    """An open binary file object of the regular file `path` (never a FIFO, a device or a folder)."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise FileRefused("cannot read %s: %s" % (path, e.strerror)) from None
    if not stat.S_ISREG(st.st_mode):
        raise FileRefused("%s is %s, not %s%s" % (path, _kind(st.st_mode), what, "" if stat.S_ISDIR(st.st_mode) else
                                                  " (a file that is read whole must be a regular file)"))
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise FileRefused("cannot read %s: %s" % (path, e.strerror)) from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise FileRefused("%s is %s, not %s" % (path, _kind(st.st_mode), what))
    return os.fdopen(fd, "rb")


def read_regular(path, what, max_bytes=MAX_INPUT_FILE_BYTES, exact=None):
    """The bytes of the regular file `path`: at most max_bytes, or exactly `exact` bytes where given (a
    tensor file of a declared shape and dtype); anything else is a FileRefused naming the file."""
    limit = max_bytes if exact is None else exact
    with open_regular(path, what) as f:
        size = os.fstat(f.fileno()).st_size
        if exact is not None and size != exact:
            raise FileRefused("%s has %d bytes; %s has %d (its declared shape and dtype)" % (path, size, what, exact))
        if size > limit:
            raise FileRefused("%s is too large for %s (%s; at most %s)" % (path, what, _mb(size), _mb(limit)))
        data = f.read(limit + 1)  # at most one byte more: a file that grows (or lies about its size) is still bounded
    if len(data) > limit or (exact is not None and len(data) != exact):
        raise FileRefused("%s changed while it was read (%s): not used" % (path, what))
    return data


def load_json_file(path, what):
    """A JSON file read with read_regular (at most MAX_INPUT_FILE_BYTES); one line naming it when it is not JSON."""
    data = read_regular(path, what)
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise FileRefused("%s: not valid JSON (%s): %s" % (path, what, " ".join(str(e).split())[:200])) from None
