"""The fenced code blocks of README.md and docs/, for the tests that run them.

A block is run unless the line just above its opening fence is the marker ``<!-- test: skip (why) -->``
(docs/development.md documents it).  ``python`` blocks are library code, ``sh`` blocks shell commands,
``yaml`` blocks grid files; other languages, and blocks without one, are output and never run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKIP = re.compile(r"^<!--\s*test:\s*skip\b(?P<why>.*?)-->\s*$")
FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[\w-]*)\s*$")
RUN_LANGS = {"python": "python", "sh": "sh", "bash": "sh", "shell": "sh", "yaml": "yaml"}


@dataclass(frozen=True)
class Block:
    page: str  # relative to the repository root
    line: int  # of the first code line, counted from 1
    lang: str  # python, sh, yaml, or "" (output, not run)
    code: str
    skip: str | None  # why it must not run, None when it runs

    def __str__(self):
        return f"{self.page}:{self.line}"


def pages() -> list[Path]:
    """README.md and every page under docs/, in a stable order."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def blocks(path: Path) -> list[Block]:
    """The fenced blocks of one page, in order, with their language and skip marker."""
    lines = path.read_text().splitlines()
    found, i = [], 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent = opening["indent"]
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == "```"), None)
        if end is None:
            raise AssertionError(f"{path.relative_to(ROOT)}:{i + 1}: a fence that is never closed")
        marker = SKIP.match(lines[i - 1].strip()) if i else None
        code = "\n".join(line[len(indent):] if line.startswith(indent) else line for line in lines[i + 1:end])
        found.append(Block(str(path.relative_to(ROOT)), i + 2, RUN_LANGS.get(opening["lang"], ""), code + "\n",
                           marker["why"].strip() if marker else None))
        i = end + 1
    return found


def all_blocks() -> list[Block]:
    return [b for page in pages() for b in blocks(page)]


def shell_commands(block: Block) -> list[str]:
    """The block's command lines, comments and blank lines left out."""
    commands = []
    for line in block.code.splitlines():
        line = re.sub(r"(^|\s)#.*$", "", line).strip()
        if line:
            commands.append(line)
    return commands
