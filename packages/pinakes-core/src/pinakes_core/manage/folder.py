"""The KB folder: finding the root that holds ``pinakes.toml``, and making a folder a KB.

``pnk init`` (:meth:`~pinakes_core.kb.KB.init`) writes ``pinakes.toml`` and adds ``.pinakes/``
to ``.gitignore``; every other command finds the KB by walking up from where it was started
(:func:`find_root`), as git finds its repository.
"""

from __future__ import annotations

from pathlib import Path

from pinakes_core.config import (
    CONFIG_FILE,
    Config,
    SidecarPolicy,
    default_kb_name,
    load_config,
    render_config,
)
from pinakes_core.derived import STORE_DIR
from pinakes_core.errors import ConfigError, UnsafeFileError
from pinakes_core.intake import MAX_GITIGNORE_BYTES, read_limited

__all__ = ["find_root", "make_kb_folder"]


def find_root(start: Path) -> Path:
    """Return the nearest folder at or above ``start`` that holds ``pinakes.toml``.

    Raises:
        ConfigError: if there is none.
    """
    start = start.resolve()
    for folder in (start, *start.parents):
        if (folder / CONFIG_FILE).is_file():
            return folder
    raise ConfigError(
        f"No {CONFIG_FILE} in {start} or any folder above it.", f"Run `pnk init {start}` first."
    )


def _read_gitignore(root: Path) -> str:
    """The text of ``root/.gitignore`` (``""`` if there is none), read within limits.

    Raises:
        ConfigError: if it is not a UTF-8 text file init can add a line to (a folder, a FIFO,
            a device, too big, UTF-16): naming the file, before anything was written.
    """
    path = root / ".gitignore"
    try:
        return read_limited(path, limit=MAX_GITIGNORE_BYTES).decode("utf-8")
    except FileNotFoundError:
        return ""
    except UnsafeFileError as exc:
        reason = exc.message
    except UnicodeDecodeError:
        reason = f"{path} is not UTF-8 text."
    except OSError as exc:
        reason = f"{path} cannot be read ({exc.strerror or exc})."
    raise ConfigError(
        f"Pinakes adds '{STORE_DIR}/' to .gitignore, but {reason[0].lower()}{reason[1:]}",
        f"Fix or remove {path} (git reads it as UTF-8 text), then run the command again.",
    )


def make_kb_folder(
    path: Path, name: str | None = None, *, sidecars: SidecarPolicy | None = None
) -> tuple[Path, Config]:
    """Make ``path`` a KB: write ``pinakes.toml`` and add ``.pinakes/`` to ``.gitignore``.

    ``sidecars`` is written as ``[sidecars] write`` (``pnk init``: ``"when-needed"``);
    ``None`` writes no ``[sidecars]`` table, which means ``"always"``.

    Returns:
        The KB root (resolved) and its config as written.

    Raises:
        ConfigError: if ``path`` already holds a ``pinakes.toml``, the name is invalid or
            ``.gitignore`` cannot take a line (then nothing was written).
    """
    root = path.resolve()
    root.mkdir(parents=True, exist_ok=True)
    config_path = root / CONFIG_FILE
    if config_path.exists():
        raise ConfigError(
            f"{config_path} already exists.", "This folder is a KB already; run `pnk sync`."
        )
    name = name or default_kb_name(root)  # "My Notes (2024)" -> "My-Notes-2024"
    ignored = _read_gitignore(root)  # before anything is written: a refusal leaves no trace
    config_path.write_text(render_config(name, sidecars=sidecars), encoding="utf-8")
    try:
        config = load_config(root)
    except ConfigError:
        config_path.unlink()
        raise ConfigError(
            f"{name!r} is not a valid KB name.",
            "Use letters, digits, '.', '_' or '-', e.g. --name my-notes.",
        ) from None
    if not any(line.strip().rstrip("/") == STORE_DIR for line in ignored.splitlines()):
        nl = "\r\n" if "\r\n" in ignored else "\n"  # the file's own line ends
        sep = "" if not ignored or ignored.endswith(("\n", "\r")) else nl
        with (root / ".gitignore").open("a", encoding="utf-8", newline="") as handle:
            handle.write(f"{sep}{STORE_DIR}/{nl}")
    return root, config
