"""The Pinakes error hierarchy.

Every error a user can cause is a :class:`PinakesError` whose message is one sentence naming
the file, key or value involved, followed by what to do about it. Anything else escaping the
library is a bug.
"""

from __future__ import annotations

__all__ = [
    "BudgetExceededError",
    "ConfigError",
    "DocumentNotFoundError",
    "EmptyFolderError",
    "HookError",
    "IndexMissingError",
    "IndexWriteError",
    "LockError",
    "PinakesError",
    "PluginMissingError",
    "ProviderError",
    "ReaderError",
    "SidecarError",
    "TemplateError",
    "UnsafeFileError",
    "UriError",
]


class PinakesError(Exception):
    """Base class of every error Pinakes raises on purpose.

    Attributes:
        hint: an optional second sentence telling the user what to do.
    """

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} {self.hint}" if self.hint else self.message


class ConfigError(PinakesError):
    """``pinakes.toml`` is missing, unreadable, or holds an unknown key or a bad value."""


class SidecarError(PinakesError):
    """A ``.pnk.yaml`` sidecar cannot be parsed or holds an invalid value."""


class UnsafeFileError(PinakesError):
    """A file cannot be read safely: not a regular file, over its size limit, or leading outside the KB."""


class UriError(PinakesError):
    """A ``pnk://`` URI or document reference is malformed."""


class DocumentNotFoundError(PinakesError):
    """No document in the KB matches the given id, URI, path or name.

    Attributes:
        near: paths of documents whose names are close to the reference (a suggestion).
    """

    def __init__(
        self, message: str, hint: str | None = None, near: list[str] | None = None
    ) -> None:
        super().__init__(message, hint)
        self.near = near or []


class IndexMissingError(PinakesError):
    """The derived store does not exist yet (the KB was never synced)."""


class IndexWriteError(PinakesError):
    """The derived store cannot be written: its folder is read-only, or the disk is full.

    Reading it (search, show, status) still works; what was already indexed is unchanged.
    """


class EmptyFolderError(PinakesError):
    """A sync found no document in the folder while the shared index it would replace holds some.

    A machine that reads a team's index without its files (only ``pinakes.toml``) must never
    empty that index for every other reader; the sync stops and changes nothing.
    """


class LockError(PinakesError):
    """Another live process holds the sync lock."""


class PluginMissingError(PinakesError):
    """The configuration asks for a channel whose plugin is not installed."""


class TemplateError(PinakesError):
    """A KB template is unknown, malformed, or cannot be stamped or upgraded."""


class HookError(PinakesError):
    """Git hooks cannot be installed or removed (no git, not a repository, a hand-edited hook)."""


class BudgetExceededError(PinakesError):
    """A paid call would breach a ``[budget]`` window, or spending was not confirmed."""


class ProviderError(PinakesError):
    """The model provider refused or failed a paid call (the message never holds a key)."""


class ReaderError(PinakesError):
    """The bundled reader model (``pinakes_core/data/reader``) is missing or cannot be loaded."""
