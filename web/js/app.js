// The chat page: wires the form controls to the gateway's ChatGateway over
// the Connect protocol (connect.js) and draws turns (turn.js).
//
// - The page context (page, tab, state, model) is described with
//   `DescribePage` as it changes, and sent with every message.
// - A message is a `Chat` stream; suggested values are chips that send
//   their value, server actions run `ExecuteAction`, a paused turn goes on
//   with `SubmitToolDecisions`, Accept / Dismiss call `RecordPayloadDecision`.
// - The streaming turn's conversation, turn and last `seq` are kept in
//   sessionStorage: a stream that breaks is followed again with
//   `ResumeTurn` after that seq; a reload redraws the conversation
//   (`GetConversation`) and replays the running turn from its start
//   (`ResumeTurn` with `after_seq` 0, since the drawn turn was lost).
// - A refused call shows its Connect code, message and `google.rpc` details.

import { ConnectClient, ConnectError } from "./connect.js";
import { describeDetail } from "./details.js";
import { h, newRequestId } from "./dom.js";
import { session, takeTokenFromFragment } from "./session.js";
import { TurnView, userMessage } from "./turn.js";

/** Codes after which a turn's stream is followed again with `ResumeTurn`. */
const RESUMABLE = new Set(["unavailable", "unknown", "internal", "deadline_exceeded"]);
/** How many times in a row a broken stream is resumed before giving up. */
const MAX_RESUMES = 6;

const $ = (id) => document.getElementById(id);
const ui = {
  token: $("token"),
  page: $("page"),
  tab: $("tab"),
  state: $("state"),
  model: $("model"),
  models: $("models"),
  pageInfo: $("page-info"),
  conversations: $("conversations"),
  newChat: $("new-chat"),
  title: $("conversation-title"),
  log: $("log"),
  composer: $("composer"),
  message: $("message"),
  send: $("send"),
  stop: $("stop"),
};

const client = new ConnectClient({ token: () => session.token });

/** The conversation on screen ("" for a new one) and the turn streaming in it. */
let conversationId = "";
/** @type {{view: TurnView, controller: AbortController} | null} */
let streaming = null;

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// ---- errors ---------------------------------------------------------------

/** A refused or failed call, for people: code, message and details. */
function refusal(error, what) {
  const connect = error instanceof ConnectError ? error : new ConnectError("unknown", String(error?.message ?? error));
  const details = connect.details.map((d) => h("li", {}, describeDetail(d)));
  return h("div.refusal", { role: "alert" },
    h("p", {}, h("strong", {}, `${what} refused`), ` (${connect.code}): ${connect.message}`),
    details.length ? h("ul.details", { "aria-label": "Error details" }, ...details) : null);
}

function showRefusal(error, what) {
  ui.log.append(refusal(error, what));
  scrollToEnd();
}

function scrollToEnd() {
  ui.log.scrollTop = ui.log.scrollHeight;
}

// ---- page context -----------------------------------------------------------

/** The `PageContext` to send, or throws when the state is not a JSON object. */
function pageContext() {
  const context = { page: ui.page.value.trim() };
  const tab = ui.tab.value.trim();
  if (tab) context.tab = tab;
  const state = ui.state.value.trim();
  if (state) {
    let value;
    try {
      value = JSON.parse(state);
    } catch (error) {
      throw new ConnectError("invalid_argument", `the page state is not JSON: ${error.message}`);
    }
    if (value === null || typeof value !== "object" || Array.isArray(value)) {
      throw new ConnectError("invalid_argument", "the page state must be a JSON object");
    }
    context.state = value;
  }
  return context;
}

function rememberPage() {
  session.page = { page: ui.page.value, tab: ui.tab.value, state: ui.state.value, model: ui.model.value };
}

/** A tool of `DescribePage`, with how it runs. */
function toolLabel(tool) {
  if (tool.needsApproval) return `${tool.name} (asks approval)`;
  if (tool.runsOnClient) return `${tool.name} (the app runs it)`;
  return tool.name;
}

/** Shows what the page resolves to (`DescribePage`). */
async function describePage() {
  rememberPage();
  ui.pageInfo.replaceChildren(h("span.muted", {}, "Describing the page…"));
  try {
    const page = await client.unary("DescribePage", { page: pageContext() });
    const names = (list, name) => (list ?? []).map(name).join(", ") || "none";
    ui.pageInfo.replaceChildren(h("p", {},
      h("strong", {}, page.knownPage ? "A page of the registry" : "Not in the registry (global settings only)"),
      ` · proposals: ${names(page.payloadTypes, (p) => p.name)}`,
      ` · tools: ${names(page.tools, toolLabel)}`,
      ` · actions: ${names(page.clientActions, (a) => a.action)}`,
      ` · model: ${page.model || "the runner's default"}`));
    ui.models.replaceChildren(...(page.modelsAllowed ?? []).map((m) => h("option", { value: m })));
  } catch (error) {
    ui.pageInfo.replaceChildren(refusal(error, "DescribePage"));
  }
}

// ---- conversations ------------------------------------------------------------

/** Lists the caller's conversations, newest first (`ListConversations`). */
async function listConversations() {
  try {
    const { conversations = [] } = await client.unary("ListConversations", { pageSize: 30 });
    ui.conversations.replaceChildren(...conversations.map((c) =>
      h("li", {}, h("button.conversation", {
        type: "button",
        "aria-current": c.id === conversationId ? "true" : false,
        onclick: () => openConversation(c.id),
      }, h("span.title", {}, c.title || "Untitled"), h("span.muted", {}, `${c.turnCount ?? 0} turn(s)`)))));
    if (!conversations.length) ui.conversations.replaceChildren(h("li.muted", {}, "No conversations yet."));
  } catch (error) {
    ui.conversations.replaceChildren(h("li", {}, refusal(error, "ListConversations")));
  }
}

function startNewConversation() {
  if (streaming) return;
  conversationId = "";
  session.conversationId = "";
  ui.title.textContent = "New conversation";
  ui.log.replaceChildren();
  listConversations();
  ui.message.focus();
}

/**
 * Draws a conversation (`GetConversation`) and follows its last turn when
 * it is still running or waits for input.
 */
async function openConversation(id, running = null) {
  if (streaming) return;
  let answer;
  try {
    answer = await client.unary("GetConversation", { conversationId: id });
  } catch (error) {
    session.running = null;
    session.conversationId = "";
    showRefusal(error, "GetConversation");
    return;
  }
  conversationId = id;
  session.conversationId = id;
  ui.title.textContent = answer.conversation?.title || "Conversation";
  ui.log.replaceChildren();
  const messages = answer.messages ?? [];
  const last = messages.at(-1);
  const unfinished = last && last.role === "MESSAGE_ROLE_ASSISTANT"
    && ["TURN_STATE_RUNNING", "TURN_STATE_AWAITING_INPUT"].includes(last.state) ? last.turnId : "";
  const follow = running?.turnId || unfinished;
  messages.forEach((message, index) => {
    if (message.role === "MESSAGE_ROLE_USER") ui.log.append(userMessage(message.text ?? ""));
    else if (message.turnId !== follow) {
      ui.log.append(TurnView.fromStored(message, handlers, { latest: index === messages.length - 1 }).element);
    }
  });
  scrollToEnd();
  listConversations();
  if (follow) {
    const view = new TurnView(handlers);
    view.conversationId = id;
    view.turnId = follow;
    view.element.dataset.resumed = "true";
    ui.log.append(view.element);
    await followTurn(view, (signal) =>
      client.stream("ResumeTurn", { conversationId: id, turnId: follow, afterSeq: "0" }, { signal }));
  }
}

// ---- turns ------------------------------------------------------------------------

/**
 * Streams a turn into `view`: `open(signal)` starts the stream (Chat,
 * ResumeTurn, ExecuteAction, SubmitToolDecisions). A stream that breaks
 * once the turn has an id is followed again with `ResumeTurn` after the
 * last seq received; any other failure is shown with its reason.
 * `title` names a conversation the turn starts; `refused` is called when
 * the call is refused before the turn began.
 */
async function followTurn(view, open, { title = "", refused = null } = {}) {
  const controller = new AbortController();
  streaming = { view, controller };
  setBusy(true);
  let stream = open(controller.signal);
  let resumes = 0;
  for (;;) {
    try {
      for await (const event of stream) {
        resumes = 0;
        view.seq = Number(event.seq ?? view.seq);
        view.apply(event);
        if (view.conversationId && view.conversationId !== conversationId) {
          conversationId = view.conversationId;
          session.conversationId = conversationId;
          if (title) ui.title.textContent = title;
        }
        if (view.turnId) {
          session.running = event.complete
            ? null
            : { conversationId: view.conversationId, turnId: view.turnId, seq: view.seq };
        }
        scrollToEnd();
      }
      break;
    } catch (error) {
      const slow = error instanceof ConnectError && error.reason === "SLOW_CONSUMER";
      const resumable = view.turnId && (RESUMABLE.has(error.code) || slow) && resumes < MAX_RESUMES;
      if (!resumable || controller.signal.aborted) {
        if (!view.turnId && !view.answerText.length) {
          view.element.remove();
          refused?.();
        } else if (view.state === "streaming") {
          view.state = "failed";
        }
        // A turn that cannot be followed any more is not resumed on reload.
        if (!RESUMABLE.has(error.code)) session.running = null;
        showRefusal(error, view.turnId ? "The turn's stream was" : "The message was");
        break;
      }
      await sleep(Math.min(250 * 2 ** resumes, 4000));
      resumes += 1;
      stream = client.stream("ResumeTurn",
        { conversationId: view.conversationId, turnId: view.turnId, afterSeq: String(view.seq) },
        { signal: controller.signal });
    }
  }
  streaming = null;
  setBusy(false);
  listConversations();
}

function setBusy(busy) {
  ui.send.disabled = busy;
  ui.stop.hidden = !busy;
  ui.newChat.disabled = busy;
}

/** Sends the composer's message (or `text`) as a `Chat` turn. */
async function send(text) {
  const message = (text ?? ui.message.value).trim();
  if (!message || streaming) return;
  let page;
  try {
    page = pageContext();
  } catch (error) {
    showRefusal(error, "The message was");
    return;
  }
  ui.message.value = "";
  rememberPage();
  const said = userMessage(message);
  ui.log.append(said);
  const view = new TurnView(handlers);
  ui.log.append(view.element);
  scrollToEnd();
  const request = { message, page, requestId: newRequestId() };
  if (conversationId) request.conversationId = conversationId;
  const model = ui.model.value.trim();
  if (model) request.model = model;
  await followTurn(view, (signal) => client.stream("Chat", request, { signal }), {
    title: conversationId ? "" : message,
    // Refused before it started: the message goes back to the composer.
    refused: () => {
      said.classList.add("refused");
      if (!ui.message.value) ui.message.value = message;
    },
  });
}

/** Cancels the streaming turn (`CancelTurn`); its stream then ends with `complete`. */
async function stop() {
  const view = streaming?.view;
  if (!view?.conversationId) return;
  try {
    await client.unary("CancelTurn", { conversationId: view.conversationId, turnId: view.turnId });
  } catch (error) {
    showRefusal(error, "CancelTurn");
  }
}

/** What turn views ask of the page. */
const handlers = {
  chip: (value) => send(value),

  /** A suggested action: server actions run a turn, client actions are the app's. */
  action: async (view, action) => {
    if (streaming) return;
    if (action.handler !== "ACTION_HANDLER_SERVER") {
      const label = action.label || action.action;
      ui.log.append(h("p.note", {}, `“${label}” is an action the app runs (${action.action}); this page only shows it.`));
      scrollToEnd();
      return;
    }
    let page;
    try {
      page = pageContext();
    } catch (error) {
      showRefusal(error, "The action was");
      return;
    }
    ui.log.append(userMessage(`▶ ${action.label || action.action}`));
    const next = new TurnView(handlers);
    ui.log.append(next.element);
    await followTurn(next, (signal) => client.stream("ExecuteAction", {
      conversationId: view.conversationId || conversationId,
      action: action.action,
      params: action.params ?? {},
      page,
      requestId: newRequestId(),
    }, { signal }));
  },

  /** Every pending call of a paused turn is decided: the turn goes on. */
  decisions: (view, decisions) => followTurn(view, (signal) => client.stream("SubmitToolDecisions", {
    conversationId: view.conversationId,
    turnId: view.turnId,
    decisions,
    requestId: newRequestId(),
  }, { signal })),

  payloadDecision: (view, decision) => client.unary("RecordPayloadDecision", {
    conversationId: view.conversationId,
    turnId: view.turnId,
    decision,
  }),
};

// ---- start ---------------------------------------------------------------------------

function start() {
  takeTokenFromFragment();
  ui.token.value = session.token;
  const saved = session.page;
  if (saved) {
    ui.page.value = saved.page ?? ui.page.value;
    ui.tab.value = saved.tab ?? "";
    ui.state.value = saved.state ?? "";
    ui.model.value = saved.model ?? "";
  }

  $("token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    session.token = ui.token.value.trim();
    describePage();
    listConversations();
  });
  $("page-form").addEventListener("submit", (event) => {
    event.preventDefault();
    describePage();
  });
  for (const input of [ui.page, ui.tab, ui.state]) input.addEventListener("change", describePage);
  ui.model.addEventListener("change", rememberPage);
  ui.newChat.addEventListener("click", startNewConversation);
  ui.stop.addEventListener("click", stop);
  ui.composer.addEventListener("submit", (event) => {
    event.preventDefault();
    send();
  });
  ui.message.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      send();
    }
  });

  describePage();
  const running = session.running;
  if (running) openConversation(running.conversationId, running);
  else if (session.conversationId) openConversation(session.conversationId);
  else listConversations();
  document.body.dataset.ready = "true";
}

start();
