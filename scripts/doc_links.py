#!/usr/bin/env python3
"""Checks the local links of README.md and docs/*.md: every Markdown link
`[text](path#anchor)` that is not a URL must name a file or directory that
exists (relative to the linking file), and when it has an anchor, the
target Markdown file (or the linking file itself, for `#anchor`) must have a
heading with that GitHub-style slug or an HTML anchor (`<a id="...">`).
Links and headings inside fenced code blocks and inline code are ignored. Prints each broken link with its file
and line and exits 1 when there is one.

    python3 scripts/doc_links.py            # README.md and docs/*.md
    python3 scripts/doc_links.py FILE...    # only these files
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")
HTML_ANCHOR = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")
EXTERNAL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")  # http:, https:, mailto:...


def prose_lines(path):
    """(line number, text) of the lines outside fenced code blocks."""
    fence = None
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        match = FENCE.match(line)
        if fence is None and match:
            fence = match.group(1)[0] * len(match.group(1))
            continue
        if fence is not None:
            if line.strip().startswith(fence) and set(line.strip()) <= set(fence[0]):
                fence = None
            continue
        yield number, line


def slug(text):
    """GitHub's anchor for a heading: lower-cased, markup and punctuation
    dropped (letters, digits, `-` and `_` kept), spaces become hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link keeps its text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = text.lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def anchors(path, cache={}):
    """The anchors of a Markdown file: its headings' slugs, duplicates
    numbered as GitHub numbers them (`name`, `name-1`, ...), and the ids of
    its HTML anchors (`<a id="...">`)."""
    if path not in cache:
        seen = {}
        found = set()
        for _, line in prose_lines(path):
            found.update(HTML_ANCHOR.findall(line))
            match = HEADING.match(line)
            if not match:
                continue
            base = slug(match.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
        cache[path] = found
    return cache[path]


def shown(path):
    """A path as printed: relative to the repository when inside it."""
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def check(path):
    problems = []
    for number, line in prose_lines(path):
        for target in LINK.findall(INLINE_CODE.sub("", line)):
            if not target or EXTERNAL.match(target):
                continue
            file_part, _, anchor = target.partition("#")
            destination = (path.parent / file_part).resolve() if file_part else path
            where = f"{shown(path)}:{number}"
            if not destination.exists():
                problems.append(f"{where}: {target}: no such file")
                continue
            if anchor and destination.suffix == ".md" and anchor not in anchors(destination):
                problems.append(f"{where}: {target}: no heading #{anchor} in {shown(destination)}")
    return problems


def main():
    files = [Path(arg).resolve() for arg in sys.argv[1:]] or [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    problems = [problem for path in files for problem in check(path)]
    for problem in problems:
        print(problem)
    links = sum(1 for path in files for _, line in prose_lines(path) for _ in LINK.findall(INLINE_CODE.sub("", line)))
    print(f"doc_links: {len(files)} files, {links} links, {len(problems)} broken", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
