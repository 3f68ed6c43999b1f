#!/usr/bin/env python3
"""Finds import circles between the modules of each library crate.

A module is one file of a crate's `src/` (`src/a.rs` or `src/a/mod.rs` is
`crate::a`, `src/a/b.rs` is `crate::a::b`). Module A depends on module B
when A names a path into B: `use crate::…`, `use super::…`, `use self::…`,
or such a path written inline (`crate::store::Store::open`). A module's
dependencies on its own ancestors and descendants do not count: a parent
declares its children and a child may use what its parent defines; a
circle is two sibling modules (or subtrees: a dependency of a module
counts for each of its ancestors below the two modules' common one) that
reach each other, directly or through others. Test modules (`tests.rs`, and
`#[cfg(test)]` blocks) are left out: they may reach anywhere.

    python3 scripts/import_cycles.py           # every crate; exit 1 on a circle
    python3 scripts/import_cycles.py --verbose # and the edges of each circle

Run by `.ci/run`.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def crates() -> list[Path]:
    """The `src/` of every package with a `lib.rs`."""
    found = []
    for manifest in sorted(ROOT.glob("**/Cargo.toml")):
        if "target" in manifest.parts or manifest.parent == ROOT:
            continue
        src = manifest.parent / "src"
        if (src / "lib.rs").is_file():
            found.append(src)
    return found


def module_of(src: Path, file: Path) -> tuple[str, ...] | None:
    """The module path of `file`, `()` for the crate root; `None` for files
    that are not modules of the library (binaries, tests)."""
    rel = file.relative_to(src)
    parts = list(rel.parts)
    if parts[0] == "bin" or parts == ["main.rs"]:
        return None
    if parts[-1] in ("tests.rs",):
        return None
    if parts == ["lib.rs"]:
        return ()
    last = parts[-1][: -len(".rs")]
    if last == "mod":
        return tuple(parts[:-1])
    return tuple(parts[:-1] + [last])


def lex(text: str) -> str:
    """The code without comments, string and character literals."""
    out = []
    pos = 0
    size = len(text)
    while pos < size:
        char = text[pos]
        nxt = text[pos + 1] if pos + 1 < size else ""
        if char == "/" and nxt == "/":
            end = text.find("\n", pos)
            pos = size if end < 0 else end
        elif char == "/" and nxt == "*":
            depth, pos = 1, pos + 2
            while pos < size and depth:
                if text.startswith("/*", pos):
                    depth, pos = depth + 1, pos + 2
                elif text.startswith("*/", pos):
                    depth, pos = depth - 1, pos + 2
                else:
                    pos += 1
        elif char == "r" and re.match(r'r#*"', text[pos:]) and not re.match(r"[A-Za-z0-9_]", text[pos - 1] if pos else " "):
            hashes = re.match(r'r(#*)"', text[pos:]).group(1)
            end = text.find('"' + hashes, pos + len(hashes) + 2)
            out.append('""')
            pos = size if end < 0 else end + 1 + len(hashes)
        elif char == '"':
            pos += 1
            while pos < size and text[pos] != '"':
                pos += 2 if text[pos] == "\\" else 1
            out.append('""')
            pos += 1
        elif char == "'" and re.match(r"'(\\.[^']*|[^\\'])'", text[pos:]):
            # A character literal (a lifetime has no closing quote).
            pos += re.match(r"'(\\.[^']*|[^\\'])'", text[pos:]).end()
            out.append("' '")
        else:
            out.append(char)
            pos += 1
    return "".join(out)


def strip(text: str) -> str:
    """The code without comments, literals and `#[cfg(test)]` items (a
    `mod tests { … }` or a test function's body)."""
    text = lex(text)
    out = []
    index = 0
    for match in re.finditer(r"#\[cfg\(test\)\]", text):
        if match.start() < index:
            continue
        out.append(text[index : match.start()])
        # Skip the item: up to its `;` or its balanced braces.
        pos = match.end()
        depth = 0
        while pos < len(text):
            char = text[pos]
            if char == ";" and depth == 0:
                pos += 1
                break
            if char == "{":
                depth += 1
            elif char == "}":
                depth -= 1
                if depth == 0:
                    pos += 1
                    break
            pos += 1
        index = pos
    out.append(text[index:])
    return "".join(out)


def use_paths(tree: str, prefix: list[str]) -> list[list[str]]:
    """The paths of a `use` tree (`a::{b, c::{d, e}}`)."""
    tree = tree.strip()
    paths = []
    depth = 0
    # Split at top-level commas.
    items, start = [], 0
    for index, char in enumerate(tree):
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
        elif char == "," and depth == 0:
            items.append(tree[start:index])
            start = index + 1
    items.append(tree[start:])
    for item in items:
        item = item.strip()
        if not item:
            continue
        brace = item.find("{")
        if brace >= 0:
            head = [part for part in item[:brace].split("::") if part.strip()]
            inner = item[brace + 1 : item.rfind("}")]
            paths.extend(use_paths(inner, prefix + [p.strip() for p in head]))
        else:
            item = re.sub(r"\s+as\s+" + IDENT, "", item)
            paths.append(prefix + [part.strip() for part in item.split("::") if part.strip()])
    return paths


def references(code: str) -> list[list[str]]:
    """Every path starting with `crate`, `super` or `self` in `code`."""
    found = []
    for match in re.finditer(r"\buse\s+([^;]+);", code):
        found.extend(use_paths(match.group(1), []))
    inline = re.sub(r"\buse\s+[^;]+;", "", code)
    for match in re.finditer(r"\b(?:crate|super|self)(?:\s*::\s*" + IDENT + r")+", inline):
        found.append([part.strip() for part in match.group(0).split("::")])
    return [path for path in found if path and path[0] in ("crate", "super", "self")]


def resolve(path: list[str], here: tuple[str, ...], is_dir_module: bool, modules: set) -> tuple[str, ...] | None:
    """The module a path lands in: its longest prefix that is a module."""
    base: list[str]
    rest = list(path)
    if rest[0] == "crate":
        base = []
        rest = rest[1:]
    else:
        # `self` is the module itself, `super` its parent: a file's code
        # lives in its own module (here).
        base = list(here)
        while rest and rest[0] in ("self", "super"):
            if rest[0] == "super":
                if not base:
                    return None
                base.pop()
            rest = rest[1:]
    best = tuple(base)
    current = list(base)
    for part in rest:
        current.append(part)
        if tuple(current) in modules:
            best = tuple(current)
        else:
            break
    return best


def related(a: tuple, b: tuple) -> bool:
    """Whether one is the other's ancestor (or the same)."""
    short, long = (a, b) if len(a) <= len(b) else (b, a)
    return long[: len(short)] == short


def cycles(graph: dict) -> list[list]:
    """Strongly connected components with more than one module (Tarjan)."""
    index = {}
    low = {}
    stack = []
    on_stack = set()
    found = []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(node):
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def name(module: tuple) -> str:
    return "::".join(module) or "crate"


def main() -> int:
    verbose = "--verbose" in sys.argv
    total = 0
    for src in crates():
        files = {}
        for file in sorted(src.rglob("*.rs")):
            module = module_of(src, file)
            if module is not None:
                files[module] = file
        modules = set(files)
        graph: dict = {module: set() for module in modules}
        for module, file in files.items():
            code = strip(file.read_text(encoding="utf-8"))
            for path in references(code):
                target = resolve(path, module, file.name == "mod.rs", modules)
                if target is None or related(module, target):
                    continue
                graph[module].add(target)
        # Circles are found among the children of each module: child A
        # depends on its sibling B when anything in A's subtree names
        # anything in B's. So `tools::execute -> mcp` and
        # `mcp::session -> tools` make `tools <-> mcp` a circle.
        crate = src.parent.relative_to(ROOT)
        levels: dict = {}
        because: dict = {}
        for module, targets in graph.items():
            for target in targets:
                common = 0
                while module[common] == target[common]:
                    common += 1
                a, b = module[: common + 1], target[: common + 1]
                levels.setdefault(module[:common], {}).setdefault(a, set()).add(b)
                because.setdefault((a, b), []).append((module, target))
        for parent in sorted(levels):
            for component in cycles(levels[parent]):
                total += 1
                members = set(component)
                print(f"{crate}: import circle: {' <-> '.join(name(m) for m in component)}")
                if verbose:
                    for a in component:
                        for b in sorted(levels[parent][a] & members):
                            for module, target in because[(a, b)]:
                                print(f"    {name(module)} -> {name(target)}")
    if total:
        print(f"{total} import circle(s)", file=sys.stderr)
        return 1
    print("no import circles")
    return 0


if __name__ == "__main__":
    sys.exit(main())
