"""Output folders that never destroy what pyembed did not write.

Every command and writer that puts several files into a folder (``pyembed
plan -o``, ``pyembed firmware -o``, ``pyembed schedule -o``, the demo) writes
through an :class:`OutputDir`:

* the folder keeps a manifest, ``.pyembed-manifest.json``: the relative path
  and SHA-256 of every file pyembed wrote there, and the sub-folders it created;
* a file is replaced only when the manifest lists it and its content is still
  what pyembed wrote; anything else at a path pyembed wants to write (a user's
  file, a generated file edited since) is refused, all of them named in one
  ArgumentError (exit 2 through the CLI), unless ``force``;
* nothing is written through a symbolic link below the folder (a linked
  ``DIR/model`` is refused even with ``force``; a linked file is replaced by
  a regular file with ``force``, its target untouched);
* every file is written to a temporary name in its own folder and moved into
  place with ``os.replace`` only when the whole output is ready (``commit``);
  a failure before or during the commit leaves the folder as it was: files
  already moved are moved back, the temporary files and the sub-folders created
  for them are removed;
* after a commit, files of the previous manifest this run did not write again
  are deleted when unchanged (a stale generated file must not stay in the
  build), and sub-folders pyembed created are removed only when empty. No
  folder pyembed did not create is ever removed, and no folder is removed
  recursively.

Usage::

    with OutputDir(path, force=False) as out:     # commits on success, rolls back on an exception
        out.write_text("model/memplan.h", text)
        fig.savefig(out.stage_path("plot.png"))
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets

from pyembed.errors import ArgumentError

__all__ = ["MANIFEST", "OutputDir", "staged", "copy_tree", "refresh"]

MANIFEST = ".pyembed-manifest.json"
_TMP = ".pyembed-tmp-"
_OLD = ".pyembed-old-"


def _sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 16), b""):
            h.update(chunk)
    return h.hexdigest()


def _split(rel):
    """A relative path inside the folder as its components ('/'-separated, no
    '..', no absolute path)."""
    if not isinstance(rel, str) or not rel or rel.startswith(("/", "\\")):
        raise ArgumentError(f"output file {rel!r}: expected a relative path inside the output folder")
    parts = rel.replace("\\", "/").split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise ArgumentError(f"output file {rel!r}: expected a relative path inside the output folder")
    return parts


class OutputDir:
    """A staged set of files for one output folder (see the module's text)."""

    def __init__(self, root, force=False, what="output folder"):
        if not isinstance(root, (str, os.PathLike)):
            raise ArgumentError(f"{what}: expected a directory path, got {type(root).__name__}")
        self.root = os.path.abspath(os.fspath(root))
        self._shown = os.fspath(root)      # paths handed back as the caller spelled the folder
        self.force = bool(force)
        self.what = what
        self._staged = {}        # rel -> temporary file (absolute path)
        self._hashes = {}        # rel -> sha256 of the staged content
        self._made = []          # folders created by this run (absolute), in creation order
        self._conflicts = []     # (rel, why)
        self._state = "open"
        if os.path.lexists(self.root) and not os.path.isdir(self.root):
            raise ArgumentError(f"{what} {root}: exists and is not a directory")
        if not os.path.isdir(self.root):
            self._mkdirs(self.root)
        self._old_files, self._old_dirs = self._read_manifest()

    # -- the previous manifest ---------------------------------------------------------------

    def _read_manifest(self):
        p = os.path.join(self.root, MANIFEST)
        if os.path.islink(p) or not os.path.isfile(p):
            return {}, []
        try:
            with open(p, encoding="utf-8") as f:
                m = json.load(f)
            files = {str(k): str(v) for k, v in m.get("files", {}).items()}
            dirs = [str(d) for d in m.get("dirs", [])]
        except (OSError, ValueError, AttributeError, TypeError):
            return {}, []     # unreadable: nothing counts as pyembed's, so nothing is replaced without force
        for rel in list(files) + dirs:
            try:
                _split(rel)
            except ArgumentError:
                return {}, []
        return files, dirs

    # -- staging -------------------------------------------------------------------------------

    def _mkdirs(self, path):
        missing = []
        p = path
        while not os.path.isdir(p):
            if os.path.lexists(p):
                raise ArgumentError(f"{self.what} {self.root}: {p} exists and is not a directory")
            missing.append(p)
            p = os.path.dirname(p)
        for d in reversed(missing):
            os.mkdir(d)
            self._made.append(d)

    def _parent(self, rel):
        """The folder of rel, created if needed; a link or a file on the way is refused."""
        if self._state != "open":
            raise ArgumentError(f"{self.what} {self.root}: already {self._state}")
        parts = _split(rel)
        d = self.root
        for i, comp in enumerate(parts[:-1]):
            d = os.path.join(d, comp)
            sub = "/".join(parts[:i + 1])
            if os.path.islink(d):
                raise ArgumentError(f"{self.what} {self.root}: {sub} is a symbolic link (to {os.readlink(d)}); "
                                    f"pyembed does not write through links: remove it or choose another folder")
            if os.path.lexists(d) and not os.path.isdir(d):
                raise ArgumentError(f"{self.what} {self.root}: {sub} exists and is not a directory")
            if not os.path.isdir(d):
                self._mkdirs(d)
        return d, parts[-1]

    def _check_target(self, rel, target):
        if not os.path.lexists(target):
            return
        if os.path.isdir(target) and not os.path.islink(target):
            raise ArgumentError(f"{self.what} {self.root}: {rel} is a directory; pyembed writes a file there")
        if os.path.islink(target):
            self._conflicts.append((rel, "a symbolic link"))
        elif rel == MANIFEST:
            return
        elif rel not in self._old_files:
            self._conflicts.append((rel, "not written by pyembed"))
        elif _sha256(target) != self._old_files[rel]:
            self._conflicts.append((rel, "changed since pyembed wrote it"))

    def stage_path(self, rel):
        """A temporary file in rel's folder for a writer that takes a path
        (savefig, json.dump to a file): write it there, commit moves it to rel."""
        d, name = self._parent(rel)
        if rel in self._staged:
            _unlink(self._staged.pop(rel))
        else:
            self._check_target(rel, os.path.join(d, name))
        tmp = os.path.join(d, f"{_TMP}{secrets.token_hex(4)}-{name}")   # same suffix: savefig reads it
        self._staged[rel] = tmp
        self._hashes.pop(rel, None)
        return tmp

    def write_bytes(self, rel, data):
        tmp = self.stage_path(rel)
        with open(tmp, "xb") as f:
            f.write(data)
        self._hashes[rel] = hashlib.sha256(data).hexdigest()
        return self.path(rel)

    def write_text(self, rel, text):
        return self.write_bytes(rel, str(text).encode("utf-8"))

    def copy_file(self, rel, src):
        with open(src, "rb") as f:
            return self.write_bytes(rel, f.read())

    def path(self, rel):
        """Where rel will be once committed (a string, below the folder as given)."""
        return os.path.join(self._shown, *_split(rel))

    def _abs(self, rel):
        return os.path.join(self.root, *_split(rel))

    def sub(self, prefix):
        """A view writing below prefix in the same transaction."""
        return _SubDir(self, "/".join(_split(prefix)))

    # -- commit / abort --------------------------------------------------------------------------

    def _refusal(self):
        rels = [f"{rel} ({why})" for rel, why in self._conflicts]
        shown = ", ".join(rels[:8]) + (f" and {len(rels) - 8} more" if len(rels) > 8 else "")
        return ArgumentError(f"{self.what} {self.root}: refusing to overwrite {shown}; pyembed replaces only the "
                             f"files its manifest ({MANIFEST}) lists unchanged: move them away, choose another "
                             f"folder, or give --force")

    def commit(self):
        if self._state != "open":
            raise ArgumentError(f"{self.what} {self.root}: already {self._state}")
        if self._conflicts and not self.force:
            err = self._refusal()
            self.abort()
            raise err
        for rel, tmp in self._staged.items():
            if rel not in self._hashes:
                self._hashes[rel] = _sha256(tmp)
        # folders made inside the root (the root itself and folders above it are not the manifest's)
        made = {os.path.relpath(d, self.root).replace(os.sep, "/") for d in self._made
                if d != self.root and d.startswith(self.root + os.sep)}
        dirs = sorted({d for d in self._old_dirs if os.path.isdir(os.path.join(self.root, d))} | made)
        manifest = {"generator": "pyembed",
                    "note": "files pyembed wrote here (sha256); it replaces only these, and only unchanged",
                    "files": dict(sorted(self._hashes.items())), "dirs": dirs}
        mtmp = self.stage_path(MANIFEST)
        with open(mtmp, "x", encoding="utf-8") as f:
            json.dump(manifest, f, indent=1)
        self._hashes.pop(MANIFEST, None)
        if self._conflicts and not self.force:   # the manifest itself is a link or a user's file
            err = self._refusal()
            self.abort()
            raise err
        done = []                                # (target, backup or None)
        try:
            for rel, tmp in self._staged.items():
                target = self._abs(rel)
                backup = None
                if os.path.lexists(target):
                    backup = os.path.join(os.path.dirname(target),
                                          f"{_OLD}{secrets.token_hex(4)}-{os.path.basename(target)}")
                    os.rename(target, backup)
                done.append((target, backup))
                os.replace(tmp, target)
        except BaseException:
            for target, backup in reversed(done):
                with contextlib.suppress(OSError):
                    if backup is not None:
                        os.replace(backup, target)
                    else:
                        os.unlink(target)
            self.abort()
            raise
        self._state = "committed"
        for _, backup in done:
            if backup is not None:
                _unlink(backup)
        self._remove_stale(dirs)
        return self

    def _remove_stale(self, dirs):
        for rel, h in self._old_files.items():
            if rel in self._hashes or rel == MANIFEST:
                continue
            p = self._abs(rel)
            if os.path.isfile(p) and not os.path.islink(p) and not _linked_below(self.root, rel):
                with contextlib.suppress(OSError):
                    if _sha256(p) == h:
                        os.unlink(p)
        for rel in sorted(dirs, key=lambda d: -d.count("/")):
            p = self._abs(rel)
            if os.path.isdir(p) and not os.path.islink(p):
                with contextlib.suppress(OSError):
                    os.rmdir(p)         # only when empty
        kept = [d for d in dirs if os.path.isdir(self._abs(d))]
        if kept != dirs:
            self._rewrite_dirs(kept)

    def _rewrite_dirs(self, dirs):
        p = self._abs(MANIFEST)
        with contextlib.suppress(OSError, ValueError):
            with open(p, encoding="utf-8") as f:
                m = json.load(f)
            m["dirs"] = dirs
            tmp = f"{p}{_TMP}{secrets.token_hex(4)}"
            with open(tmp, "x", encoding="utf-8") as f:
                json.dump(m, f, indent=1)
            os.replace(tmp, p)

    def abort(self):
        """Drop everything staged; remove the folders this run created (empty ones)."""
        if self._state != "open":
            return
        self._state = "aborted"
        for tmp in self._staged.values():
            _unlink(tmp)
        self._staged.clear()
        for d in reversed(self._made):
            with contextlib.suppress(OSError):
                os.rmdir(d)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.commit()
        else:
            self.abort()
        return False


class _SubDir:
    """OutputDir.sub(prefix): the same transaction, paths below prefix."""

    def __init__(self, parent, prefix):
        self._parent = parent
        self._prefix = prefix
        self.root = parent.path(prefix)

    def _rel(self, rel):
        return f"{self._prefix}/{'/'.join(_split(rel))}"

    def stage_path(self, rel):
        return self._parent.stage_path(self._rel(rel))

    def write_bytes(self, rel, data):
        return self._parent.write_bytes(self._rel(rel), data)

    def write_text(self, rel, text):
        return self._parent.write_text(self._rel(rel), text)

    def copy_file(self, rel, src):
        return self._parent.copy_file(self._rel(rel), src)

    def path(self, rel):
        return self._parent.path(self._rel(rel))

    def sub(self, prefix):
        return _SubDir(self._parent, self._rel(prefix))


def _unlink(path):
    with contextlib.suppress(OSError):
        os.unlink(path)


def _linked_below(root, rel):
    d = root
    for comp in _split(rel)[:-1]:
        d = os.path.join(d, comp)
        if os.path.islink(d):
            return True
    return False


@contextlib.contextmanager
def staged(outdir, force=False, what="output folder"):
    """An OutputDir for outdir, committed when the block ends without an
    exception; when outdir already is one (or a view of one), that one is
    used and its owner commits."""
    if isinstance(outdir, (OutputDir, _SubDir)):
        yield outdir
        return
    out = OutputDir(outdir, force=force, what=what)
    with out:
        yield out


def copy_tree(out, rel_dir, src_dir, skip=()):
    """Stage a copy of every file below src_dir at rel_dir (file by file; no
    link is followed out of src_dir), but files named in skip."""
    for base, dirs, files in os.walk(src_dir):
        dirs.sort()
        for name in sorted(files):
            src = os.path.join(base, name)
            if os.path.islink(src) or name.startswith(".") or name.endswith((".o", ".pyc")) or name in skip:
                continue
            sub = os.path.relpath(src, src_dir).replace(os.sep, "/")
            out.copy_file(f"{rel_dir}/{sub}", src)



def refresh(root, rel):
    """Record in root's manifest the new content of rel, a file pyembed itself rewrote
    after the folder was committed (build_project's stack.ld and firmware.json), so
    that a later run still counts it as pyembed's. A file the manifest does not list
    stays unlisted."""
    p = os.path.join(os.path.abspath(os.fspath(root)), MANIFEST)
    if os.path.islink(p) or not os.path.isfile(p):
        return False
    try:
        with open(p, encoding="utf-8") as f:
            m = json.load(f)
    except (OSError, ValueError):
        return False
    files = m.get("files")
    key = "/".join(_split(rel))
    if not isinstance(files, dict) or key not in files:
        return False
    files[key] = _sha256(os.path.join(os.path.dirname(p), *key.split("/")))
    tmp = p + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(m, f, indent=1)
    os.replace(tmp, p)
    return True
