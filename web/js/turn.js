// One assistant turn on screen, drawn from its `ChatEvent`s as they stream
// (docs/clients.md, "What a UI does while the model writes") or from a
// stored `ConversationMessage`.
//
// The turn's element carries `data-state` (`streaming`, `awaiting_input`,
// then `completed`, `failed` or `cancelled`) and the answer's element
// `aria-busy` while text streams in, so assistive technology reads the
// answer once, when it is whole.

import { PayloadCards } from "./card.js";
import { compactJson, formatDuration, h } from "./dom.js";
import { PendingCalls } from "./prompts.js";

/** What people read for a phase. */
const PHASES = {
  TURN_PHASE_STARTED: "Started",
  TURN_PHASE_THINKING: "Thinking…",
  TURN_PHASE_RUNNING_TOOLS: "Running tools…",
  TURN_PHASE_RETRYING: "Retrying…",
  TURN_PHASE_FINALIZING: "Finishing…",
  TURN_PHASE_AWAITING_INPUT: "Waiting for your decision",
};

/** `TURN_STATE_COMPLETED` → `completed`. */
const stateName = (state) => String(state ?? "TURN_STATE_COMPLETED").replace(/^TURN_STATE_/, "").toLowerCase();

/**
 * What a turn view asks of the app.
 * @typedef {object} TurnHandlers
 * @property {(value: string) => void} chip A suggested value was clicked.
 * @property {(view: TurnView, action: object) => void} action A suggested action was clicked.
 * @property {(view: TurnView, decisions: object[]) => void} decisions Every pending call is decided.
 * @property {(view: TurnView, decision: string) => Promise<void>} payloadDecision Records Accept / Dismiss.
 */

export class TurnView {
  /** @param {TurnHandlers} handlers */
  constructor(handlers) {
    this.handlers = handlers;
    this.conversationId = "";
    this.turnId = "";
    /** The last `seq` received: where a broken stream resumes. */
    this.seq = 0;
    /** The model call (step) now streaming, counted by THINKING statuses. */
    this.step = 0;
    /** Lengths of the text and reasoning when the current step began. */
    this.stepMark = { text: 0, reasoning: 0 };
    /** @type {Map<string, HTMLElement>} tool rows by call id */
    this.toolRows = new Map();

    this.phase = h("p.phase", { role: "status" });
    this.reasoningText = h("div.reasoning-text");
    this.reasoning = h("details.reasoning", { hidden: true }, h("summary", {}, "Reasoning"), this.reasoningText);
    this.tools = h("ul.tools", { "aria-label": "Tool calls", hidden: true });
    this.answerText = document.createTextNode("");
    this.answer = h("div.answer", { "aria-busy": "true" }, this.answerText);
    this.structured = h("pre.json.structured", { hidden: true });
    this.cardsElement = h("div.cards");
    this.promptsElement = h("div.prompts");
    this.suggestions = h("div.suggestions", { "aria-label": "Suggestions" });
    this.notes = h("div.notes");
    this.errorElement = h("p.error", { role: "alert", hidden: true });
    this.usage = h("p.usage", { hidden: true });
    this.element = h("article.turn.assistant", { "data-state": "streaming", "aria-label": "Assistant" },
      this.phase, this.reasoning, this.tools, this.answer, this.structured, this.cardsElement,
      this.promptsElement, this.suggestions, this.notes, this.errorElement, this.usage);

    this.cards = new PayloadCards(this.cardsElement, (decision) => handlers.payloadDecision(this, decision));
    this.pending = new PendingCalls(this.promptsElement, (decisions) => handlers.decisions(this, decisions));
  }

  /** The turn's state: `streaming`, `awaiting_input`, `completed`... */
  get state() {
    return this.element.dataset.state;
  }

  set state(value) {
    this.element.dataset.state = value;
    this.answer.setAttribute("aria-busy", String(value === "streaming"));
  }

  /** Applies one `ChatEvent` (proto3 JSON). */
  apply(event) {
    if (event.status) this.onStatus(event.status);
    else if (event.textDelta !== undefined) this.answerText.appendData(event.textDelta);
    else if (event.reasoningDelta !== undefined) this.appendReasoning(event.reasoningDelta);
    else if (event.structuredDelta !== undefined) this.showStructured(this.structured.textContent + event.structuredDelta);
    else if (event.structuredPartial) this.showStructured(JSON.stringify(event.structuredPartial.data ?? null, null, 2));
    else if (event.toolStart) this.onToolStart(event.toolStart);
    else if (event.toolProgress) this.onToolProgress(event.toolProgress);
    else if (event.toolComplete) this.onToolComplete(event.toolComplete);
    else if (event.payloadPartial) this.cards.partial(event.payloadPartial, this.step);
    else if (event.suggestedValues) this.showSuggestions(event.suggestedValues.values ?? [], null);
    else if (event.suggestedActions) this.showSuggestions(null, event.suggestedActions.actions ?? []);
    else if (event.stepReset) this.onStepReset(event.stepReset);
    else if (event.approvalRequest) this.pending.approval(event.approvalRequest);
    else if (event.clientToolCall) this.pending.clientTool(event.clientToolCall);
    else if (event.error) this.showError(event.error);
    else if (event.complete) this.onComplete(event.complete);
  }

  onStatus(status) {
    if (status.conversationId) this.conversationId = status.conversationId;
    if (status.turnId) this.turnId = status.turnId;
    this.phase.textContent = status.message || PHASES[status.phase] || "";
    if (status.phase === "TURN_PHASE_THINKING") {
      this.step += 1;
      this.stepMark = { text: this.answerText.length, reasoning: this.reasoningText.textContent.length };
    }
    if (status.phase === "TURN_PHASE_AWAITING_INPUT") this.state = "awaiting_input";
    else if (this.state === "awaiting_input") this.state = "streaming";
  }

  appendReasoning(delta) {
    this.reasoning.hidden = false;
    this.reasoningText.append(delta);
  }

  showStructured(text) {
    this.structured.hidden = false;
    this.structured.textContent = text;
  }

  onToolStart(start) {
    this.tools.hidden = false;
    const progress = h("progress", { max: 1, hidden: true, "aria-label": `${start.name} progress` });
    const detail = h("span.detail", {}, compactJson(start.input, 100));
    const outcome = h("span.outcome", {}, "running…");
    const row = h("li.tool", { "data-state": "running" }, h("strong", {}, start.name), " ", detail, " ", progress, " ", outcome);
    this.toolRows.set(start.callId, row);
    this.tools.append(row);
  }

  onToolProgress(progress) {
    const row = this.toolRows.get(progress.callId);
    if (!row) return;
    row.querySelector(".outcome").textContent = progress.message || progress.stage || "running…";
    if (progress.fraction !== undefined) {
      const bar = row.querySelector("progress");
      bar.hidden = false;
      bar.value = Number(progress.fraction);
    }
  }

  onToolComplete(done) {
    let row = this.toolRows.get(done.callId);
    if (!row) {
      this.onToolStart({ callId: done.callId, name: done.name, input: {} });
      row = this.toolRows.get(done.callId);
    }
    row.dataset.state = done.success ? "done" : "failed";
    row.querySelector("progress").hidden = true;
    const took = formatDuration(done.duration);
    row.querySelector(".outcome").textContent = done.success
      ? `done${took ? ` in ${took}` : ""}`
      : `failed: ${done.error || "no reason given"}`;
  }

  onStepReset(reset) {
    this.answerText.data = this.answerText.data.slice(0, this.stepMark.text);
    this.reasoningText.textContent = this.reasoningText.textContent.slice(0, this.stepMark.reasoning);
    this.cards.resetStep(this.step);
    this.showSuggestions([], []);
    this.notes.append(h("p.note", {}, reset.message || `Model call ${reset.step} failed midway; trying again.`));
  }

  /**
   * Shows suggested values (chips) and actions (buttons); `null` keeps the
   * list that is there, an empty list takes it down.
   */
  showSuggestions(values, actions) {
    if (values) {
      this.suggestions.querySelector(".chips")?.remove();
      if (values.length) {
        this.suggestions.prepend(h("div.chips", {}, ...values.map((v) =>
          h("button.chip", { type: "button", title: v.value, onclick: () => this.handlers.chip(v.value || v.label) },
            v.label || v.value))));
      }
    }
    if (actions) {
      this.suggestions.querySelector(".actions")?.remove();
      if (actions.length) {
        this.suggestions.append(h("div.actions", {}, ...actions.map((a) =>
          h("button.action", { type: "button", onclick: () => this.handlers.action(this, a) }, a.label || a.action))));
      }
    }
  }

  showError(error) {
    const reason = error.reason ? ` (${error.reason})` : "";
    this.errorElement.textContent = `${error.message || "The turn failed."}${reason}${error.retryable ? " You can send it again." : ""}`;
    this.errorElement.hidden = false;
  }

  onComplete(complete) {
    if (complete.conversationId) this.conversationId = complete.conversationId;
    if (complete.turnId) this.turnId = complete.turnId;
    this.finish({
      state: complete.state ?? (complete.success ? "TURN_STATE_COMPLETED" : "TURN_STATE_FAILED"),
      text: complete.message,
      payload: complete.customPayload,
      values: complete.suggestedValues ?? [],
      actions: complete.suggestedActions ?? [],
      structured: complete.structured,
      usage: complete.usage,
    });
  }

  /** The turn ended: what was drawn while streaming is replaced by the final answer. */
  finish({ state, text, payload, decision, values, actions, structured, usage }) {
    if (text !== undefined && (text || this.answerText.length === 0 || state === "TURN_STATE_COMPLETED")) {
      this.answerText.data = text ?? "";
    }
    this.cards.complete(payload, decision);
    this.showSuggestions(values, actions);
    if (structured) {
      const valid = structured.valid ? "" : ` (invalid: ${structured.error || "does not match the schema"})`;
      this.showStructured(`${JSON.stringify(structured.value ?? null, null, 2)}${valid}`);
    }
    if (usage && (usage.inputTokens || usage.outputTokens)) {
      const tokens = `${usage.inputTokens ?? 0} in / ${usage.outputTokens ?? 0} out tokens`;
      const calls = `${usage.modelCalls ?? 0} model call(s)`;
      this.usage.textContent = [tokens, calls, usage.model].filter(Boolean).join(" · ");
      this.usage.hidden = false;
    }
    this.phase.textContent = "";
    this.state = stateName(state);
  }

  /** Draws a stored assistant message (`GetConversation`). */
  static fromStored(message, handlers, { latest }) {
    const view = new TurnView(handlers);
    view.turnId = message.turnId ?? "";
    if (message.reasoning) view.appendReasoning(message.reasoning);
    for (const tool of message.toolHistory ?? []) {
      view.onToolStart({ callId: tool.callId, name: tool.name, input: tool.input });
      view.onToolComplete(tool);
    }
    if (message.error) view.showError(message.error);
    view.finish({
      state: message.state,
      text: message.text ?? "",
      payload: message.customPayload,
      decision: message.payloadDecision,
      values: latest ? message.suggestedValues ?? [] : [],
      actions: latest ? message.suggestedActions ?? [] : [],
      structured: message.structured,
      usage: message.usage,
    });
    return view;
  }
}

/** A user message on screen. */
export function userMessage(text) {
  return h("article.turn.user", { "aria-label": "You" }, h("p", {}, text));
}
