#!/usr/bin/env python3
"""Generates docs/api.md, the API reference, from the comments in proto/.

grpcio-tools' protoc (scripts/setup.sh installs it) compiles proto/ into a
descriptor set with its source info (the comments); this renders every
package's services, messages and enums as Markdown tables, in the order the
files declare them.

    python3 scripts/api_docs.py           rewrite docs/api.md
    python3 scripts/api_docs.py --check   exit 1 with a diff when docs/api.md is stale (CI)
"""

import difflib
import os
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
PROTO = os.path.join(ROOT, "proto")
OUTPUT = os.path.join(ROOT, "docs", "api.md")
# The client-facing API first, then what it builds on.
PACKAGES = ["parley.gateway.v1", "parley.parser.v1", "parley.runner.v1", "parley.tools.v1"]

# FileDescriptorProto / DescriptorProto field numbers, as source-info paths use them.
FILE_MESSAGE, FILE_ENUM, FILE_SERVICE = 4, 5, 6
MESSAGE_FIELD, MESSAGE_NESTED, MESSAGE_ENUM = 2, 3, 4
ENUM_VALUE, SERVICE_METHOD = 2, 2


def descriptor_set():
    """proto/ compiled by grpcio-tools' protoc, with comments."""
    import grpc_tools
    from google.protobuf import descriptor_pb2
    from grpc_tools import protoc

    well_known = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    files = sorted(
        os.path.relpath(os.path.join(dirpath, name), PROTO)
        for dirpath, _, names in os.walk(os.path.join(PROTO, "parley"))
        for name in names
        if name.endswith(".proto")
    )
    with tempfile.TemporaryDirectory() as out:
        path = os.path.join(out, "api.binpb")
        args = ["protoc", f"-I{PROTO}", f"-I{well_known}", "--include_source_info", f"--descriptor_set_out={path}"]
        if protoc.main(args + files) != 0:
            raise SystemExit("api_docs: protoc failed on proto/")
        with open(path, "rb") as file:
            return descriptor_pb2.FileDescriptorSet.FromString(file.read())


def cell(text):
    """A comment as one Markdown table cell (a list item starts a new line)."""
    lines = [line.strip() for line in text.strip().splitlines()]
    joined = " ".join(f"<br>{line}" if line.startswith("- ") else line for line in lines)
    return joined.replace("|", "\\|")


def paragraph(text):
    """A comment as Markdown paragraphs (its own line breaks kept)."""
    return "\n".join(line[1:] if line.startswith(" ") else line for line in text.strip("\n").splitlines()).strip()


def link(type_name):
    """A field's type: a link for Parley's own types, the name otherwise."""
    name = type_name.lstrip(".")
    if name.startswith("parley."):
        return f"[`{short(name)}`](#{name})"
    return f"`{name}`"


def short(full_name):
    """`parley.gateway.v1.ChatEvent.Foo` -> `ChatEvent.Foo`: the name within its package."""
    for package in PACKAGES:
        if full_name.startswith(package + "."):
            return full_name[len(package) + 1 :]
    return full_name


class Renderer:
    def __init__(self, file):
        self.file = file
        self.comments = {
            tuple(location.path): location.leading_comments for location in file.source_code_info.location
        }
        self.maps = {}  # full name of a map entry message -> (key type, value type)
        self.lines = []

    def comment(self, path):
        return self.comments.get(tuple(path), "")

    def out(self, *lines):
        self.lines.extend(lines)

    def scalar(self, field):
        from google.protobuf import descriptor_pb2

        if field.type_name:
            full = field.type_name.lstrip(".")
            if full in self.maps:
                key, value = self.maps[full]
                return f"map<{key}, {value}>"
            return link(field.type_name)
        name = descriptor_pb2.FieldDescriptorProto.Type.Name(field.type)
        return f"`{name[len('TYPE_'):].lower()}`"

    def collect_maps(self, prefix, messages):
        for message in messages:
            full = f"{prefix}.{message.name}"
            if message.options.map_entry:
                key, value = message.field
                self.maps[full] = (self.scalar(key).strip("`"), self.scalar(value))
            self.collect_maps(full, message.nested_type)

    def render(self):
        package = self.file.package
        self.collect_maps(package, self.file.message_type)
        self.out(f"## {package}", "", f"`{self.file.name}`", "")
        for i, service in enumerate(self.file.service):
            self.service(f"{package}.{service.name}", service, [FILE_SERVICE, i])
        for i, message in enumerate(self.file.message_type):
            self.message(f"{package}.{message.name}", message, [FILE_MESSAGE, i])
        for i, enum in enumerate(self.file.enum_type):
            self.enum(f"{package}.{enum.name}", enum, [FILE_ENUM, i])
        return self.lines

    def heading(self, kind, full_name, path):
        self.out(f'<a id="{full_name}"></a>', "", f"### {kind} {short(full_name)}", "")
        text = paragraph(self.comment(path))
        if text:
            self.out(text, "")

    def service(self, full_name, service, path):
        self.heading("service", full_name, path)
        self.out("| method | request | response | description |", "|---|---|---|---|")
        for j, method in enumerate(service.method):
            request = ("stream " if method.client_streaming else "") + link(method.input_type)
            response = ("stream " if method.server_streaming else "") + link(method.output_type)
            text = cell(self.comment(path + [SERVICE_METHOD, j]))
            self.out(f"| `{method.name}` | {request} | {response} | {text} |")
        self.out("")

    def message(self, full_name, message, path):
        if message.options.map_entry:
            return
        self.heading("message", full_name, path)
        if message.field:
            self.out("| field | number | type | description |", "|---|---|---|---|")
            for j, field in enumerate(message.field):
                kind = self.scalar(field)
                if field.label == field.LABEL_REPEATED and not kind.startswith("map<"):
                    kind = f"repeated {kind}"
                elif field.proto3_optional:
                    kind = f"optional {kind}"
                elif field.HasField("oneof_index"):
                    kind = f"{kind} (oneof `{message.oneof_decl[field.oneof_index].name}`)"
                text = cell(self.comment(path + [MESSAGE_FIELD, j]))
                self.out(f"| `{field.name}` | {field.number} | {kind} | {text} |")
            self.out("")
        else:
            self.out("No fields.", "")
        for k, nested in enumerate(message.nested_type):
            self.message(f"{full_name}.{nested.name}", nested, path + [MESSAGE_NESTED, k])
        for k, enum in enumerate(message.enum_type):
            self.enum(f"{full_name}.{enum.name}", enum, path + [MESSAGE_ENUM, k])

    def enum(self, full_name, enum, path):
        self.heading("enum", full_name, path)
        self.out("| value | number | description |", "|---|---|---|")
        for j, value in enumerate(enum.value):
            self.out(f"| `{value.name}` | {value.number} | {cell(self.comment(path + [ENUM_VALUE, j]))} |")
        self.out("")


def render():
    files = descriptor_set().file
    lines = [
        "# Parley API reference",
        "",
        "<!-- Generated from the comments in proto/ by scripts/api_docs.py: do not edit.",
        "     Regenerate with `python3 scripts/api_docs.py`; CI checks it is current. -->",
        "",
        "Every service, message and enum of Parley's public contracts, package by",
        "package. Errors are gRPC status codes with `google.rpc` details: see",
        "[Errors](clients.md#errors) in clients.md. Stubs for any language come",
        "from `proto/` (see the [Python](clients.md#python-or-any-language) and",
        "[Go](clients.md#go) sections there).",
        "",
    ]
    for package in PACKAGES:
        lines.append(f"- [{package}](#{package.replace('.', '')})")
    lines.append("")
    for package in PACKAGES:
        for file in sorted((f for f in files if f.package == package), key=lambda f: f.name):
            lines += Renderer(file).render()
    unknown = sorted({f.package for f in files} - set(PACKAGES))
    if unknown:
        raise SystemExit(f"api_docs: add {', '.join(unknown)} to PACKAGES")
    return "\n".join(lines).rstrip("\n") + "\n"


def main():
    text = render()
    if sys.argv[1:] == ["--check"]:
        current = open(OUTPUT, encoding="utf-8").read() if os.path.exists(OUTPUT) else ""
        if current != text:
            diff = difflib.unified_diff(
                current.splitlines(keepends=True), text.splitlines(keepends=True), "docs/api.md", "generated"
            )
            sys.stdout.writelines(diff)
            raise SystemExit("api_docs: docs/api.md is stale: run python3 scripts/api_docs.py")
        return
    if sys.argv[1:]:
        raise SystemExit("usage: api_docs.py [--check]")
    with open(OUTPUT, "w", encoding="utf-8") as file:
        file.write(text)


if __name__ == "__main__":
    main()
