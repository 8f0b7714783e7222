"""The remote half of candidate snapshots: one standalone script, standard library only.

vibesys sends this file's text and runs it on the cluster as `python3 -I -c SOURCE ARGS...`
(or from a file: `python3 -I FILE ARGS...`); vibesys also imports it locally, so the digest
encoding has exactly one definition. It must keep running on Python 3.6 (the python3 of RHEL 8
and SLES 15 login nodes): no walrus, no dataclasses, no `from __future__ import annotations`,
and annotations that Python evaluates are written as strings. Paths are bytes throughout, so
neither the remote locale nor the file-system encoding matters.

Digest, format v1 (see `digest_of`): sha256 over the ASCII header `vibesys-snapshot-v1` and a
NUL, then, for every entry in ascending order of its path's bytes, `PATH NUL MODE NUL HASH NUL`:
    PATH  the relative POSIX path, UTF-8, components joined by "/", no leading "./"
    MODE  six ASCII octal digits: 100644 regular file, 100755 regular file whose owner-execute
          bit is set, 040755 directory, 120777 symbolic link (other permission bits and
          timestamps are not part of the snapshot)
    HASH  64 lowercase hex digits: sha256 of the file's bytes, of the link's target bytes
          (never followed), or of nothing for a directory
Paths cannot hold NUL and MODE and HASH are fixed-width, so any file name (spaces, newlines,
any Unicode) encodes unambiguously. The marker file `.vibesys-snapshot` at the top level is
not an entry; anything else that is not a file, directory or symbolic link is a mismatch.

Usage (exit 0 on success, 2 on bad arguments, one line on stderr on failure):
    SCRIPT DIR DIGEST                        verify: 0 if DIR is exactly the snapshot DIGEST,
                                             86 otherwise (missing DIR included)
    SCRIPT --probe DIR DIGEST                as verify, but 3 when DIR does not exist
    SCRIPT --append SNAPSHOTS TOKEN          append stdin to SNAPSHOTS/.incoming-TOKEN.tar
    SCRIPT --install SNAPSHOTS DIGEST TOKEN  append stdin to that tar, extract it into
                                             SNAPSHOTS/.incoming-TOKEN/, write the marker,
                                             verify (86 if it does not), rename it to
                                             SNAPSHOTS/DIGEST, print `installed`, `present`
                                             (another stager won the race) or `replaced NAME`
                                             (a copy that failed to verify moved to NAME)
    SCRIPT --abort SNAPSHOTS TOKEN           remove what an unfinished stage left behind
"""

import contextlib
import errno
import hashlib
import os
import re
import shutil
import stat
import sys
import tarfile

# Imported when vibesys imports this module; `verify_script()` sends beneath.py's own text in
# place of this line, so the remote side walks a directory by the same rules.
from vibesys.osutil.beneath import Changed, open_dir, open_file, open_root

FORMAT_HEADER = b"vibesys-snapshot-v1\0"
MARKER = ".vibesys-snapshot"
MODE_FILE = "100644"
MODE_EXECUTABLE = "100755"
MODE_DIR = "040755"
MODE_SYMLINK = "120777"
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
#: Bytes read per call when hashing or copying.
CHUNK = 1 << 20
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_ABSENT = 3
EXIT_MISMATCH = 86

_DIGEST = re.compile(r"\A[0-9a-f]{64}\Z")
_TOKEN = re.compile(r"\A[0-9a-f]{16}\Z")
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


class Mismatch(Exception):
    """The directory is not the snapshot it claims to be."""


class Failed(Exception):
    """The operation could not be carried out."""


def digest_of(records: "list[tuple[bytes, str, str]]") -> str:
    """The v1 digest of (path bytes, MODE, HASH) records, in any order."""
    digest = hashlib.sha256(FORMAT_HEADER)
    for path, mode, sha in sorted(records):
        digest.update(path + b"\0" + mode.encode("ascii") + b"\0" + sha.encode("ascii") + b"\0")
    return digest.hexdigest()


def fd_sha256(fd: int, buffer: memoryview) -> str:
    """sha256 hex of what is left to read from the descriptor `fd`, in `len(buffer)` chunks."""
    digest = hashlib.sha256()
    while True:
        count = os.readv(fd, [buffer])
        if not count:
            return digest.hexdigest()
        digest.update(buffer[:count])


def file_mode(st_mode: int) -> str:
    return MODE_EXECUTABLE if st_mode & stat.S_IXUSR else MODE_FILE


def tree_records(root: bytes) -> "list[tuple[bytes, str, str]]":
    """Every entry under `root` as a digest record; raises Mismatch for what no snapshot holds.
    Each directory is opened from its parent's descriptor and each file once from its
    directory's, never through a link (a name swapped meanwhile is a Mismatch)."""
    try:
        top = os.lstat(root)
    except FileNotFoundError:
        raise Mismatch("does not exist") from None
    if not stat.S_ISDIR(top.st_mode):
        raise Mismatch("is not a directory")
    buffer = memoryview(bytearray(CHUNK))
    records = []  # type: list[tuple[bytes, str, str]]
    #: a descriptor of each directory being walked, and its subdirectories still to enter
    stack = []  # type: list[tuple[int, list[bytes]]]
    try:
        fd = open_root(root, follow=False)
        stack.append((fd, []))
        stack[-1] = (fd, _list(fd, b"", records, buffer))
        while stack:
            fd, subdirectories = stack[-1]
            if not subdirectories:
                stack.pop()
                os.close(fd)
                continue
            relative = subdirectories.pop()
            child = open_dir(fd, os.path.basename(relative), _text(relative))
            stack.append((child, []))
            stack[-1] = (child, _list(child, relative + b"/", records, buffer))
    except Changed as exc:
        raise Mismatch("changed while it was verified: " + str(exc)) from None
    finally:
        for fd, _ in stack:
            os.close(fd)
    return records


def _list(
    fd: int, prefix: bytes, records: "list[tuple[bytes, str, str]]", buffer: memoryview
) -> "list[bytes]":
    """Record the entries of the directory `fd` (at `prefix`); its subdirectories' paths."""
    subdirectories = []  # type: list[bytes]
    for text in os.listdir(fd):  # names as str (surrogate escapes): os.listdir(fd) has no bytes
        name = os.fsencode(text)
        relative = prefix + name
        if relative == MARKER.encode("ascii"):
            continue
        info = os.stat(name, dir_fd=fd, follow_symlinks=False)
        if stat.S_ISLNK(info.st_mode):
            target = os.readlink(name, dir_fd=fd)
            records.append((relative, MODE_SYMLINK, hashlib.sha256(target).hexdigest()))
        elif stat.S_ISDIR(info.st_mode):
            records.append((relative, MODE_DIR, EMPTY_SHA256))
            subdirectories.append(relative)
        elif stat.S_ISREG(info.st_mode):
            file, opened = open_file(fd, name, _text(relative))
            try:
                records.append((relative, file_mode(opened.st_mode), fd_sha256(file, buffer)))
            finally:
                os.close(file)
        else:
            raise Mismatch("holds a special file: " + _show(relative))
    return subdirectories


def verify(root: bytes, expected: str) -> None:
    try:
        records = tree_records(root)
    except OSError as exc:
        raise Mismatch("cannot be read: " + str(exc)) from None
    found = digest_of(records)
    if found != expected:
        raise Mismatch(f"has digest {found} over {len(records)} entries, expected {expected}")


def _text(path: bytes) -> str:
    return path.decode("utf-8", "replace")


def _show(path: bytes) -> str:
    return repr(_text(path))


def _incoming(snapshots: bytes, token: str) -> "tuple[bytes, bytes]":
    base = os.path.join(snapshots, b".incoming-" + token.encode("ascii"))
    return base, base + b".tar"


def _append_stdin(path: bytes) -> None:
    # 0600: the archive holds files that may be readable by their owner only
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | _NOFOLLOW
    with open(os.open(path, flags, 0o600), "ab") as sink:
        shutil.copyfileobj(sys.stdin.buffer, sink, CHUNK)


def _member_path(name: str, links: "set[bytes]") -> bytes:
    """The relative path of a tar member, refusing anything our own stager never writes."""
    relative = name.encode("utf-8")
    parts = relative.split(b"/")
    if b"\0" in relative or any(part in (b"", b".", b"..") for part in parts):
        raise Failed("refusing tar member " + _show(relative))
    if relative == MARKER.encode("ascii"):
        raise Failed("refusing tar member named like the marker")
    for index in range(1, len(parts)):
        if b"/".join(parts[:index]) in links:
            raise Failed("refusing tar member below a symbolic link: " + _show(relative))
    return relative


def _extract(archive: bytes, dest: bytes) -> None:
    with open(archive, "rb") as source, tarfile.open(fileobj=source, encoding="utf-8") as tar:
        _extract_members(tar, dest)


def _extract_members(tar: tarfile.TarFile, dest: bytes) -> None:
    links = set()  # type: set[bytes]
    for member in tar:
        name = member.name.rstrip("/") if member.isdir() else member.name
        relative = _member_path(name, links)
        path = os.path.join(dest, relative)
        if member.isdir():
            os.mkdir(path, 0o700)
            os.chmod(path, _staged(member.mode, 0o755))
        elif member.issym():
            os.symlink(member.linkname.encode("utf-8"), path)
            links.add(relative)
        elif member.isreg():
            content = tar.extractfile(member)
            assert content is not None
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW
            with open(os.open(path, flags, 0o600), "wb") as sink:
                shutil.copyfileobj(content, sink, CHUNK)
                normalized = 0o755 if member.mode & stat.S_IXUSR else 0o644
                os.fchmod(sink.fileno(), _staged(member.mode, normalized))
        else:
            raise Failed("refusing tar member of type " + repr(member.type))


def _staged(mode: int, normalized: int) -> int:
    """A copy's permission bits: the normalized mode, no more than the stager's tar member
    grants group and others (the source's own; see `reader.staged_mode`)."""
    return normalized & (mode | 0o700)


def _remove(path: bytes) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.unlink(path)


def _matches(path: bytes, digest: str) -> bool:
    try:
        verify(path, digest)
    except Mismatch:
        return False
    return True


def install(snapshots: bytes, digest: str, token: str) -> str:
    temporary, archive = _incoming(snapshots, token)
    final = os.path.join(snapshots, digest.encode("ascii"))
    try:
        _append_stdin(archive)
        os.mkdir(temporary, 0o700)  # the top's own mode is not in the archive: owner only
        _extract(archive, temporary)
        os.unlink(archive)
        with open(os.path.join(temporary, MARKER.encode("ascii")), "w") as marker:
            marker.write(digest + "\n")
        verify(temporary, digest)
        # rename(2) is atomic and never replaces a non-empty directory: of two stagers of the
        # same digest, exactly one puts its copy in place.
        quarantined = ""
        for attempt in range(3):
            try:
                os.rename(temporary, final)
                return "replaced " + quarantined if quarantined else "installed"
            except OSError as exc:
                if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR, errno.EISDIR):
                    raise
            if _matches(final, digest):
                _remove(temporary)
                return "present"
            # What is there does not verify: keep it aside for inspection, never delete it.
            name = ".quarantine-{}-{}{}".format(digest, token, f"-{attempt}" if attempt else "")
            try:
                os.rename(final, os.path.join(snapshots, name.encode("ascii")))
                quarantined = name
            except FileNotFoundError:
                pass
        raise Failed("could not put the snapshot in place: " + _show(final))
    except BaseException:
        for leftover in (temporary, archive):
            with contextlib.suppress(OSError):
                _remove(leftover)
        raise


def main(argv: "list[str]") -> int:
    args = argv[1:]
    mode = args.pop(0) if args and args[0].startswith("--") else "--verify"
    shapes = {"--verify": 2, "--probe": 2, "--append": 2, "--install": 3, "--abort": 2}
    if shapes.get(mode) != len(args):
        sys.stderr.write("vibesys-snapshot: usage: see the script's docstring\n")
        return EXIT_USAGE
    target = os.fsencode(args[0])
    token = args[-1] if mode in ("--append", "--install", "--abort") else ""
    digest = args[1] if mode in ("--verify", "--probe", "--install") else ""
    if (digest and not _DIGEST.match(digest)) or (token and not _TOKEN.match(token)):
        sys.stderr.write("vibesys-snapshot: malformed digest or token\n")
        return EXIT_USAGE
    try:
        if mode in ("--verify", "--probe"):
            if mode == "--probe" and not os.path.lexists(target):
                return EXIT_ABSENT
            verify(target, digest)
        elif mode == "--append":
            os.makedirs(target, exist_ok=True)
            _append_stdin(_incoming(target, token)[1])
        elif mode == "--install":
            os.makedirs(target, exist_ok=True)
            sys.stdout.write(install(target, digest, token) + "\n")
        else:
            for leftover in _incoming(target, token):
                _remove(leftover)
    except Mismatch as exc:
        sys.stderr.write(f"vibesys-snapshot: digest mismatch: {args[0]} {exc}\n")
        return EXIT_MISMATCH
    except (Failed, OSError, tarfile.TarError, UnicodeError) as exc:
        sys.stderr.write(f"vibesys-snapshot: {mode[2:]} failed: {exc}\n")
        return EXIT_FAILED
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main(sys.argv))
