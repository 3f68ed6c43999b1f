#!/usr/bin/env python3
"""Keeps the commands shown in README.md and docs/*.md honest.

Every `sh` code block in them is preceded by a marker that says who runs it:

    <!-- run: .ci/run -->                  .ci/run runs each of its commands
    <!-- run: scripts/doc_commands.py -->  this script runs it (--run), against
                                           the demo stack (scripts/demo.sh)
    <!-- run: PATH -->                     the test at PATH reads this document
                                           and runs the block
    <!-- not run: WHY -->                  why no test can run it here (a
                                           cluster, a provider key, a collector)

    python3 scripts/doc_commands.py        check the markers (exit 1 on a
                                           block without one, or a marker that
                                           does not hold)
    python3 scripts/doc_commands.py --run  run the blocks marked for this
                                           script against the stack on
                                           127.0.0.1 (scripts/demo.sh --once
                                           does, while its stack is up)

With --run, each command runs as written through `sh` in a scratch
directory that holds a copy of `proto/`, with `CONVERSATION_ID` and
`TURN_ID` replaced by the conversation and turn of the last `Chat` it ran,
and `CALL_ID` by the last tool call that turn waits for (an
`approvalRequest` or `clientToolCall`);
a block followed by an unlabelled block (the output it prints) must print
exactly that output, and exit non-zero; any other command must succeed.
Run by `.ci/run` (the check) and `scripts/demo.sh --once` (--run).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SELF = "scripts/doc_commands.py"
MARKER = re.compile(r"<!--\s*(run|not run):\s*(.*?)\s*-->")
FENCE = re.compile(r"^```(\S*)\s*$")


@dataclass
class Block:
    """One fenced block of a document."""

    doc: str
    line: int
    lang: str
    text: str
    marker: tuple[str, str] | None
    output: str | None


def documents() -> list[Path]:
    return [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))


def blocks(path: Path) -> list[Block]:
    """The `sh` blocks of `path`, each with the marker before it and the
    unlabelled block right after it (what it prints), if any."""
    lines = path.read_text().splitlines()
    found: list[Block] = []
    fences: list[tuple[int, str, str]] = []  # (first line, lang, text)
    index = 0
    while index < len(lines):
        opened = FENCE.match(lines[index])
        if not opened:
            index += 1
            continue
        end = index + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        fences.append((index, opened.group(1), "\n".join(lines[index + 1 : end])))
        index = end + 1
    for position, (start, lang, text) in enumerate(fences):
        if lang != "sh":
            continue
        before = start - 1
        while before >= 0 and not lines[before].strip():
            before -= 1
        marker = MARKER.fullmatch(lines[before].strip()) if before >= 0 else None
        output = None
        if position + 1 < len(fences):
            next_start, next_lang, next_text = fences[position + 1]
            closing = start + text.count("\n") + 3
            if next_lang == "" and next_start == closing:
                output = next_text
        found.append(
            Block(
                doc=str(path.relative_to(ROOT)),
                line=start + 1,
                lang=lang,
                text=text,
                marker=(marker.group(1), marker.group(2)) if marker else None,
                output=output,
            )
        )
    return found


def commands(text: str) -> list[str]:
    """The commands of a block: continuation lines joined, comments and
    blank lines left out."""
    joined = re.sub(r"\\\n\s*", "", text)
    out = []
    for line in joined.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        # A trailing comment starts after two spaces and a '#'.
        out.append(re.sub(r"\s{2,}#.*$", "", stripped))
    return out


def check() -> int:
    problems = []
    ci = (ROOT / ".ci/run").read_text()
    counted = 0
    for path in documents():
        for block in blocks(path):
            counted += 1
            where = f"{block.doc}:{block.line}"
            if block.marker is None:
                problems.append(f"{where}: an sh block without <!-- run: ... --> or <!-- not run: ... -->")
                continue
            kind, what = block.marker
            if kind == "not run":
                if not what:
                    problems.append(f"{where}: 'not run' needs a reason")
                continue
            if what == ".ci/run":
                for command in commands(block.text):
                    program = command.split()[0]
                    if program not in ci:
                        problems.append(f"{where}: .ci/run does not run {program}")
            elif what != SELF:
                runner = ROOT / what
                if not runner.is_file():
                    problems.append(f"{where}: {what} does not exist")
                elif Path(block.doc).name not in runner.read_text():
                    problems.append(f"{where}: {what} does not read {block.doc}")
    for problem in problems:
        print(f"doc_commands: {problem}", file=sys.stderr)
    print(f"doc_commands: {counted} command blocks, {len(problems)} problems")
    return 1 if problems else 0


def ids_of(printed: str) -> dict[str, str]:
    """The ids in grpcurl's output of a `Chat` (a JSON object per event):
    `CONVERSATION_ID`, `TURN_ID` and, when the turn paused, `CALL_ID`; of an
    `UploadAttachment`, `ATTACHMENT_ID`."""
    decoder = json.JSONDecoder()
    position = 0
    found: dict[str, str] = {}
    while True:
        match = re.compile(r"\{").search(printed, position)
        if not match:
            return found
        try:
            event, position = decoder.raw_decode(printed, match.start())
        except json.JSONDecodeError:
            position = match.start() + 1
            continue
        for kind in ("status", "complete"):
            if event.get(kind, {}).get("conversationId"):
                found["CONVERSATION_ID"] = event[kind]["conversationId"]
            if event.get(kind, {}).get("turnId"):
                found["TURN_ID"] = event[kind]["turnId"]
        if str(event.get("id", "")).startswith("att_"):
            found["ATTACHMENT_ID"] = event["id"]
        for kind in ("approvalRequest", "clientToolCall"):
            if event.get(kind, {}).get("callId"):
                found["CALL_ID"] = event[kind]["callId"]


def run() -> int:
    with tempfile.TemporaryDirectory(prefix="parley-doc-commands.") as scratch:
        shutil.copytree(ROOT / "proto", Path(scratch) / "proto")
        return run_in(Path(scratch))


def run_in(scratch: Path) -> int:
    ids: dict[str, str] = {}
    ran = 0
    for path in documents():
        for block in blocks(path):
            if block.marker != ("run", SELF):
                continue
            for command in commands(block.text):
                for name in ("CONVERSATION_ID", "TURN_ID", "CALL_ID", "ATTACHMENT_ID"):
                    if name not in command:
                        continue
                    if name not in ids:
                        print(f"doc_commands: {block.doc}:{block.line}: no Chat before gave {name}: {command}", file=sys.stderr)
                        return 1
                    command = command.replace(name, ids[name])
                done = subprocess.run(
                    ["sh", "-c", re.sub(r"^grpcurl ", "grpcurl -max-time 60 ", command)],
                    capture_output=True,
                    text=True,
                    timeout=120,
                    cwd=scratch,
                )
                printed = done.stdout + done.stderr
                ran += 1
                where = f"{block.doc}:{block.line}"
                if block.output is not None:
                    expected = [line.rstrip() for line in block.output.strip().splitlines()]
                    got = [line.rstrip() for line in printed.strip().splitlines()]
                    if done.returncode == 0 or got != expected:
                        print(f"doc_commands: {where}: {command}\nexpected (exit non-zero):\n{block.output}\ngot (exit {done.returncode}):\n{printed}", file=sys.stderr)
                        return 1
                    continue
                if done.returncode != 0:
                    print(f"doc_commands: {where}: {command}\nexit {done.returncode}:\n{printed}", file=sys.stderr)
                    return 1
                if "ChatGateway/Chat" in command:
                    found = ids_of(done.stdout)
                    if "CALL_ID" not in found:
                        ids.pop("CALL_ID", None)
                    ids.update(found)
                if "ChatGateway/UploadAttachment" in command:
                    ids.update(ids_of(done.stdout))
    print(f"doc_commands: ran {ran} documented commands")
    return 0


if __name__ == "__main__":
    sys.exit(run() if sys.argv[1:] == ["--run"] else check())
