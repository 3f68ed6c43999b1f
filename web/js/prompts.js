// Decisions a paused turn waits for: tool calls that need the user's
// approval (`approval_request`) and tools the application runs
// (`client_tool_call`). Each pending call gets a small form; once every
// call of the pause has a decision, they are handed back together, for
// `SubmitToolDecisions` to continue the turn.

import { compactJson, h } from "./dom.js";

/** The pending calls of one turn. */
export class PendingCalls {
  /**
   * @param {HTMLElement} container Where the forms go.
   * @param {(decisions: object[]) => void} submit Called once every pending
   *   call is decided, with one `ToolDecision` (proto3 JSON) per call.
   */
  constructor(container, submit) {
    this.container = container;
    this.submit = submit;
    /** @type {Map<string, {form: HTMLElement, decision: object | null}>} */
    this.calls = new Map();
  }

  /** A call that waits for approval. */
  approval(request) {
    if (this.calls.has(request.callId)) return;
    const reason = h("input", { type: "text", name: "reason", placeholder: "Why not? (optional, told to the model)" });
    const reject = () => this.decide(request.callId, { reject: { reason: reason.value.trim() } }, "rejected");
    const form = h("form.prompt", { "aria-label": `Approve ${request.tool}` },
      h("p", {}, h("strong", {}, "Approval needed: "), request.summary || `${request.tool}(${compactJson(request.arguments)})`),
      h("div.row",
        {},
        h("button.primary", { type: "button", onclick: () => this.decide(request.callId, { approve: {} }, "approved") }, "Approve"),
        h("label", {}, h("span.visually-hidden", {}, "Reason to reject"), reason),
        h("button", { type: "button", onclick: reject }, "Reject"),
      ),
    );
    this.add(request.callId, form);
  }

  /** A call the application runs: this page lets the user answer for it with JSON. */
  clientTool(call) {
    if (this.calls.has(call.callId)) return;
    const output = h("textarea", { name: "output", rows: 3, spellcheck: false }, "{}");
    const problem = h("p.error", { role: "alert", hidden: true });
    const send = () => {
      let value;
      try {
        value = JSON.parse(output.value);
      } catch (error) {
        problem.textContent = `Not JSON: ${error.message}`;
        problem.hidden = false;
        return;
      }
      if (value === null || typeof value !== "object" || Array.isArray(value)) {
        problem.textContent = "The result must be a JSON object.";
        problem.hidden = false;
        return;
      }
      this.decide(call.callId, { result: { output: value } }, "answered");
    };
    const fail = () => this.decide(call.callId, { result: { error: "the user did not answer" } }, "failed");
    const form = h("form.prompt", { "aria-label": `Answer ${call.tool}` },
      h("p", {}, h("strong", {}, "The app runs a tool: "), `${call.tool}(${compactJson(call.arguments)})`),
      h("label", {}, "Its result (a JSON object)", output),
      problem,
      h("div.row", {},
        h("button.primary", { type: "button", onclick: send }, "Send result"),
        h("button", { type: "button", onclick: fail }, "Report failure"),
      ),
    );
    this.add(call.callId, form);
  }

  add(callId, form) {
    form.addEventListener("submit", (event) => event.preventDefault());
    this.calls.set(callId, { form, decision: null });
    this.container.append(form);
  }

  decide(callId, decision, outcome) {
    const call = this.calls.get(callId);
    if (!call || call.decision) return;
    call.decision = { callId, ...decision };
    for (const control of call.form.querySelectorAll("button, input, textarea")) control.disabled = true;
    call.form.dataset.outcome = outcome;
    call.form.append(h("p.muted", {}, `You ${outcome} this call.`));
    const all = [...this.calls.values()];
    if (all.every((c) => c.decision)) {
      this.calls.clear();
      this.submit(all.map((c) => c.decision));
    }
  }
}
