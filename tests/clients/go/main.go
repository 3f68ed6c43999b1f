// Command parley-go-client is a Go application backend talking to Parley, as
// any app team would: stubs generated from proto/ by protoc-gen-go and
// protoc-gen-go-grpc (tests/clients/go/build.sh), one ChatGateway.Chat call
// per user message.
//
// It holds the conversation of tests/clients/scenario.json with a running
// chat-gateway, replays part of a turn with ResumeTurn, reads the
// google.rpc details of refused calls, and prints the transcript described
// in tests/clients/README.md (the Python client prints the same one).
//
// A turn that calls a tool needing the user's approval, or a tool the app
// runs, pauses (expectPause): the stream sends an approval_request or
// client_tool_call per call, then a status with phase
// TURN_PHASE_AWAITING_INPUT, and ends without complete. The client answers
// every call with SubmitToolDecisions (the scenario's decisions) and reads
// the continuation, whose seqs follow the pause's, to its complete.
//
// Before the turns it uploads the scenario's files (UploadAttachment: the
// metadata, then the bytes in chunks) and checks each stored Attachment
// (the media type the gateway sniffed, the size, the SHA-256 of what was
// sent); a turn that sends files checks that the scripted model received
// each of them (its `echo = "attachments"` step names each file with its
// media type, size and the start of its SHA-256), and one file is
// downloaded back and compared by SHA-256.
//
// Then a second conversation branches and comes back (branches): two turns,
// an EditMessage of the second (a sibling turn whose branch becomes current,
// streamed like any turn), and a SwitchBranch back to the original, after
// which GetConversation shows exactly what it showed before the edit but for
// the turn's siblings ("1 of 2").
//
//	parley-go-client 127.0.0.1:50051 tests/clients/scenario.json
//
// It exits non-zero with a message on the first violated expectation.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/code"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	gatewayv1 "parley/gen/parley/gateway/v1"
)

// callTimeout bounds every call (a turn of the scripted model takes well
// under a second).
const callTimeout = 60 * time.Second

// scenario is tests/clients/scenario.json.
type scenario struct {
	Markers []string `json:"markers_never_streamed"`
	Uploads uploads  `json:"uploads"`
	Turns   []struct {
		Request json.RawMessage `json:"request"`
		// Attach names the uploaded files the turn sends.
		Attach []string `json:"attach"`
		// Pause, when set: the turn pauses for these decisions.
		Pause  *pause `json:"pause"`
		Expect struct {
			Payload         string `json:"payload"`
			SuggestedValues int    `json:"suggested_values"`
			// ModelReceived, when set: the files the scripted model must
			// have received (its echo of them), in order.
			ModelReceived []string `json:"model_received"`
		} `json:"expect"`
	} `json:"turns"`
	Resume struct {
		Turn     int    `json:"turn"`
		AfterSeq uint64 `json:"after_seq"`
	} `json:"resume"`
	Branches branchPlan `json:"branches"`
	Refusals []struct {
		RPC     string          `json:"rpc"`
		Request json.RawMessage `json:"request"`
		// File is what a refused UploadAttachment sends after its request
		// (the metadata).
		File   string `json:"file"`
		Expect struct {
			Code            string   `json:"code"`
			Reason          string   `json:"reason"`
			Domain          string   `json:"domain"`
			FieldViolations []string `json:"field_violations"`
		} `json:"expect"`
	} `json:"refusals"`
}

// uploads are the files the scenario uploads before its turns.
type uploads struct {
	ChunkBytes int `json:"chunk_bytes"`
	Files      []struct {
		// File is relative to the scenario's directory.
		File     string          `json:"file"`
		Metadata json.RawMessage `json:"metadata"`
		Expect   struct {
			MediaType string `json:"media_type"`
		} `json:"expect"`
	} `json:"files"`
	// Download names the uploaded file read back with DownloadAttachment.
	Download string `json:"download"`
}

// branchPlan is the second conversation, which branches and comes back:
// one Chat per message on the page, then an EditMessage of one turn (not
// the first), then a SwitchBranch back to the original turn.
type branchPlan struct {
	Page     string   `json:"page"`
	Messages []string `json:"messages"`
	Edit     struct {
		// Turn is the edited turn's number, from 1.
		Turn    int    `json:"turn"`
		Message string `json:"message"`
	} `json:"edit"`
}

// uploaded is a file the gateway stored, with its bytes.
type uploaded struct {
	attachment *gatewayv1.Attachment
	data       []byte
}

// pause is what a turn that pauses asks for, and the answers: one request
// per call that waits, in the stream's order.
type pause struct {
	Requests []struct {
		// Event is the request's kind: approval_request or client_tool_call.
		Event     string          `json:"event"`
		Tool      string          `json:"tool"`
		Arguments json.RawMessage `json:"arguments"`
		// Decision is a ToolDecision (protobuf JSON mapping) without its
		// call id, which the client takes from the request.
		Decision json.RawMessage `json:"decision"`
	} `json:"requests"`
}

// turn is what one Chat call streamed (with its continuation, when it
// paused).
type turn struct {
	conversationID string
	turnID         string
	events         []*gatewayv1.ChatEvent
	text           string
	complete       *gatewayv1.TurnComplete
}

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "go client: "+format+"\n", args...)
	os.Exit(1)
}

// quoted is value as compact JSON, as Python's
// json.dumps(value, ensure_ascii=False, separators=(",", ":")) writes it
// (the two differ only on rare control characters and U+2028/U+2029).
func quoted(value interface{}) string {
	var out strings.Builder
	encoder := json.NewEncoder(&out)
	encoder.SetEscapeHTML(false)
	if err := encoder.Encode(value); err != nil {
		fail("cannot quote %v: %v", value, err)
	}
	return strings.TrimSuffix(out.String(), "\n")
}

// kind is the name of the event's oneof field, as in the proto
// (`text_delta`, `complete`...).
func kind(event *gatewayv1.ChatEvent) string {
	message := event.ProtoReflect()
	field := message.WhichOneof(message.Descriptor().Oneofs().ByName("event"))
	if field == nil {
		return "none"
	}
	return string(field.Name())
}

// streamingOnly are the events sent while the model writes; their number
// and place depend on how its text was split, so kinds leaves them out.
var streamingOnly = map[string]bool{
	"payload_partial":    true,
	"suggested_values":   true,
	"suggested_actions":  true,
	"structured_partial": true,
	"step_reset":         true,
}

// kinds lists the kinds of events in order, a run of one kind once
// (streaming-only kinds left out).
func kinds(events []*gatewayv1.ChatEvent) string {
	var names []string
	for _, event := range events {
		name := kind(event)
		if streamingOnly[name] {
			continue
		}
		if len(names) == 0 || names[len(names)-1] != name {
			names = append(names, name)
		}
	}
	return strings.Join(names, " ")
}

// eventStream is a stream of ChatEvents: Chat's, ResumeTurn's or
// SubmitToolDecisions'.
type eventStream interface {
	Recv() (*gatewayv1.ChatEvent, error)
}

// receive reads a turn's stream to its end.
func receive(stream eventStream) ([]*gatewayv1.ChatEvent, error) {
	var events []*gatewayv1.ChatEvent
	for {
		event, err := stream.Recv()
		if err == io.EOF {
			return events, nil
		}
		if err != nil {
			return events, err
		}
		events = append(events, event)
	}
}

// checkSeqs checks that the events' seqs run first, first + 1, ...
// without gaps.
func checkSeqs(events []*gatewayv1.ChatEvent, first uint64, what string) {
	for i, event := range events {
		if event.Seq != first+uint64(i) {
			fail("%s: event %d has seq %d: sequence numbers are not %d..n", what, i+1, event.Seq, first)
		}
	}
}

// expectPause checks that a turn's stream paused as the scenario's pause
// says: no complete, the TURN_PHASE_AWAITING_INPUT status last, and before
// it one request per expected one, in order (its event kind, tool and
// arguments). It returns the decisions to submit (each the scenario's
// ToolDecision with its request's call id) and the transcript lines of the
// pause.
func expectPause(number int, p *pause, events []*gatewayv1.ChatEvent) ([]*gatewayv1.ToolDecision, []string) {
	for _, event := range events {
		if event.GetComplete() != nil {
			fail("turn %d: the scenario expects a pause, the turn completed: %s", number, kinds(events))
		}
	}
	if len(events) == 0 || events[len(events)-1].GetStatus().GetPhase() != gatewayv1.TurnPhase_TURN_PHASE_AWAITING_INPUT {
		fail("turn %d: the stream ended without complete and without an AWAITING_INPUT status last: %s", number, kinds(events))
	}
	// A request: its kind, call id, tool, arguments and (approvals) summary.
	type asked struct {
		kind, callID, tool, summary string
		arguments                   *structpb.Struct
		expires                     bool
	}
	var requests []asked
	for _, event := range events {
		if request := event.GetApprovalRequest(); request != nil {
			requests = append(requests, asked{kind(event), request.CallId, request.Tool, request.Summary, request.Arguments, request.ExpiresAt != nil})
		} else if call := event.GetClientToolCall(); call != nil {
			requests = append(requests, asked{kind(event), call.CallId, call.Tool, "", call.Arguments, call.ExpiresAt != nil})
		}
	}
	if len(requests) != len(p.Requests) {
		fail("turn %d: the pause asks for %d decisions, the scenario expects %d", number, len(requests), len(p.Requests))
	}
	decisions := []*gatewayv1.ToolDecision{}
	lines := []string{fmt.Sprintf("turn %d: paused: events %s", number, kinds(events))}
	for i, request := range requests {
		expect := p.Requests[i]
		arguments := &structpb.Struct{}
		if err := protojson.Unmarshal(expect.Arguments, arguments); err != nil {
			fail("scenario: turn %d: arguments of %s: %v", number, expect.Tool, err)
		}
		if request.kind != expect.Event || request.tool != expect.Tool || !proto.Equal(request.arguments, arguments) {
			asked, _ := protojson.Marshal(request.arguments)
			fail("turn %d: the pause asks for %s %s %s, the scenario expects %s %s %s", number,
				request.kind, request.tool, asked, expect.Event, expect.Tool, expect.Arguments)
		}
		if request.callID == "" || !request.expires {
			fail("turn %d: %s %s has no call id or no expiry", number, request.kind, request.tool)
		}
		decision := &gatewayv1.ToolDecision{}
		if err := protojson.Unmarshal(expect.Decision, decision); err != nil {
			fail("scenario: turn %d: decision on %s: %v", number, expect.Tool, err)
		}
		decision.CallId = request.callID
		message := decision.ProtoReflect()
		answer := message.WhichOneof(message.Descriptor().Oneofs().ByName("decision"))
		if answer == nil {
			fail("scenario: turn %d: the decision on %s decides nothing", number, expect.Tool)
		}
		line := fmt.Sprintf("turn %d: %s %s", number, request.kind, request.tool)
		if request.kind == "approval_request" {
			line += " " + quoted(request.summary)
		}
		lines = append(lines, fmt.Sprintf("%s, answered %s", line, answer.Name()))
		decisions = append(decisions, decision)
	}
	return decisions, lines
}

// startTurn is the call that begins a turn: Chat, EditMessage or
// RegenerateTurn, which stream the same events.
type startTurn struct {
	name string
	call func(ctx context.Context) (eventStream, error)
}

// chatCall is a Chat of request.
func chatCall(client gatewayv1.ChatGatewayClient, request *gatewayv1.ChatRequest) startTurn {
	return startTurn{"Chat", func(ctx context.Context) (eventStream, error) {
		return client.Chat(ctx, request)
	}}
}

// chat sends one message (start), reads its turn to its complete and checks
// what a UI relies on: seqs 1..n, no marker in the streamed text, a
// successful complete that repeats it. When the scenario expects the turn to
// pause (p), it checks the pause, submits the decisions and reads the
// continuation, whose seqs follow the pause's. It returns the whole turn
// and its transcript lines.
func chat(client gatewayv1.ChatGatewayClient, s *scenario, number int, start startTurn, p *pause) (turn, []string) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	stream, err := start.call(ctx)
	if err != nil {
		fail("%s: %v", start.name, err)
	}
	events, err := receive(stream)
	if err != nil {
		fail("%s stream: %v", start.name, err)
	}
	checkSeqs(events, 1, fmt.Sprintf("turn %d", number))
	var lines []string
	if p == nil {
		lines = []string{fmt.Sprintf("turn %d: events %s", number, kinds(events))}
	} else {
		paused := idsOf(events)
		var decisions []*gatewayv1.ToolDecision
		decisions, lines = expectPause(number, p, events)
		continuation, err := client.SubmitToolDecisions(ctx, &gatewayv1.SubmitToolDecisionsRequest{
			ConversationId: paused.conversationID,
			TurnId:         paused.turnID,
			Decisions:      decisions,
		})
		if err != nil {
			fail("SubmitToolDecisions: %v", err)
		}
		continued, err := receive(continuation)
		if err != nil {
			fail("SubmitToolDecisions stream: %v", err)
		}
		checkSeqs(continued, uint64(len(events))+1, fmt.Sprintf("turn %d's continuation", number))
		lines = append(lines, fmt.Sprintf("turn %d: continued: events %s", number, kinds(continued)))
		events = append(events, continued...)
	}
	result := idsOf(events)
	result.events = events
	var text strings.Builder
	for _, event := range events {
		switch payload := event.Event.(type) {
		case *gatewayv1.ChatEvent_TextDelta:
			text.WriteString(payload.TextDelta)
		case *gatewayv1.ChatEvent_Complete:
			result.complete = payload.Complete
		}
	}
	result.text = text.String()
	if result.complete == nil {
		fail("turn %d: no complete event: %s", number, kinds(events))
	}
	for _, marker := range s.Markers {
		if strings.Contains(result.text, marker) {
			fail("marker %s leaked into the streamed text: %q", marker, result.text)
		}
	}
	if !result.complete.Success {
		fail("turn failed: %q", result.complete.Message)
	}
	if result.complete.Message != result.text {
		fail("the final message differs from the streamed text")
	}
	if p != nil && result.complete.TurnId != result.turnID {
		fail("turn %d: the continuation completes turn %s, not %s", number, result.complete.TurnId, result.turnID)
	}
	return result, lines
}

// idsOf is a turn with the conversation and turn ids its statuses name.
func idsOf(events []*gatewayv1.ChatEvent) turn {
	var ids turn
	for _, event := range events {
		if status := event.GetStatus(); status != nil && status.TurnId != "" {
			ids.conversationID = status.ConversationId
			ids.turnID = status.TurnId
		}
	}
	return ids
}

// sha256Hex is the SHA-256 of data, lowercase hex.
func sha256Hex(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// readFixture reads a scenario file, relative to the scenario's directory.
func readFixture(base, name string) []byte {
	data, err := os.ReadFile(filepath.Join(base, name))
	if err != nil {
		fail("scenario: %v", err)
	}
	return data
}

// sendUpload sends an upload's messages, first (the metadata), then data
// in chunks of chunkBytes, and returns the stored Attachment, the number of
// chunks and the call's error.
func sendUpload(client gatewayv1.ChatGatewayClient, first *gatewayv1.UploadAttachmentRequest, data []byte, chunkBytes int) (*gatewayv1.Attachment, int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	stream, err := client.UploadAttachment(ctx)
	if err != nil {
		return nil, 0, err
	}
	messages := []*gatewayv1.UploadAttachmentRequest{first}
	for start := 0; start < len(data); start += chunkBytes {
		end := start + chunkBytes
		if end > len(data) {
			end = len(data)
		}
		messages = append(messages, &gatewayv1.UploadAttachmentRequest{
			Part: &gatewayv1.UploadAttachmentRequest_Chunk{Chunk: data[start:end]},
		})
	}
	for _, message := range messages {
		// io.EOF: the gateway has already answered (a refusal), which
		// CloseAndRecv returns.
		if err := stream.Send(message); err != nil {
			break
		}
	}
	attachment, err := stream.CloseAndRecv()
	return attachment, len(messages) - 1, err
}

// upload uploads the scenario's files in chunks and checks what the
// gateway stored: the file's name, the media type the scenario expects
// (sniffed from the bytes), its size and the SHA-256 of the bytes sent. It
// returns the files by name.
func upload(client gatewayv1.ChatGatewayClient, base string, u *uploads) map[string]uploaded {
	if u.ChunkBytes < 1 {
		fail("scenario: chunk_bytes %d", u.ChunkBytes)
	}
	files := map[string]uploaded{}
	for _, entry := range u.Files {
		data := readFixture(base, entry.File)
		metadata := &gatewayv1.AttachmentMetadata{}
		if err := protojson.Unmarshal(entry.Metadata, metadata); err != nil {
			fail("scenario: metadata of %s: %v", entry.File, err)
		}
		metadata.SizeBytes = uint64(len(data))
		first := &gatewayv1.UploadAttachmentRequest{Part: &gatewayv1.UploadAttachmentRequest_Metadata{Metadata: metadata}}
		attachment, chunks, err := sendUpload(client, first, data, u.ChunkBytes)
		if err != nil {
			fail("UploadAttachment %s: %v", metadata.Name, err)
		}
		got := fmt.Sprintf("%s %s %d bytes sha256 %s", attachment.Name, attachment.MediaType, attachment.SizeBytes, attachment.Sha256)
		sent := fmt.Sprintf("%s %s %d bytes sha256 %s", metadata.Name, entry.Expect.MediaType, len(data), sha256Hex(data))
		if got != sent {
			fail("upload %s: stored as %s, sent %s", metadata.Name, got, sent)
		}
		if !strings.HasPrefix(attachment.Id, "att_") || attachment.CreatedAt == nil {
			fail("upload %s: no id or no creation time: %v", metadata.Name, attachment)
		}
		files[metadata.Name] = uploaded{attachment, data}
		fmt.Printf("upload %s: %d chunks, %s, %d bytes, sha256 as sent\n", metadata.Name, chunks, attachment.MediaType, attachment.SizeBytes)
	}
	return files
}

// modelFileLine is how the scripted model's `echo = "attachments"` names a
// file it received.
func modelFileLine(file uploaded) string {
	return fmt.Sprintf("%s (%s, %d bytes, sha256 %s)", file.attachment.Name, file.attachment.MediaType, len(file.data), sha256Hex(file.data)[:12])
}

// checkReceived checks that the scripted model echoed exactly these files,
// in order: the model got each, whole.
func checkReceived(number int, text string, names []string, files map[string]uploaded) {
	expected := []string{}
	for _, name := range names {
		file, ok := files[name]
		if !ok {
			fail("scenario: turn %d expects the model to receive %q, which is not uploaded", number, name)
		}
		expected = append(expected, modelFileLine(file))
	}
	received := []string{}
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, " bytes, sha256 ") {
			received = append(received, line)
		}
	}
	if quoted(received) != quoted(expected) {
		fail("turn %d: the model received %s, the scenario expects %s", number, quoted(received), quoted(expected))
	}
}

// download downloads an uploaded file: its metadata first, as stored, then
// bytes equal to the file's by SHA-256.
func download(client gatewayv1.ChatGatewayClient, file uploaded) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	name := file.attachment.Name
	stream, err := client.DownloadAttachment(ctx, &gatewayv1.DownloadAttachmentRequest{AttachmentId: file.attachment.Id})
	if err != nil {
		fail("DownloadAttachment %s: %v", name, err)
	}
	var body []byte
	for first := true; ; first = false {
		response, err := stream.Recv()
		if err == io.EOF {
			if first {
				fail("download %s: no metadata", name)
			}
			break
		}
		if err != nil {
			fail("DownloadAttachment %s stream: %v", name, err)
		}
		if first {
			if !proto.Equal(response.GetMetadata(), file.attachment) {
				fail("download %s: metadata %v, uploaded as %v", name, response.GetMetadata(), file.attachment)
			}
			continue
		}
		if response.GetMetadata() != nil {
			fail("download %s: metadata again after the first message", name)
		}
		body = append(body, response.GetChunk()...)
	}
	digest := sha256Hex(body)
	if digest != file.attachment.Sha256 || digest != sha256Hex(file.data) {
		fail("download %s: %d bytes, sha256 %s, uploaded %s", name, len(body), digest, file.attachment.Sha256)
	}
	fmt.Printf("download %s: %s, %d bytes, sha256 as uploaded\n", name, file.attachment.MediaType, len(body))
}

// resume replays a turn after a seq with ResumeTurn and checks that the
// events are exactly the ones the turn first sent after it.
func resume(client gatewayv1.ChatGatewayClient, original turn, afterSeq uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	stream, err := client.ResumeTurn(ctx, &gatewayv1.ResumeTurnRequest{
		ConversationId: original.conversationID,
		TurnId:         original.turnID,
		AfterSeq:       afterSeq,
	})
	if err != nil {
		fail("ResumeTurn: %v", err)
	}
	replayed, err := receive(stream)
	if err != nil {
		fail("ResumeTurn stream: %v", err)
	}
	if afterSeq >= uint64(len(original.events)) {
		fail("the scenario resumes after seq %d, but the turn has %d events", afterSeq, len(original.events))
	}
	expected := original.events[afterSeq:]
	if len(replayed) != len(expected) {
		fail("ResumeTurn after seq %d sent %d events, the turn sent %d after it", afterSeq, len(replayed), len(expected))
	}
	for i := range expected {
		if !proto.Equal(replayed[i], expected[i]) {
			fail("ResumeTurn event seq %d differs:\n%v\nfirst sent as:\n%v", expected[i].Seq, replayed[i], expected[i])
		}
	}
}

// refuse makes a call the gateway refuses and returns its status. An
// UploadAttachment's request is its first message (the metadata), followed
// by file (relative to base) in chunks of chunkBytes.
func refuse(client gatewayv1.ChatGatewayClient, rpc string, request json.RawMessage, file, base string, chunkBytes int) *status.Status {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	var err error
	switch rpc {
	case "Chat":
		message := &gatewayv1.ChatRequest{}
		if err := protojson.Unmarshal(request, message); err != nil {
			fail("scenario: refused Chat request: %v", err)
		}
		var stream gatewayv1.ChatGateway_ChatClient
		stream, err = client.Chat(ctx, message)
		if err == nil {
			// A streaming call's status arrives with its first read.
			_, err = receive(stream)
		}
	case "GetConversation":
		message := &gatewayv1.GetConversationRequest{}
		if err := protojson.Unmarshal(request, message); err != nil {
			fail("scenario: refused GetConversation request: %v", err)
		}
		_, err = client.GetConversation(ctx, message)
	case "UploadAttachment":
		first := &gatewayv1.UploadAttachmentRequest{}
		if err := protojson.Unmarshal(request, first); err != nil {
			fail("scenario: refused UploadAttachment request: %v", err)
		}
		_, _, err = sendUpload(client, first, readFixture(base, file), chunkBytes)
	case "DownloadAttachment":
		message := &gatewayv1.DownloadAttachmentRequest{}
		if err := protojson.Unmarshal(request, message); err != nil {
			fail("scenario: refused DownloadAttachment request: %v", err)
		}
		var stream gatewayv1.ChatGateway_DownloadAttachmentClient
		stream, err = client.DownloadAttachment(ctx, message)
		for err == nil {
			// A streaming call's status arrives with its first read.
			_, err = stream.Recv()
		}
		if err == io.EOF {
			err = nil
		}
	default:
		fail("scenario: no refusal of %q is known to this client", rpc)
	}
	if err == nil {
		fail("%s was not refused", rpc)
	}
	return status.Convert(err)
}

// describeRefusal reads the google.rpc details of a refused call.
func describeRefusal(rpc string, refused *status.Status) (line, reason, domain string, violations []string) {
	line = fmt.Sprintf("refused %s: %s", rpc, code.Code_name[int32(refused.Code())])
	violations = []string{}
	for _, detail := range refused.Details() {
		switch detail := detail.(type) {
		case *errdetails.ErrorInfo:
			reason, domain = detail.Reason, detail.Domain
			line += fmt.Sprintf(", ErrorInfo %s %s", reason, domain)
		case *errdetails.BadRequest:
			for _, violation := range detail.FieldViolations {
				violations = append(violations, violation.Field)
			}
			line += ", BadRequest " + quoted(violations)
		case *errdetails.RetryInfo:
			delay := detail.GetRetryDelay()
			line += fmt.Sprintf(", RetryInfo %d ms", delay.GetSeconds()*1000+int64(delay.GetNanos())/1e6)
		case error:
			fail("%s: an error detail cannot be decoded: %v", rpc, detail)
		default:
			fail("%s: unexpected error detail %T", rpc, detail)
		}
	}
	return line, reason, domain, violations
}

// readBranch reads the current branch of a conversation (GetConversation,
// one page): its messages and its leaf.
func readBranch(client gatewayv1.ChatGatewayClient, conversationID string) ([]*gatewayv1.ConversationMessage, string) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	page, err := client.GetConversation(ctx, &gatewayv1.GetConversationRequest{ConversationId: conversationID})
	if err != nil {
		fail("GetConversation: %v", err)
	}
	if page.NextPageToken != "" {
		fail("conversation %s: a short branch takes more than one page", conversationID)
	}
	return page.Messages, page.LeafTurnId
}

// withoutSiblings are the messages with their sibling fields cleared: what
// a branch shows but for the turns beside it.
func withoutSiblings(messages []*gatewayv1.ConversationMessage) []*gatewayv1.ConversationMessage {
	stripped := []*gatewayv1.ConversationMessage{}
	for _, message := range messages {
		copied := proto.Clone(message).(*gatewayv1.ConversationMessage)
		copied.SiblingTurnIds, copied.SiblingIndex, copied.SiblingCount = nil, 0, 0
		stripped = append(stripped, copied)
	}
	return stripped
}

// sameMessages is whether two lists of messages are equal, field for field.
func sameMessages(a, b []*gatewayv1.ConversationMessage) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !proto.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// texts are the messages' texts.
func texts(messages []*gatewayv1.ConversationMessage) []string {
	out := []string{}
	for _, message := range messages {
		out = append(out, message.Text)
	}
	return out
}

// branches holds a second conversation that branches and comes back: two
// turns; then EditMessage replaces the message of the plan's turn: a new
// turn, sibling of the original, whose branch is current (GetConversation
// shows the edited text, the turn "2 of 2", the turns before it as they
// were); then SwitchBranch back to the original turn: GetConversation shows
// the messages it showed before the edit, field for field, but for the
// turn's siblings ("1 of 2"). It prints the transcript lines.
func branches(client gatewayv1.ChatGatewayClient, s *scenario) {
	plan := s.Branches
	conversationID := ""
	var turns []turn
	for i, message := range plan.Messages {
		request := &gatewayv1.ChatRequest{
			ConversationId: conversationID,
			Message:        message,
			Page:           &gatewayv1.PageContext{Page: plan.Page},
		}
		result, lines := chat(client, s, i+1, chatCall(client, request), nil)
		conversationID = result.conversationID
		turns = append(turns, result)
		for _, line := range lines {
			fmt.Printf("branches: %s\n", line)
		}
		fmt.Printf("branches: turn %d: text %s\n", i+1, quoted(result.text))
	}
	number := plan.Edit.Turn
	if number < 2 || number > len(turns) {
		fail("scenario: branches edit turn %d of %d (not the first: its parent is checked)", number, len(turns))
	}
	before, leaf := readBranch(client, conversationID)
	expected := []string{}
	for i, message := range plan.Messages {
		expected = append(expected, message, turns[i].text)
	}
	if quoted(texts(before)) != quoted(expected) || leaf != turns[len(turns)-1].complete.TurnId {
		fail("branches: the conversation reads %s ending at %s, sent %s", quoted(texts(before)), leaf, quoted(expected))
	}

	index := 2 * (number - 1) // the edited turn's user message
	original := turns[number-1]
	edited, lines := chat(client, s, number, startTurn{"EditMessage", func(ctx context.Context) (eventStream, error) {
		return client.EditMessage(ctx, &gatewayv1.EditMessageRequest{
			ConversationId: conversationID,
			TurnId:         original.complete.TurnId,
			Message:        plan.Edit.Message,
		})
	}}, nil)
	for _, line := range lines {
		fmt.Printf("branches: edit %s\n", line)
	}
	fmt.Printf("branches: edit turn %d: text %s\n", number, quoted(edited.text))
	newID := edited.complete.TurnId
	if edited.conversationID != conversationID || newID == "" || newID == original.complete.TurnId {
		fail("branches: the edit ran turn %s of %s, not a new turn of %s", newID, edited.conversationID, conversationID)
	}
	if edited.text == original.text {
		fail("branches: the edited message got the original's answer %q", edited.text)
	}
	shown, leaf := readBranch(client, conversationID)
	siblings := quoted([]string{original.complete.TurnId, newID})
	if leaf != newID || len(shown) != index+2 || !sameMessages(shown[:index], before[:index]) ||
		quoted(texts(shown[index:])) != quoted([]string{plan.Edit.Message, edited.text}) ||
		shown[index].TurnId != newID || shown[index+1].TurnId != newID ||
		quoted(shown[index].SiblingTurnIds) != siblings || quoted(shown[index+1].SiblingTurnIds) != siblings ||
		shown[index].SiblingIndex != 1 || shown[index].SiblingCount != 2 ||
		shown[index].ParentTurnId != before[index].ParentTurnId {
		fail("branches: after the edit the current branch ends at %s and reads %v", leaf, shown)
	}
	users := []string{}
	for _, message := range shown {
		if message.Role == gatewayv1.MessageRole_MESSAGE_ROLE_USER {
			users = append(users, message.Text)
		}
	}
	fmt.Printf("branches: edited turn %d: the branch shown has user messages %s, turn %d is %d of %d\n",
		number, quoted(users), number, shown[index].SiblingIndex+1, shown[index].SiblingCount)

	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	switched, err := client.SwitchBranch(ctx, &gatewayv1.SwitchBranchRequest{
		ConversationId: conversationID,
		TurnId:         original.complete.TurnId,
	})
	cancel()
	if err != nil {
		fail("SwitchBranch: %v", err)
	}
	if switched.LeafTurnId != turns[len(turns)-1].complete.TurnId {
		fail("branches: SwitchBranch made %s the leaf, not %s", switched.LeafTurnId, turns[len(turns)-1].complete.TurnId)
	}
	after, leaf := readBranch(client, conversationID)
	if leaf != switched.LeafTurnId || !sameMessages(withoutSiblings(after), withoutSiblings(before)) {
		fail("branches: switched back, the branch reads\n%v\nbefore the edit it read\n%v", after, before)
	}
	if quoted(after[index].SiblingTurnIds) != siblings || quoted(after[index+1].SiblingTurnIds) != siblings ||
		after[index].SiblingIndex != 0 || after[index].SiblingCount != 2 {
		fail("branches: switched back, turn %d is not 1 of 2 beside the edit: %v", number, after[index])
	}
	fmt.Printf("branches: switched back to turn %d: the branch shown is the one before the edit, message for message; turn %d is %d of %d\n",
		number, number, after[index].SiblingIndex+1, after[index].SiblingCount)
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: parley-go-client HOST:PORT SCENARIO.json")
		os.Exit(2)
	}
	address, scenarioPath := os.Args[1], os.Args[2]
	raw, err := os.ReadFile(scenarioPath)
	if err != nil {
		fail("cannot read the scenario: %v", err)
	}
	var s scenario
	if err := json.Unmarshal(raw, &s); err != nil {
		fail("%s is not a scenario: %v", scenarioPath, err)
	}

	connection, err := grpc.Dial(address, grpc.WithInsecure())
	if err != nil {
		fail("cannot dial %s: %v", address, err)
	}
	defer connection.Close()
	client := gatewayv1.NewChatGatewayClient(connection)
	base := filepath.Dir(scenarioPath)
	files := upload(client, base, &s.Uploads)

	var turns []turn
	conversationID := ""
	for i, step := range s.Turns {
		request := &gatewayv1.ChatRequest{}
		if err := protojson.Unmarshal(step.Request, request); err != nil {
			fail("scenario: turn %d request: %v", i+1, err)
		}
		request.ConversationId = conversationID
		for _, name := range step.Attach {
			file, ok := files[name]
			if !ok {
				fail("scenario: turn %d attaches %q, which is not uploaded", i+1, name)
			}
			request.Attachments = append(request.Attachments, &gatewayv1.AttachmentRef{Id: file.attachment.Id})
		}
		result, lines := chat(client, &s, i+1, chatCall(client, request), step.Pause)
		if result.conversationID == "" {
			fail("turn %d did not say which conversation it is in", i+1)
		}
		conversationID = result.conversationID
		complete := result.complete
		payload := complete.GetCustomPayload().GetType()
		if payload != step.Expect.Payload {
			fail("turn %d: payload %q, the scenario expects %q", i+1, payload, step.Expect.Payload)
		}
		if len(complete.SuggestedValues) != step.Expect.SuggestedValues {
			fail("turn %d: %d suggested values, the scenario expects %d", i+1, len(complete.SuggestedValues), step.Expect.SuggestedValues)
		}
		if step.Expect.ModelReceived != nil {
			checkReceived(i+1, result.text, step.Expect.ModelReceived, files)
		}
		labels := []string{}
		for _, value := range complete.SuggestedValues {
			labels = append(labels, value.Label)
		}
		actions := []string{}
		for _, action := range complete.SuggestedActions {
			actions = append(actions, action.Action)
		}
		for _, line := range lines {
			fmt.Println(line)
		}
		fmt.Printf("turn %d: text %s\n", i+1, quoted(result.text))
		fmt.Printf("turn %d: payload %s, suggested values %s, actions %s\n", i+1, quoted(payload), quoted(labels), quoted(actions))
		if step.Expect.ModelReceived != nil {
			fmt.Printf("turn %d: the model received %s: name, type, size, sha256\n", i+1, quoted(step.Expect.ModelReceived))
		}
		turns = append(turns, result)
	}

	if s.Resume.Turn < 1 || s.Resume.Turn > len(turns) {
		fail("scenario: resume names turn %d of %d", s.Resume.Turn, len(turns))
	}
	resume(client, turns[s.Resume.Turn-1], s.Resume.AfterSeq)
	fmt.Printf("resume turn %d after seq %d: the same events through its complete\n", s.Resume.Turn, s.Resume.AfterSeq)

	downloaded, ok := files[s.Uploads.Download]
	if !ok {
		fail("scenario: download %q is not uploaded", s.Uploads.Download)
	}
	download(client, downloaded)

	// The conversation comes a page of turns at a time, the newest page
	// first; a client that needs all of it follows next_page_token (one turn
	// a page here, so the scenario follows several).
	stored := []*gatewayv1.ConversationMessage{}
	token := ""
	for {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		page, err := client.GetConversation(ctx, &gatewayv1.GetConversationRequest{
			ConversationId: conversationID,
			PageSize:       1,
			PageToken:      token,
		})
		cancel()
		if err != nil {
			fail("GetConversation: %v", err)
		}
		stored = append(append([]*gatewayv1.ConversationMessage{}, page.Messages...), stored...)
		token = page.NextPageToken
		if token == "" {
			break
		}
	}
	roles := []string{}
	for _, message := range stored {
		roles = append(roles, message.Role.String())
	}
	expectedRoles := []string{}
	for range turns {
		expectedRoles = append(expectedRoles, "MESSAGE_ROLE_USER", "MESSAGE_ROLE_ASSISTANT")
	}
	if quoted(roles) != quoted(expectedRoles) {
		fail("the conversation reads back as %v, expected %v", roles, expectedRoles)
	}
	fmt.Printf("conversation: %s\n", strings.Join(roles, " "))
	// Each user message lists the files sent with it, as they were uploaded.
	for i, step := range s.Turns {
		listed := stored[2*i].Attachments
		if len(listed) != len(step.Attach) {
			fail("turn %d: the user message lists %d attachments, the turn sent %d", i+1, len(listed), len(step.Attach))
		}
		described := []string{}
		for j, name := range step.Attach {
			if !proto.Equal(listed[j], files[name].attachment) {
				fail("turn %d: the user message lists %v, the turn sent %v", i+1, listed[j], files[name].attachment)
			}
			described = append(described, listed[j].Name+" "+listed[j].MediaType)
		}
		if len(described) > 0 {
			fmt.Printf("conversation: turn %d's message lists %s\n", i+1, strings.Join(described, ", "))
		}
	}

	for _, refusal := range s.Refusals {
		refused := refuse(client, refusal.RPC, refusal.Request, refusal.File, base, s.Uploads.ChunkBytes)
		line, reason, domain, violations := describeRefusal(refusal.RPC, refused)
		expect := refusal.Expect
		if code.Code_name[int32(refused.Code())] != expect.Code || reason != expect.Reason ||
			domain != expect.Domain || quoted(violations) != quoted(expect.FieldViolations) {
			fail("%s: %s (%q), the scenario expects %s, reason %s, domain %s, field violations %v",
				refusal.RPC, line, refused.Message(), expect.Code, expect.Reason, expect.Domain, expect.FieldViolations)
		}
		fmt.Println(line)
	}

	branches(client, &s)

	paused := 0
	for _, step := range s.Turns {
		if step.Pause != nil {
			paused++
		}
	}
	last := turns[len(turns)-1].complete
	fmt.Printf("go client: conversation %s: %d turns, %d paused, payload %s, %d suggested values, %d files uploaded\n",
		conversationID, len(turns), paused, turns[0].complete.GetCustomPayload().GetType(), len(last.SuggestedValues), len(files))
}
