"""A Python application backend talking to Parley, as any app team would.

Generates stubs from proto/ with grpcio-tools, then holds a two-turn
conversation with a running chat-gateway and checks what a UI relies on:
the first event names the conversation, text deltas carry no markers, the
final `complete` is typed, and the conversation reads back with both turns.

    python3 tests/python/chat_client.py 127.0.0.1:50051

Exits non-zero with a message on the first violated expectation.
"""

import importlib
import os
import sys
import tempfile

MARKERS = ("SUGGESTED_VALUES", "SUGGESTED_ACTIONS", "SCHEMA_PROPOSAL", "DATA_PROPOSAL")


def generate_stubs(out_dir):
    """Runs grpcio-tools' protoc on proto/ into out_dir and makes it importable."""
    import grpc_tools
    from grpc_tools import protoc

    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "proto")
    well_known = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    files = []
    for dirpath, _, names in os.walk(root):
        files += [os.path.join(dirpath, n) for n in names if n.endswith(".proto")]
    args = ["protoc", f"-I{root}", f"-I{well_known}", f"--python_out={out_dir}", f"--grpc_python_out={out_dir}"]
    if protoc.main(args + sorted(files)) != 0:
        raise SystemExit("stub generation failed")
    sys.path.insert(0, out_dir)


def fail(message):
    raise SystemExit(f"python client: {message}")


def chat(stub, pb, conversation_id, message, page):
    """Sends one message; returns (conversation_id, text, complete)."""
    request = pb.ChatRequest(conversation_id=conversation_id, message=message, page=pb.PageContext(page=page))
    text, complete, seqs = [], None, []
    for event in stub.Chat(request, timeout=60):
        seqs.append(event.seq)
        kind = event.WhichOneof("event")
        if kind == "status" and event.status.conversation_id:
            conversation_id = event.status.conversation_id
        elif kind == "text_delta":
            text.append(event.text_delta)
        elif kind == "complete":
            complete = event.complete
    if seqs != list(range(1, len(seqs) + 1)):
        fail(f"sequence numbers are not 1..n: {seqs}")
    if complete is None:
        fail("no complete event")
    streamed = "".join(text)
    for marker in MARKERS:
        if marker in streamed:
            fail(f"marker {marker} leaked into the streamed text: {streamed!r}")
    if not complete.success:
        fail(f"turn failed: {complete.message!r}")
    return conversation_id, streamed, complete


def main():
    address = sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:50051"
    with tempfile.TemporaryDirectory() as out_dir:
        generate_stubs(out_dir)
        import grpc

        pb = importlib.import_module("parley.gateway.v1.gateway_pb2")
        rpc = importlib.import_module("parley.gateway.v1.gateway_pb2_grpc")
        with grpc.insecure_channel(address) as channel:
            stub = rpc.ChatGatewayStub(channel)
            first = sys.argv[2] if len(sys.argv) > 2 else "Help me create a job tracker for my applications"
            second = sys.argv[3] if len(sys.argv) > 3 else "I accepted the table. What now?"
            conversation_id, text1, complete1 = chat(stub, pb, "", first, "tables_list")
            if not conversation_id:
                fail("the first turn did not say which conversation it created")
            _, text2, complete2 = chat(stub, pb, conversation_id, second, "tables_list")
            if complete1.message != text1 or complete2.message != text2:
                fail("the final message differs from the streamed text")
            stored = stub.GetConversation(pb.GetConversationRequest(conversation_id=conversation_id), timeout=10)
            roles = [m.role for m in stored.messages]
            if roles.count(pb.MESSAGE_ROLE_USER) != 2 or roles.count(pb.MESSAGE_ROLE_ASSISTANT) != 2:
                fail(f"expected two user and two assistant messages, got roles {roles}")
            payload = complete1.custom_payload.type if complete1.HasField("custom_payload") else "none"
            print(
                f"python client: conversation {conversation_id}: 2 turns, "
                f"payload {payload}, {len(complete2.suggested_values)} suggested values"
            )


if __name__ == "__main__":
    main()
