"""Parley's gateway through the web protocols, with clients that are not ours.

The official Connect client for Python (PyPI `connectrpc`, stubs generated
from proto/ by `protoc-gen-connectrpc` and `protoc-gen-py`) calls a running
chat-gateway over HTTP/1.1:

- with the Connect protocol and proto3 JSON: a two-turn conversation
  (Chat twice, the second in the conversation the first made), read back
  with GetConversation;
- a refused call: GetConversation of a conversation that does not exist is
  NOT_FOUND with a `google.rpc.ErrorInfo` detail whose reason is
  CONVERSATION_NOT_FOUND;
- a server stream cut by the client after a few events: the turn goes on
  on the gateway, and ResumeTurn reads it to its `complete`;
- with the Connect protocol and the binary codec, and with gRPC-Web: a
  turn each, to its `complete`, and the new conversation listed.

Connect requests go gzip-compressed (the client's default); gRPC-Web ones
uncompressed, as browsers send them.

    python3 tests/python/connect_client.py 127.0.0.1:50051

Prints one line per check; exits non-zero with a message on the first
violated expectation.
"""

import importlib
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
TIMEOUT_MS = 60_000


def fail(message):
    print(f"connect client: {message}", file=sys.stderr)
    sys.exit(1)


def generate_stubs(out_dir):
    """The messages (protoc-gen-py) and Connect clients (protoc-gen-connectrpc)
    of proto/ and of the google.rpc error details, as an app team makes them."""
    plugins = {}
    for plugin in ("protoc-gen-py", "protoc-gen-connectrpc"):
        path = shutil.which(plugin)
        if path is None:
            fail(f"{plugin} is not on PATH: run scripts/setup.sh")
        plugins[plugin] = path
    proto = os.path.join(ROOT, "proto")
    third_party = os.path.join(ROOT, "crates", "parley-proto", "third_party")
    files = [
        os.path.relpath(os.path.join(directory, name), proto)
        for directory, _, names in os.walk(os.path.join(proto, "parley"))
        for name in names
        if name.endswith(".proto")
    ]
    command = [
        sys.executable, "-m", "grpc_tools.protoc",
        f"-I{proto}", f"-I{third_party}",
        f"--plugin=protoc-gen-py={plugins['protoc-gen-py']}",
        f"--plugin=protoc-gen-connectrpc={plugins['protoc-gen-connectrpc']}",
        f"--py_out={out_dir}", f"--connectrpc_out={out_dir}",
        *files, "google/rpc/error_details.proto",
    ]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        fail(f"stub generation failed:\n{result.stderr}")
    sys.path.insert(0, out_dir)


def read_turn(events, what):
    """A turn's events to its end: (conversation id, turn id, text, complete)."""
    conversation_id = turn_id = None
    text = ""
    complete = None
    for event in events:
        kind = event.event.field if event.event else None
        value = event.event.value if event.event else None
        if kind == "status" and value.conversation_id and conversation_id is None:
            conversation_id, turn_id = value.conversation_id, value.turn_id
        elif kind == "text_delta":
            text += value
        elif kind == "error":
            fail(f"{what}: the turn failed: {value}")
        elif kind == "complete":
            complete = value
    if complete is None:
        fail(f"{what}: the stream ended without complete")
    if not text or complete.message != text:
        fail(f"{what}: complete.message does not repeat the streamed text ({text!r} vs {complete.message!r})")
    return conversation_id, turn_id, text, complete


def main():
    if len(sys.argv) != 2:
        fail("usage: connect_client.py HOST:PORT")
    url = f"http://{sys.argv[1]}"
    with tempfile.TemporaryDirectory() as out_dir:
        generate_stubs(out_dir)
        pb = importlib.import_module("parley.gateway.v1.gateway_pb")
        connect = importlib.import_module("parley.gateway.v1.gateway_connect")
        details = importlib.import_module("google.rpc.error_details_pb")
        from connectrpc.code import Code
        from connectrpc.codec import proto_binary_codec, proto_json_codec
        from connectrpc.errors import ConnectError
        from connectrpc.protocol import ProtocolType

        page = pb.PageContext(page="tables_list")
        json_client = connect.ChatGatewayClientSync(url, codec=proto_json_codec(), timeout_ms=TIMEOUT_MS)

        # A two-turn conversation in proto3 JSON.
        first = read_turn(
            json_client.chat(pb.ChatRequest(message="Help me create a job tracker", page=page)),
            "turn 1",
        )
        conversation_id = first[0]
        second = read_turn(
            json_client.chat(
                pb.ChatRequest(conversation_id=conversation_id, message="Add a salary column", page=page)
            ),
            "turn 2",
        )
        if second[0] != conversation_id:
            fail(f"turn 2 ran in {second[0]}, not {conversation_id}")
        stored = json_client.get_conversation(pb.GetConversationRequest(conversation_id=conversation_id))
        roles = [message.role for message in stored.messages]
        if len(stored.messages) != 4:
            fail(f"the conversation holds {len(stored.messages)} messages, not 4: {roles}")
        if stored.messages[3].text != second[2]:
            fail("the stored answer of turn 2 is not what streamed")
        print(f"connect json: 2 turns in {conversation_id}, {len(stored.messages)} messages stored")

        # A refused call and its google.rpc details.
        missing = "01a22000-0000-7000-8000-000000000000"
        try:
            json_client.get_conversation(pb.GetConversationRequest(conversation_id=missing))
            fail("GetConversation of a conversation that does not exist succeeded")
        except ConnectError as error:
            if error.code != Code.NOT_FOUND:
                fail(f"the refusal is {error.code}, not NOT_FOUND: {error.message}")
            infos = [d.value(details.ErrorInfo) for d in error.details if d.type_name == "google.rpc.ErrorInfo"]
            if not infos or infos[0].reason != "CONVERSATION_NOT_FOUND" or infos[0].domain != "parley.dev":
                fail(f"the refusal carries no ErrorInfo CONVERSATION_NOT_FOUND: {[d.type_name for d in error.details]}")
            print(f"connect json: refused NOT_FOUND, ErrorInfo {infos[0].reason} ({infos[0].domain})")

        # A server stream cut by the client: the turn goes on, ResumeTurn
        # reads it to its end.
        events = json_client.chat(
            pb.ChatRequest(conversation_id=conversation_id, message="Help me create a job tracker", page=page)
        )
        seen = []
        for event in events:
            seen.append(event)
            if len(seen) == 3:
                break
        events.close()
        turn_id = seen[0].event.value.turn_id
        resumed = read_turn(
            json_client.resume_turn(pb.ResumeTurnRequest(conversation_id=conversation_id, after_seq=0)),
            "resumed turn",
        )
        if resumed[1] not in (None, turn_id):
            fail(f"ResumeTurn followed turn {resumed[1]}, not the cut one {turn_id}")
        print(f"connect json: a stream cut after 3 events, the turn resumed to complete ({len(resumed[2])} chars)")

        # The binary codec, and gRPC-Web.
        for name, client in (
            ("connect proto", connect.ChatGatewayClientSync(url, codec=proto_binary_codec(), timeout_ms=TIMEOUT_MS)),
            # gRPC (and so gRPC-Web) messages are not compressed, as browsers
            # send them: the gateway's gRPC answers a gzip one UNIMPLEMENTED.
            (
                "grpc-web",
                connect.ChatGatewayClientSync(
                    url, protocol=ProtocolType.GRPC_WEB, send_compression=None, timeout_ms=TIMEOUT_MS
                ),
            ),
        ):
            turn = read_turn(client.chat(pb.ChatRequest(message="Help me create a job tracker", page=page)), name)
            listed = client.list_conversations(pb.ListConversationsRequest(page_size=50))
            if turn[0] not in [c.id for c in listed.conversations]:
                fail(f"{name}: the new conversation is not listed")
            print(f"{name}: a turn to complete ({len(turn[2])} chars), listed")


if __name__ == "__main__":
    main()
