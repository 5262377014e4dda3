"""Local mode's bearer tokens: the ``--tokens`` file, the generated dev token, and the tokens file the API
reads (``<data dir>/tokens.json``, mode 0600)."""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

from jobsched.api.auth import TOKENS_FILE_SHAPE, TokenEntry, parse_tokens
from jobsched.local.paths import DEV_TOKEN_FILE, open_private

TOKENS_FILE = "tokens.json"
"""File name, in the data dir, of the tokens file the API reads."""
LOCAL_OWNER = "local"
"""The owner of the dev token and of the demo jobs."""


def load_tokens_file(path: Path) -> dict[str, TokenEntry]:
    """A ``--tokens`` file: a JSON object token -> owner, or token -> ``{"owner": ..., "shell": true}`` for an
    owner that may use shell targets (``jobsched.api.auth.parse_tokens``). Raises ValueError naming the problem."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ValueError(f"cannot read --tokens {path}: {error.strerror or error}") from error
    except ValueError as error:
        raise ValueError(f"--tokens {path} is not valid JSON: {error}") from error
    if not data:
        raise ValueError(f"--tokens {path} must be {TOKENS_FILE_SHAPE}")
    try:
        return parse_tokens(data)
    except ValueError as error:
        raise ValueError(f"--tokens {path}: {error}") from error


def _write_private(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` through a temp file of mode 0600 (one left over by an interrupted write
    is made 0600 too, never followed as a symlink)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.tmp")
    fd = open_private(temp, os.O_WRONLY | os.O_TRUNC)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text)
    os.replace(temp, path)


def prepare_tokens(data_dir: Path, tokens_file: Path | None) -> tuple[Path, str, bool]:
    """The tokens file the API reads, a token of owner ``local`` (for the demo jobs) and whether that token is
    the generated dev token (printed at start).

    Without ``tokens_file``: the dev token in ``<data dir>/dev-token`` (created once, kept across restarts)
    and ``<data dir>/tokens.json`` = ``{dev token: {"owner": "local", "shell": true}}``: the laptop's owner
    runs shell targets. With it: its tokens as given (shell targets only for owners with a token marked
    ``"shell": true``), plus (when no token maps to ``local``) an internal one of owner ``local`` with shell
    for registering the demo jobs, in ``<data dir>/tokens.json`` (mode 0600).
    """
    effective = data_dir / TOKENS_FILE
    if tokens_file is None:
        token_path = data_dir / DEV_TOKEN_FILE
        token = token_path.read_text().strip() if token_path.is_file() else ""
        if not token:
            token = "dev-" + secrets.token_urlsafe(24)
            _write_private(token_path, token + "\n")
        _write_private(effective, json.dumps({token: TokenEntry(LOCAL_OWNER, shell=True).as_json()}))
        return effective, token, True
    tokens = load_tokens_file(tokens_file)
    local = next((t for t, entry in tokens.items() if entry.owner == LOCAL_OWNER), None)
    if local is None:
        local = "internal-" + secrets.token_urlsafe(24)
        tokens[local] = TokenEntry(LOCAL_OWNER, shell=True)
    _write_private(effective, json.dumps({token: entry.as_json() for token, entry in tokens.items()}))
    return effective, local, False
