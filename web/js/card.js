// Proposal cards: a custom payload (a schema or data proposal, or any type
// an app registers) drawn while the model writes it and settled when the
// turn completes (docs/clients.md, "payload_partial").
//
// A card is keyed by its `offset` (which payload of the turn it is) and
// redrawn with each higher `revision`; values at `complete_paths` are drawn
// as settled, the rest as still forming. A partial without `data` takes the
// card down. Accept / Dismiss are enabled only once `complete` brings the
// validated `custom_payload`, and are recorded with `RecordPayloadDecision`.

import { compactJson, h } from "./dom.js";

/** A readable name for a payload type: `schema_proposal` → `Schema proposal`. */
function typeLabel(type) {
  const words = String(type || "proposal").replace(/_/g, " ");
  return words.charAt(0).toUpperCase() + words.slice(1);
}

/** Whether the value at JSON Pointer `path` is final. */
function settled(completePaths, path) {
  return completePaths.some((done) => done === "" || path === done || path.startsWith(`${done}/`));
}

/** One line for an operation of a schema or data proposal. */
function describeOperation(op) {
  const action = op.action ?? Object.keys(op)[0] ?? "change";
  if (op.column) {
    const c = op.column;
    const parts = [c.name ?? "…", c.type, c.required ? "required" : null, c.options ? `options: ${c.options.join(", ")}` : null];
    return `${action} column ${parts.filter(Boolean).join(" · ")}`;
  }
  if (op.data) return `${action} row ${compactJson(op.data, 120)}`;
  if (op.changes) return `${action} ${op.column_id ?? (op.row_id !== undefined ? `row ${op.row_id}` : "")} ${compactJson(op.changes, 120)}`;
  if (op.row_id !== undefined) return `${action} row ${op.row_id}`;
  if (op.column_id) return `${action} column ${op.column_id}`;
  return compactJson(op, 140);
}

/** The body of a card: known members drawn for people, the rest as JSON. */
function renderData(data, completePaths) {
  const body = h("div.card-body");
  const known = new Set(["table_name", "table_description", "reasoning", "operations", "sample_rows", "mode"]);
  if (data.table_name || data.mode) {
    body.append(h("p.card-title", {}, [data.mode, data.table_name].filter(Boolean).join(": ")));
  }
  if (data.table_description) body.append(h("p", {}, data.table_description));
  if (data.reasoning) body.append(h("p.muted", {}, data.reasoning));
  if (Array.isArray(data.operations)) {
    body.append(
      h("ol.operations", {}, ...data.operations.map((op, i) =>
        h(`li.${settled(completePaths, `/operations/${i}`) ? "settled" : "forming"}`, {}, describeOperation(op ?? {})))),
    );
  }
  if (Array.isArray(data.sample_rows) && data.sample_rows.length) {
    // The proposal's column order first, then any other key the rows have.
    const proposed = (data.operations ?? []).map((op) => op?.column?.name).filter(Boolean);
    const columns = [...new Set([...proposed, ...data.sample_rows.flatMap((row) => Object.keys(row ?? {}))])];
    body.append(
      h("table.sample", {},
        h("caption", {}, "Sample rows"),
        h("thead", {}, h("tr", {}, ...columns.map((c) => h("th", { scope: "col" }, c)))),
        h("tbody", {}, ...data.sample_rows.map((row) =>
          h("tr", {}, ...columns.map((c) => h("td", {}, row?.[c] === undefined ? "" : String(row[c])))))),
      ),
    );
  }
  const rest = Object.fromEntries(Object.entries(data).filter(([key]) => !known.has(key)));
  if (Object.keys(rest).length) body.append(h("pre.json", {}, JSON.stringify(rest, null, 2)));
  return body;
}

/** The cards of one turn. */
export class PayloadCards {
  /**
   * @param {HTMLElement} container Where the cards go.
   * @param {(decision: string) => Promise<void>} decide Records a decision
   *   (`PAYLOAD_DECISION_ACCEPTED` / `_DISMISSED`); throws a ConnectError when refused.
   */
  constructor(container, decide) {
    this.container = container;
    this.decide = decide;
    /** @type {Map<string, {element: HTMLElement, revision: number, type: string, step: number}>} */
    this.cards = new Map();
  }

  /** A `payload_partial` event; `step` is the model call it arrived in. */
  partial(event, step) {
    const key = String(event.offset ?? "0");
    const existing = this.cards.get(key);
    if (!event.data) {
      existing?.element.remove();
      this.cards.delete(key);
      if (event.diagnostic) {
        const why = event.diagnostic.reason ?? event.diagnostic.kind ?? "invalid";
        this.container.append(h("p.note", {}, `A ${typeLabel(event.type).toLowerCase()} was dropped: ${why}`));
      }
      return;
    }
    const revision = Number(event.revision ?? 0);
    if (existing && revision <= existing.revision) return;
    const completePaths = event.completePaths ?? [];
    const whole = completePaths.includes("");
    const card = existing ?? this.create(event.type, step);
    card.revision = revision;
    card.element.dataset.revision = String(revision);
    card.element.dataset.state = whole ? "written" : "forming";
    card.status.textContent = whole ? "written, awaiting validation" : "forming…";
    card.body.replaceWith((card.body = renderData(event.data, completePaths)));
    this.cards.set(key, card);
  }

  /** Takes down the cards first shown in model call `step` or later (a `step_reset`). */
  resetStep(step) {
    for (const [key, card] of this.cards) {
      if (card.step >= step) {
        card.element.remove();
        this.cards.delete(key);
      }
    }
  }

  /**
   * The turn completed: `payload` (the validated `custom_payload`, or
   * nothing) replaces whatever was drawn while streaming.
   * @param {object | undefined} payload
   * @param {object | undefined} decision A stored `PayloadDecisionRecord`.
   */
  complete(payload, decision) {
    const keep = [...this.cards.values()].reverse().find((card) => payload && card.type === payload.type);
    for (const card of this.cards.values()) if (card !== keep) card.element.remove();
    this.cards.clear();
    if (!payload) return;
    const card = keep ?? this.create(payload.type, 0);
    card.body.replaceWith((card.body = renderData(payload.data ?? {}, [""])));
    card.element.dataset.state = "validated";
    card.status.textContent = "ready";
    card.actions.hidden = false;
    if (decision?.decision) this.showDecision(card, decision.decision);
  }

  create(type, step) {
    const status = h("span.badge", { role: "status" });
    const body = h("div.card-body");
    const error = h("p.error", { role: "alert", hidden: true });
    const card = { type, step, revision: 0, status, body, error, element: null, actions: null };
    const accept = h("button.primary", { type: "button", onclick: () => this.record(card, "PAYLOAD_DECISION_ACCEPTED") }, "Accept");
    const dismiss = h("button", { type: "button", onclick: () => this.record(card, "PAYLOAD_DECISION_DISMISSED") }, "Dismiss");
    card.actions = h("div.card-actions", { hidden: true }, accept, dismiss);
    card.element = h("section.card", { "aria-label": typeLabel(type), "data-type": type },
      h("header", {}, h("h3", {}, typeLabel(type)), status), body, card.actions, error);
    this.container.append(card.element);
    return card;
  }

  async record(card, decision) {
    for (const button of card.actions.querySelectorAll("button")) button.disabled = true;
    card.error.hidden = true;
    try {
      await this.decide(decision);
      this.showDecision(card, decision);
    } catch (error) {
      card.error.textContent = `Not recorded: ${error.message}`;
      card.error.hidden = false;
      for (const button of card.actions.querySelectorAll("button")) button.disabled = false;
    }
  }

  showDecision(card, decision) {
    const accepted = decision !== "PAYLOAD_DECISION_DISMISSED";
    card.element.dataset.state = accepted ? "accepted" : "dismissed";
    card.status.textContent = accepted ? "accepted" : "dismissed";
    for (const button of card.actions.querySelectorAll("button")) button.disabled = true;
  }
}
