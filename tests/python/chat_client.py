"""A Python application backend talking to Parley, as any app team would.

Generates stubs from proto/ (and the google.rpc error model of
crates/parley-proto/third_party) with grpcio-tools, then holds the
conversation of tests/clients/scenario.json with a running chat-gateway:
its turns, a ResumeTurn replay, and refused calls whose google.rpc details
it reads. It checks what a UI relies on (the first event names the
conversation, seqs run 1..n, text deltas carry no markers, the final
`complete` is typed and repeats the text, the conversation reads back) and
prints the transcript of tests/clients/README.md, the same one the Go client
of tests/clients/go prints.

A turn that calls a tool needing the user's approval, or a tool the app
runs, pauses (`expect_pause` below): the stream sends an `approval_request`
or `client_tool_call` per call, then a status with phase
TURN_PHASE_AWAITING_INPUT, and ends without `complete`. The client answers
every call with SubmitToolDecisions (the scenario's decisions) and reads
the continuation, whose seqs follow the pause's, to its `complete`.

Before the turns it uploads the scenario's files (UploadAttachment: the
metadata, then the bytes in chunks) and checks each stored Attachment (the
media type the gateway sniffed, the size, the SHA-256 of what was sent); a
turn that sends files checks that the scripted model received each of them
(its `echo = "attachments"` step names each file with its media type, size
and the start of its SHA-256), and one file is downloaded back and compared
by SHA-256.

Then a second conversation branches and comes back (`branches` below): two
turns, an EditMessage of the second (a sibling turn whose branch becomes
current, streamed like any turn), and a SwitchBranch back to the original,
after which GetConversation shows exactly what it showed before the edit
but for the turn's siblings ("1 of 2").

It also shows what a UI does with the events sent while the model writes
(`Turn` below): a `payload_partial` card is replaced by each newer revision
and removed when its data is unset; `suggested_values` / `suggested_actions`
may be shown before `complete` (the list so far, one more item as each
closes: each event replaces the one before); a `step_reset` discards everything the
step streamed (its text since the step's THINKING status, its cards and
lists). Their timing depends on how the model's text was split, so they are
left out of the transcript's event kinds and summed up on stderr, which the
transcripts do not compare.

    python3 tests/python/chat_client.py 127.0.0.1:50051 [SCENARIO.json]

Exits non-zero with a message on the first violated expectation.
"""

import hashlib
import importlib
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
SCENARIO = os.path.join(ROOT, "tests", "clients", "scenario.json")
TIMEOUT = 60


def generate_stubs(out_dir):
    """Runs grpcio-tools' protoc on proto/ and google/rpc into out_dir and makes it importable."""
    import grpc_tools
    from grpc_tools import protoc

    proto = os.path.join(ROOT, "proto")
    third_party = os.path.join(ROOT, "crates", "parley-proto", "third_party")
    well_known = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    files = []
    for root in (proto, third_party):
        for dirpath, _, names in os.walk(root):
            files += [os.path.join(dirpath, n) for n in names if n.endswith(".proto")]
    args = ["protoc", f"-I{proto}", f"-I{third_party}", f"-I{well_known}"]
    args += [f"--python_out={out_dir}", f"--grpc_python_out={out_dir}"]
    if protoc.main(args + sorted(files)) != 0:
        raise SystemExit("stub generation failed")
    sys.path.insert(0, out_dir)


def fail(message):
    raise SystemExit(f"python client: {message}")


def quoted(value):
    """Compact JSON, as the Go client's quoted() writes it."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# Events sent while the model writes; their number and place depend on how
# its text was split, so the transcript's event kinds leave them out.
STREAMING_ONLY = {"payload_partial", "suggested_values", "suggested_actions", "structured_partial", "step_reset"}


def kinds(events):
    """The kinds of events in order, a run of one kind once (streaming-only kinds left out)."""
    names = []
    for event in events:
        name = event.WhichOneof("event") or "none"
        if name in STREAMING_ONLY:
            continue
        if not names or names[-1] != name:
            names.append(name)
    return " ".join(names)


class Turn:
    """What one Chat call streamed, as a UI keeps it."""

    def __init__(self, events):
        from google.protobuf import json_format

        self.events = events
        self.conversation_id = ""
        self.turn_id = ""
        self.complete = None
        self.cards = {}  # a payload's offset -> (revision, its value so far, or None once taken down)
        self.early_values = []  # suggested values shown before `complete`
        self.partials = 0
        self.resets = []
        text, step_start, step_cards = "", 0, set()
        for event in events:
            kind = event.WhichOneof("event")
            if kind == "status":
                if event.status.turn_id:
                    self.conversation_id, self.turn_id = event.status.conversation_id, event.status.turn_id
                if event.status.phase == 2:  # TURN_PHASE_THINKING: a model call (step) starts
                    step_start, step_cards = len(text), set()
            elif kind == "text_delta":
                text += event.text_delta
            elif kind == "payload_partial":
                # Draw the card again with the newer value; unset data takes it down.
                partial = event.payload_partial
                value = json_format.MessageToDict(partial.data) if partial.HasField("data") else None
                if partial.offset not in self.cards:
                    step_cards.add(partial.offset)
                self.cards[partial.offset] = (partial.revision, value)
                self.partials += 1
            elif kind == "suggested_values":
                self.early_values = [value.label for value in event.suggested_values.values]
            elif kind == "step_reset":
                # The step runs again: forget what it streamed.
                text = text[:step_start]
                for offset in step_cards:
                    self.cards.pop(offset, None)
                step_cards = set()
                self.resets.append(event.step_reset.reason)
            elif kind == "complete":
                self.complete = event.complete
        self.text = text

    def streaming_summary(self):
        """What was shown while the model wrote: cards (revision, whole or taken down), early chips, resets."""
        cards = [
            f"card rev {revision} {'taken down' if value is None else 'shown'}"
            for revision, value in self.cards.values()
        ]
        return (
            f"{self.partials} payload_partial ({', '.join(cards) or 'no card'}), "
            f"{len(self.early_values)} early suggested values, {len(self.resets)} step_reset"
        )


def check_seqs(events, first, what):
    """The events' seqs run first, first + 1, ... without gaps."""
    seqs = [event.seq for event in events]
    if seqs != list(range(first, first + len(seqs))):
        fail(f"{what}: sequence numbers are not {first}..n: {seqs}")


def expect_pause(pb, number, pause, events):
    """Checks that a turn's stream paused as the scenario's `pause` says.

    No `complete`, the TURN_PHASE_AWAITING_INPUT status last, and before it
    one request per expected one, in order (its event kind, tool and
    arguments). Returns the decisions to submit (each the scenario's
    ToolDecision with its request's call id) and the transcript lines of the
    pause.
    """
    from google.protobuf import json_format, struct_pb2

    if any(event.WhichOneof("event") == "complete" for event in events):
        fail(f"turn {number}: the scenario expects a pause, the turn completed: {kinds(events)}")
    awaiting = pb.TurnPhase.Value("TURN_PHASE_AWAITING_INPUT")
    last = events[-1] if events else None
    if last is None or last.WhichOneof("event") != "status" or last.status.phase != awaiting:
        fail(f"turn {number}: the stream ended without complete and without an AWAITING_INPUT status last: {kinds(events)}")
    asked = [event for event in events if event.WhichOneof("event") in ("approval_request", "client_tool_call")]
    expected = pause["requests"]
    if len(asked) != len(expected):
        fail(f"turn {number}: the pause asks for {len(asked)} decisions, the scenario expects {len(expected)}")
    decisions, lines = [], [f"turn {number}: paused: events {kinds(events)}"]
    for event, expect in zip(asked, expected):
        kind = event.WhichOneof("event")
        request = getattr(event, kind)
        arguments = json_format.ParseDict(expect["arguments"], struct_pb2.Struct())
        if (kind, request.tool) != (expect["event"], expect["tool"]) or request.arguments != arguments:
            fail(
                f"turn {number}: the pause asks for {kind} {request.tool} "
                f"{quoted(json_format.MessageToDict(request.arguments))}, the scenario expects {quoted(expect)}"
            )
        if not request.call_id or not request.HasField("expires_at"):
            fail(f"turn {number}: {kind} {request.tool} has no call id or no expiry: {request}")
        decision = json_format.ParseDict(expect["decision"], pb.ToolDecision())
        decision.call_id = request.call_id
        answer = decision.WhichOneof("decision")
        if answer is None:
            fail(f"scenario: turn {number}: the decision on {request.tool} decides nothing")
        line = f"turn {number}: {kind} {request.tool}"
        if kind == "approval_request":
            line += f" {quoted(request.summary)}"
        lines.append(f"{line}, answered {answer}")
        decisions.append(decision)
    return decisions, lines


def chat(stub, pb, scenario, number, request, pause, call=None):
    """Sends one message and reads its turn to its complete.

    `call` begins the turn: `stub.Chat` unless given (`stub.EditMessage`,
    `stub.RegenerateTurn` stream the same events). Checks seqs 1..n, no
    marker streamed, a successful complete repeating the text. When the
    scenario expects the turn to pause (`pause`), checks the pause, submits
    the decisions and reads the continuation, whose seqs follow the pause's.
    Returns the whole turn and its transcript lines.
    """
    events = list((call or stub.Chat)(request, timeout=TIMEOUT))
    check_seqs(events, 1, f"turn {number}")
    if pause is None:
        lines = [f"turn {number}: events {kinds(events)}"]
    else:
        paused = Turn(events)
        decisions, lines = expect_pause(pb, number, pause, events)
        submission = pb.SubmitToolDecisionsRequest(
            conversation_id=paused.conversation_id, turn_id=paused.turn_id, decisions=decisions
        )
        continued = list(stub.SubmitToolDecisions(submission, timeout=TIMEOUT))
        check_seqs(continued, len(events) + 1, f"turn {number}'s continuation")
        lines.append(f"turn {number}: continued: events {kinds(continued)}")
        events += continued
    turn = Turn(events)
    if turn.complete is None:
        fail(f"turn {number}: no complete event: {kinds(events)}")
    for marker in scenario["markers_never_streamed"]:
        if marker in turn.text:
            fail(f"marker {marker} leaked into the streamed text: {turn.text!r}")
    if not turn.complete.success:
        fail(f"turn failed: {turn.complete.message!r}")
    if turn.complete.message != turn.text:
        fail("the final message differs from the streamed text")
    if pause is not None and turn.complete.turn_id != turn.turn_id:
        fail(f"turn {number}: the continuation completes turn {turn.complete.turn_id}, not {turn.turn_id}")
    return turn, lines


def read_fixture(base, name):
    """The bytes of a scenario file, relative to the scenario's directory."""
    with open(os.path.join(base, name), "rb") as file:
        return file.read()


def upload_messages(pb, first, data, chunk_bytes):
    """An upload's messages: `first` (the metadata), then the bytes in chunks of chunk_bytes."""
    chunks = [data[start : start + chunk_bytes] for start in range(0, len(data), chunk_bytes)]
    return [first] + [pb.UploadAttachmentRequest(chunk=chunk) for chunk in chunks], len(chunks)


def upload(stub, pb, base, uploads):
    """Uploads the scenario's files in chunks and checks what the gateway stored.

    Each Attachment must name the file, carry the media type the scenario
    expects (the gateway sniffs it from the bytes), the file's size and the
    SHA-256 of the bytes sent. Returns the Attachments by name, with the
    files' bytes.
    """
    from google.protobuf import json_format

    chunk_bytes = uploads["chunk_bytes"]
    if chunk_bytes < 1:
        fail(f"scenario: chunk_bytes {chunk_bytes}")
    files = {}
    for entry in uploads["files"]:
        data = read_fixture(base, entry["file"])
        metadata = json_format.ParseDict(entry["metadata"], pb.AttachmentMetadata())
        metadata.size_bytes = len(data)
        messages, chunks = upload_messages(pb, pb.UploadAttachmentRequest(metadata=metadata), data, chunk_bytes)
        attachment = stub.UploadAttachment(iter(messages), timeout=TIMEOUT)
        sent = (metadata.name, entry["expect"]["media_type"], len(data), hashlib.sha256(data).hexdigest())
        got = (attachment.name, attachment.media_type, attachment.size_bytes, attachment.sha256)
        if got != sent:
            fail(f"upload {metadata.name}: stored as {got}, sent {sent}")
        if not attachment.id.startswith("att_") or not attachment.HasField("created_at"):
            fail(f"upload {metadata.name}: no id or no creation time: {attachment}")
        files[metadata.name] = (attachment, data)
        print(f"upload {metadata.name}: {chunks} chunks, {attachment.media_type}, {attachment.size_bytes} bytes, sha256 as sent")
    return files


def model_file_line(attachment, data):
    """How the scripted model's `echo = "attachments"` names a file it received."""
    return f"{attachment.name} ({attachment.media_type}, {len(data)} bytes, sha256 {hashlib.sha256(data).hexdigest()[:12]})"


def check_received(number, text, names, files):
    """The scripted model echoed exactly these files, in order: the model got each, whole."""
    for name in names:
        if name not in files:
            fail(f"scenario: turn {number} expects the model to receive {name!r}, which is not uploaded")
    expected = [model_file_line(*files[name]) for name in names]
    received = [line for line in text.split("\n") if " bytes, sha256 " in line]
    if received != expected:
        fail(f"turn {number}: the model received {received}, the scenario expects {expected}")


def download(stub, pb, attachment, data):
    """Downloads an uploaded file: its metadata first, as stored, then bytes equal to the file's by SHA-256."""
    request = pb.DownloadAttachmentRequest(attachment_id=attachment.id)
    responses = list(stub.DownloadAttachment(request, timeout=TIMEOUT))
    if not responses or responses[0].WhichOneof("part") != "metadata":
        fail(f"download {attachment.name}: the first message is not the metadata")
    if responses[0].metadata != attachment:
        fail(f"download {attachment.name}: metadata {responses[0].metadata}, uploaded as {attachment}")
    if any(response.WhichOneof("part") != "chunk" for response in responses[1:]):
        fail(f"download {attachment.name}: metadata again after the first message")
    body = b"".join(response.chunk for response in responses[1:])
    digest = hashlib.sha256(body).hexdigest()
    if digest != attachment.sha256 or digest != hashlib.sha256(data).hexdigest():
        fail(f"download {attachment.name}: {len(body)} bytes, sha256 {digest}, uploaded {attachment.sha256}")
    print(f"download {attachment.name}: {attachment.media_type}, {len(body)} bytes, sha256 as uploaded")


def resume(stub, pb, original, after_seq):
    """Replays a turn after a seq with ResumeTurn; the events must be exactly the ones first sent after it."""
    request = pb.ResumeTurnRequest(
        conversation_id=original.conversation_id, turn_id=original.turn_id, after_seq=after_seq
    )
    replayed = list(stub.ResumeTurn(request, timeout=TIMEOUT))
    if after_seq >= len(original.events):
        fail(f"the scenario resumes after seq {after_seq}, but the turn has {len(original.events)} events")
    expected = original.events[after_seq:]
    if len(replayed) != len(expected):
        fail(f"ResumeTurn after seq {after_seq} sent {len(replayed)} events, the turn sent {len(expected)} after it")
    for again, first in zip(replayed, expected):
        if again != first:
            fail(f"ResumeTurn event seq {first.seq} differs:\n{again}\nfirst sent as:\n{first}")


def refuse(stub, pb, refusal, base, chunk_bytes):
    """Makes a call the gateway refuses; returns its grpc.RpcError.

    An UploadAttachment's `request` is its first message (the metadata),
    followed by the refusal's `file` in chunks.
    """
    import grpc
    from google.protobuf import json_format

    rpc, request = refusal["rpc"], refusal["request"]
    try:
        if rpc == "Chat":
            # A streaming call's status arrives with its first read.
            list(stub.Chat(json_format.ParseDict(request, pb.ChatRequest()), timeout=TIMEOUT))
        elif rpc == "GetConversation":
            stub.GetConversation(json_format.ParseDict(request, pb.GetConversationRequest()), timeout=TIMEOUT)
        elif rpc == "UploadAttachment":
            first = json_format.ParseDict(request, pb.UploadAttachmentRequest())
            data = read_fixture(base, refusal["file"])
            messages, _ = upload_messages(pb, first, data, chunk_bytes)
            stub.UploadAttachment(iter(messages), timeout=TIMEOUT)
        elif rpc == "DownloadAttachment":
            request = json_format.ParseDict(request, pb.DownloadAttachmentRequest())
            list(stub.DownloadAttachment(request, timeout=TIMEOUT))
        else:
            fail(f"scenario: no refusal of {rpc!r} is known to this client")
    except grpc.RpcError as error:
        return error
    fail(f"{rpc} was not refused")


def describe_refusal(rpc, error):
    """Reads the google.rpc.Status details of a refused call from the grpc-status-details-bin trailer."""
    status_pb2 = importlib.import_module("google.rpc.status_pb2")
    details_pb2 = importlib.import_module("google.rpc.error_details_pb2")

    line = f"refused {rpc}: {error.code().name}"
    reason, domain, violations = "", "", []
    trailer = dict(error.trailing_metadata() or ()).get("grpc-status-details-bin")
    if trailer is None:
        fail(f"{rpc}: the refusal carries no google.rpc.Status")
    for detail in status_pb2.Status.FromString(trailer).details:
        if detail.Is(details_pb2.ErrorInfo.DESCRIPTOR):
            info = details_pb2.ErrorInfo()
            detail.Unpack(info)
            reason, domain = info.reason, info.domain
            line += f", ErrorInfo {reason} {domain}"
        elif detail.Is(details_pb2.BadRequest.DESCRIPTOR):
            bad = details_pb2.BadRequest()
            detail.Unpack(bad)
            violations += [violation.field for violation in bad.field_violations]
            line += f", BadRequest {quoted(violations)}"
        elif detail.Is(details_pb2.RetryInfo.DESCRIPTOR):
            retry = details_pb2.RetryInfo()
            detail.Unpack(retry)
            delay = retry.retry_delay
            line += f", RetryInfo {delay.seconds * 1000 + delay.nanos // 1_000_000} ms"
        else:
            fail(f"{rpc}: unexpected error detail {detail.type_url}")
    return line, reason, domain, violations


def read_branch(stub, pb, conversation_id, turn_id=""):
    """GetConversation: the current branch (or the one through turn_id), one page; its messages and leaf."""
    page = stub.GetConversation(
        pb.GetConversationRequest(conversation_id=conversation_id, turn_id=turn_id), timeout=TIMEOUT
    )
    if page.next_page_token:
        fail(f"conversation {conversation_id}: a short branch takes more than one page")
    return list(page.messages), page.leaf_turn_id


def without_siblings(pb, messages):
    """The messages with their sibling fields cleared: what a branch shows but for the turns beside it."""
    stripped = []
    for message in messages:
        copy = pb.ConversationMessage()
        copy.CopyFrom(message)
        for field in ("sibling_turn_ids", "sibling_index", "sibling_count"):
            copy.ClearField(field)
        stripped.append(copy)
    return stripped


def branches(stub, pb, scenario):
    """A second conversation that branches and comes back.

    Two turns; then EditMessage replaces the message of `edit.turn`: a new
    turn, sibling of the original, whose branch is current (GetConversation
    shows the edited text, the turn "2 of 2", the turns before it as they
    were); then SwitchBranch back to the original turn: GetConversation
    shows the messages it showed before the edit, field for field, but for
    the turn's siblings ("1 of 2"). Prints the transcript lines.
    """
    plan = scenario["branches"]
    edit = plan["edit"]
    conversation_id, turns = "", []
    for number, message in enumerate(plan["messages"], start=1):
        request = pb.ChatRequest(conversation_id=conversation_id, message=message)
        request.page.page = plan["page"]
        turn, lines = chat(stub, pb, scenario, number, request, None)
        conversation_id = turn.conversation_id
        turns.append(turn)
        for line in lines:
            print(f"branches: {line}")
        print(f"branches: turn {number}: text {quoted(turn.text)}")
    if not 2 <= edit["turn"] <= len(turns):
        fail(f"scenario: branches edit turn {edit['turn']} of {len(turns)} (not the first: its parent is checked)")
    before, leaf = read_branch(stub, pb, conversation_id)
    expected = [text for turn, message in zip(turns, plan["messages"]) for text in (message, turn.text)]
    if [message.text for message in before] != expected or leaf != turns[-1].complete.turn_id:
        fail(f"branches: the conversation reads {[m.text for m in before]} ending at {leaf}, sent {expected}")

    index = 2 * (edit["turn"] - 1)  # the edited turn's user message
    original = turns[edit["turn"] - 1]
    request = pb.EditMessageRequest(
        conversation_id=conversation_id, turn_id=original.complete.turn_id, message=edit["message"]
    )
    edited, lines = chat(stub, pb, scenario, edit["turn"], request, None, call=stub.EditMessage)
    for line in lines:
        print(f"branches: edit {line}")
    print(f"branches: edit turn {edit['turn']}: text {quoted(edited.text)}")
    new_id = edited.complete.turn_id
    if edited.conversation_id != conversation_id or new_id in ("", original.complete.turn_id):
        fail(f"branches: the edit ran turn {new_id} of {edited.conversation_id}, not a new turn of {conversation_id}")
    if edited.text == original.text:
        fail(f"branches: the edited message got the original's answer {edited.text!r}")
    shown, leaf = read_branch(stub, pb, conversation_id)
    siblings = [original.complete.turn_id, new_id]
    if (
        leaf != new_id
        or shown[:index] != before[:index]
        or [m.text for m in shown[index:]] != [edit["message"], edited.text]
        or any(m.turn_id != new_id or list(m.sibling_turn_ids) != siblings for m in shown[index:])
        or (shown[index].sibling_index, shown[index].sibling_count) != (1, 2)
        or shown[index].parent_turn_id != before[index].parent_turn_id
    ):
        fail(f"branches: after the edit the current branch ends at {leaf} and reads {shown}")
    users = [m.text for m in shown if m.role == pb.MessageRole.Value("MESSAGE_ROLE_USER")]
    print(
        f"branches: edited turn {edit['turn']}: the branch shown has user messages {quoted(users)}, "
        f"turn {edit['turn']} is {shown[index].sibling_index + 1} of {shown[index].sibling_count}"
    )

    switched = stub.SwitchBranch(
        pb.SwitchBranchRequest(conversation_id=conversation_id, turn_id=original.complete.turn_id),
        timeout=TIMEOUT,
    )
    if switched.leaf_turn_id != turns[-1].complete.turn_id:
        fail(f"branches: SwitchBranch made {switched.leaf_turn_id} the leaf, not {turns[-1].complete.turn_id}")
    after, leaf = read_branch(stub, pb, conversation_id)
    if leaf != switched.leaf_turn_id or without_siblings(pb, after) != without_siblings(pb, before):
        fail(f"branches: switched back, the branch reads\n{after}\nbefore the edit it read\n{before}")
    if any(list(m.sibling_turn_ids) != siblings for m in after[index : index + 2]) or (
        after[index].sibling_index,
        after[index].sibling_count,
    ) != (0, 2):
        fail(f"branches: switched back, turn {edit['turn']} is not 1 of 2 beside the edit: {after[index]}")
    print(
        f"branches: switched back to turn {edit['turn']}: the branch shown is the one before the edit, "
        f"message for message; turn {edit['turn']} is {after[index].sibling_index + 1} of {after[index].sibling_count}"
    )


def main():
    if not 2 <= len(sys.argv) <= 3:
        raise SystemExit("usage: chat_client.py HOST:PORT [SCENARIO.json]")
    address = sys.argv[1]
    scenario_path = sys.argv[2] if len(sys.argv) > 2 else SCENARIO
    with open(scenario_path, encoding="utf-8") as file:
        scenario = json.load(file)
    base = os.path.dirname(os.path.abspath(scenario_path))
    with tempfile.TemporaryDirectory() as out_dir:
        generate_stubs(out_dir)
        import grpc
        from google.protobuf import json_format

        pb = importlib.import_module("parley.gateway.v1.gateway_pb2")
        rpc = importlib.import_module("parley.gateway.v1.gateway_pb2_grpc")
        with grpc.insecure_channel(address) as channel:
            stub = rpc.ChatGatewayStub(channel)
            uploads = scenario["uploads"]
            files = upload(stub, pb, base, uploads)
            turns, conversation_id = [], ""
            for number, step in enumerate(scenario["turns"], start=1):
                request = json_format.ParseDict(step["request"], pb.ChatRequest())
                request.conversation_id = conversation_id
                for name in step.get("attach", []):
                    if name not in files:
                        fail(f"scenario: turn {number} attaches {name!r}, which is not uploaded")
                    request.attachments.add(id=files[name][0].id)
                turn, lines = chat(stub, pb, scenario, number, request, step.get("pause"))
                if not turn.conversation_id:
                    fail(f"turn {number} did not say which conversation it is in")
                conversation_id = turn.conversation_id
                complete, expect = turn.complete, step["expect"]
                payload = complete.custom_payload.type
                if payload != expect["payload"]:
                    fail(f"turn {number}: payload {payload!r}, the scenario expects {expect['payload']!r}")
                if len(complete.suggested_values) != expect["suggested_values"]:
                    fail(
                        f"turn {number}: {len(complete.suggested_values)} suggested values, "
                        f"the scenario expects {expect['suggested_values']}"
                    )
                received = expect.get("model_received")
                if received is not None:
                    check_received(number, turn.text, received, files)
                labels = [value.label for value in complete.suggested_values]
                actions = [action.action for action in complete.suggested_actions]
                for line in lines:
                    print(line)
                print(f"turn {number}: text {quoted(turn.text)}")
                print(f"turn {number}: payload {quoted(payload)}, suggested values {quoted(labels)}, actions {quoted(actions)}")
                if received is not None:
                    print(f"turn {number}: the model received {quoted(received)}: name, type, size, sha256")
                turns.append(turn)

            which, after_seq = scenario["resume"]["turn"], scenario["resume"]["after_seq"]
            if not 1 <= which <= len(turns):
                fail(f"scenario: resume names turn {which} of {len(turns)}")
            resume(stub, pb, turns[which - 1], after_seq)
            print(f"resume turn {which} after seq {after_seq}: the same events through its complete")

            if uploads["download"] not in files:
                fail(f"scenario: download {uploads['download']!r} is not uploaded")
            download(stub, pb, *files[uploads["download"]])

            # The conversation comes a page of turns at a time, the newest page first;
            # a client that needs all of it follows next_page_token (one turn a page
            # here, so the scenario follows several).
            stored, token = [], ""
            while True:
                page = stub.GetConversation(
                    pb.GetConversationRequest(conversation_id=conversation_id, page_size=1, page_token=token),
                    timeout=TIMEOUT,
                )
                stored = list(page.messages) + stored
                token = page.next_page_token
                if not token:
                    break
            roles = [pb.MessageRole.Name(message.role) for message in stored]
            if roles != ["MESSAGE_ROLE_USER", "MESSAGE_ROLE_ASSISTANT"] * len(turns):
                fail(f"the conversation reads back as {roles}")
            print(f"conversation: {' '.join(roles)}")
            # Each user message lists the files sent with it, as they were uploaded.
            for number, step in enumerate(scenario["turns"], start=1):
                listed = list(stored[2 * (number - 1)].attachments)
                sent = [files[name][0] for name in step.get("attach", [])]
                if listed != sent:
                    fail(f"turn {number}: the user message lists attachments {listed}, the turn sent {sent}")
                if sent:
                    described = ", ".join(f"{file.name} {file.media_type}" for file in listed)
                    print(f"conversation: turn {number}'s message lists {described}")

            for refusal in scenario["refusals"]:
                error = refuse(stub, pb, refusal, base, uploads["chunk_bytes"])
                line, reason, domain, violations = describe_refusal(refusal["rpc"], error)
                expect = refusal["expect"]
                if (error.code().name, reason, domain, violations) != (
                    expect["code"],
                    expect["reason"],
                    expect["domain"],
                    expect["field_violations"],
                ):
                    fail(f"{refusal['rpc']}: {line} ({error.details()!r}), the scenario expects {expect}")
                print(line)

            branches(stub, pb, scenario)

            # Not part of the transcript (stdout), which the Go client must match.
            for number, turn in enumerate(turns, start=1):
                print(f"python client: turn {number} while streaming: {turn.streaming_summary()}", file=sys.stderr)
            print(
                f"python client: conversation {conversation_id}: {len(turns)} turns, "
                f"{sum(1 for step in scenario['turns'] if 'pause' in step)} paused, "
                f"payload {turns[0].complete.custom_payload.type}, "
                f"{len(turns[-1].complete.suggested_values)} suggested values, "
                f"{len(files)} files uploaded"
            )


if __name__ == "__main__":
    main()
