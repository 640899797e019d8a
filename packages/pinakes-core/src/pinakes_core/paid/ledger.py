"""The spending ledger ``.pinakes/ledger.jsonl`` (DESIGN §9, §13).

Every paid call leaves records here: a **reservation** (its worst-case cost, written before the
call), then a **reconciliation** (the actual cost from the provider's usage) or a **void** (the
provider refused it, nothing was charged). A reservation with neither is *open*: in flight while
its process lives, an **unknown outcome** once the process is gone (a crash, a kill, a timeout);
an open reservation counts at its reserved amount until ``pnk budget --resolve`` settles it.

The file is append-only. Each record is one JSON line written by one ``O_APPEND`` ``write`` of
at most :data:`MAX_RECORD_BYTES` bytes, so concurrent writers never interleave and a crash
leaves at worst one torn last line (skipped and reported on read). Records hold ids, times,
model names, token counts and money; never a question, a passage, an answer or a key.

The ledger is not kept in the KB's disposable ``.pinakes/`` (where ``rm -rf .pinakes`` would
reset the monthly cap) but in the user's state folder, one per KB id (:func:`ledger_dir`):
``$XDG_STATE_HOME/pinakes/ledgers/<kb id>/`` (``~/.local/state`` when ``XDG_STATE_HOME`` is
unset, empty or relative). That folder is the only place outside a KB that Pinakes writes to on
the paid path. A ledger an earlier version kept at ``.pinakes/ledger.jsonl`` is imported once
(:meth:`Ledger.for_kb`) and renamed ``ledger.jsonl.imported``.

Every file this module writes is opened here (:meth:`Ledger.append`, :meth:`Ledger.locked`,
:meth:`Ledger._import_legacy`), so a safer ``open`` needs changing in one place only.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import ROUND_CEILING, ROUND_HALF_EVEN, Decimal
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from pinakes_core.derived import UnsafeStoreError, store_dir
from pinakes_core.errors import PinakesError
from pinakes_core.index.lock import _alive

__all__ = [
    "LEDGER_FILE",
    "MAX_RECORD_BYTES",
    "QUANTUM",
    "STALE_AFTER",
    "CallState",
    "Clock",
    "Ledger",
    "Reconciliation",
    "Reservation",
    "Void",
    "ledger_dir",
    "money",
    "money_up",
    "state_dir",
    "utc_now",
]

log = logging.getLogger(__name__)

LEDGER_FILE = "ledger.jsonl"
LOCK_FILE = "ledger.lock"
_SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
#: One record is one ``write`` of at most this many bytes (POSIX appends up to a page are not
#: interleaved with other appenders on local file systems).
MAX_RECORD_BYTES = 4096
#: Money is kept to 1e-8 (a mocked gpt-4o-mini call costs ~1e-5 USD).
QUANTUM = Decimal("0.00000001")
#: An open reservation older than this is an unknown outcome even if its pid looks alive
#: (pids are reused; no call runs this long: ``[ask] timeout_s`` is at most an hour).
STALE_AFTER = timedelta(hours=1)

#: Returns the current time as an aware datetime (tests inject a fixed clock).
Clock = Callable[[], datetime]


def state_dir() -> Path:
    """Pinakes' folder in the user's state folder: ``$XDG_STATE_HOME/pinakes``.

    ``XDG_STATE_HOME`` that is unset, empty or not absolute counts as unset (the XDG base
    directory spec says to ignore a relative one); then the platform's user state folder is
    used (``~/.local/state`` on Linux).
    """
    base = os.environ.get("XDG_STATE_HOME", "").strip()
    if not base or not os.path.isabs(base):
        import platformdirs

        base = platformdirs.user_state_dir()
    return Path(base) / "pinakes"


def ledger_dir(kb_id: str) -> Path:
    """The folder holding the ledger of the KB whose ``[kb] id`` is ``kb_id``.

    The id is used as the folder name when it is a plain name (a ULID, a slug); any other id is
    hashed, so no id can name a path outside :func:`state_dir`.
    """
    name = kb_id if _SAFE_ID.match(kb_id) else hashlib.sha256(kb_id.encode()).hexdigest()[:32]
    return state_dir() / "ledgers" / name


def utc_now() -> datetime:
    """The current time in UTC (the default clock)."""
    return datetime.now(UTC)


def money(value: Decimal | str | int) -> Decimal:
    """Quantise an amount to :data:`QUANTUM`, half-even (actual costs)."""
    return Decimal(value).quantize(QUANTUM, rounding=ROUND_HALF_EVEN)


def money_up(value: Decimal | str | int) -> Decimal:
    """Quantise an amount to :data:`QUANTUM`, rounding up (reservations never under-count)."""
    return Decimal(value).quantize(QUANTUM, rounding=ROUND_CEILING)


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    v: Literal[1] = 1
    call: Annotated[str, Field(min_length=1, max_length=64)]
    ts: datetime


class Reservation(_Record):
    """The worst-case cost of one call, recorded before the call is made."""

    type: Literal["reservation"] = "reservation"
    op: Annotated[str, Field(min_length=1, max_length=64)]
    kind: Annotated[str, Field(max_length=32)]
    model: Annotated[str, Field(max_length=200)]
    input_tokens_max: int
    output_tokens_max: int
    usd: Decimal
    usd_per_eur: Decimal
    eur: Decimal
    pid: int
    host: Annotated[str, Field(max_length=255)]


class Reconciliation(_Record):
    """The actual cost of a reserved call (from the provider's usage, or resolved by hand)."""

    type: Literal["reconciliation"] = "reconciliation"
    usd: Decimal
    eur: Decimal
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    source: Literal["usage", "manual"] = "usage"


class Void(_Record):
    """A reserved call the provider refused before charging (the reason is an error class name)."""

    type: Literal["void"] = "void"
    reason: Annotated[str, Field(max_length=120)]


_ANY = TypeAdapter(Annotated[Reservation | Reconciliation | Void, Field(discriminator="type")])


@dataclass(frozen=True)
class CallState:
    """One call folded from its records."""

    reservation: Reservation
    status: Literal["open", "reconciled", "void"]
    actual_eur: Decimal | None = None

    @property
    def counted_eur(self) -> Decimal:
        """What the call counts against the windows: actual, nothing (void) or reserved (open)."""
        if self.status == "reconciled":
            assert self.actual_eur is not None
            return self.actual_eur
        return Decimal(0) if self.status == "void" else self.reservation.eur

    def unknown(self, now: datetime) -> bool:
        """Whether the call is open with no live process to settle it (an unknown outcome)."""
        if self.status != "open":
            return False
        res = self.reservation
        if now - res.ts > STALE_AFTER:
            return True
        return res.host == socket.gethostname() and not _alive(res.pid)


class Ledger:
    """Append-only records of paid calls in ``<folder>/ledger.jsonl``.

    A KB's ledger is :meth:`for_kb`; the constructor takes any folder (tests, tools).
    """

    def __init__(self, folder: Path) -> None:
        self.dir = folder
        self.path = folder / LEDGER_FILE
        self._lock_path = folder / LOCK_FILE

    @classmethod
    def for_kb(cls, root: Path, kb_id: str) -> Ledger:
        """The ledger of the KB at ``root`` with id ``kb_id``, in :func:`ledger_dir`.

        A ledger an earlier version kept in ``<root>/.pinakes/`` is imported first (once: its
        records are appended, then it is renamed ``ledger.jsonl.imported``).
        """
        ledger = cls(ledger_dir(kb_id))
        try:
            legacy = store_dir(root) / LEDGER_FILE
        except UnsafeStoreError:
            return ledger  # nothing is read from a .pinakes that fails the ownership rule
        if legacy.is_file() and not legacy.is_symlink():
            ledger._import_legacy(legacy)
        return ledger

    def _import_legacy(self, legacy: Path) -> None:
        with self.locked():
            if not legacy.is_file():
                return  # another process imported it while this one waited for the lock
            data = legacy.read_bytes()
            # A crash after the appends but before the rename must not double the records.
            known = {(r.call, r.type) for r in self.records()[0]}
            for line in data.splitlines():
                try:
                    record = _ANY.validate_python(json.loads(line))
                except (ValueError, ValidationError):
                    continue  # torn lines were never counted; they stay in the renamed file
                if (record.call, record.type) not in known:
                    self.append(record)
            os.replace(legacy, legacy.with_name(LEDGER_FILE + ".imported"))
        log.info("imported the ledger %s into %s", legacy, self.path)

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the ledger's exclusive ``flock`` (every reservation is made under it).

        The lock is advisory and released by the kernel when the process dies, so a crash
        never leaves it held.
        """
        import fcntl

        self.dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing the descriptor drops the lock

    def append(self, record: Reservation | Reconciliation | Void) -> None:
        """Write one record with a single ``O_APPEND`` write.

        Raises:
            PinakesError: if the record would exceed :data:`MAX_RECORD_BYTES` or the write was
                short (disk full); nothing partial is ever intended.
        """
        line = (record.model_dump_json() + "\n").encode("utf-8")
        if len(line) > MAX_RECORD_BYTES:
            raise PinakesError(
                f"A ledger record of {len(line)} bytes exceeds {MAX_RECORD_BYTES}; it was not written."
            )
        self.dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                line = b"\n" + line  # a torn last line must not swallow this record
            written = os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)
        if written != len(line):
            raise PinakesError(
                f"Only {written} of {len(line)} bytes of a ledger record reached {self.path}.",
                "Free disk space; `pnk doctor` reports the torn line.",
            )

    def records(self) -> tuple[list[Reservation | Reconciliation | Void], int]:
        """Return every well-formed record in file order and the number of malformed lines."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return [], 0
        records: list[Reservation | Reconciliation | Void] = []
        malformed = 0
        for line in raw.splitlines():
            if not line.strip():
                continue
            try:
                records.append(_ANY.validate_python(json.loads(line)))
            except (ValueError, ValidationError):
                malformed += 1
        if malformed:
            log.warning("%s: %d malformed line(s) skipped", self.path, malformed)
        return records, malformed

    def calls(
        self, records: list[Reservation | Reconciliation | Void] | None = None
    ) -> dict[str, CallState]:
        """Fold the records (default: the file's) into one state per call id.

        The first settlement of a call wins; a settlement of an unknown call is ignored.
        """
        states: dict[str, CallState] = {}
        if records is None:
            records, _ = self.records()
        for record in records:
            if isinstance(record, Reservation):
                states.setdefault(record.call, CallState(record, "open"))
                continue
            state = states.get(record.call)
            if state is None or state.status != "open":
                continue  # a settlement of an unknown or already settled call changes nothing
            if isinstance(record, Reconciliation):
                states[record.call] = CallState(state.reservation, "reconciled", record.eur)
            else:
                states[record.call] = CallState(state.reservation, "void")
        return states
