// What this tab remembers across a reload, in sessionStorage (per tab,
// gone when the tab closes): the bearer token, the open conversation, the
// page context, and the turn that is streaming (its conversation, turn and
// the last `seq` received), so a reload mid-turn resumes it with
// `ResumeTurn` instead of losing it.

const KEYS = {
  token: "parley.token",
  conversation: "parley.conversation",
  running: "parley.running",
  page: "parley.page",
};

function read(key) {
  try {
    return sessionStorage.getItem(key);
  } catch {
    return null; // storage disabled: nothing is remembered
  }
}

function write(key, value) {
  try {
    if (value === null || value === undefined || value === "") sessionStorage.removeItem(key);
    else sessionStorage.setItem(key, value);
  } catch {
    // storage disabled or full: the page works, it only forgets on reload
  }
}

function readJson(key) {
  try {
    return JSON.parse(read(key) ?? "null");
  } catch {
    return null;
  }
}

export const session = {
  get token() { return read(KEYS.token) ?? ""; },
  set token(value) { write(KEYS.token, value); },

  get conversationId() { return read(KEYS.conversation) ?? ""; },
  set conversationId(value) { write(KEYS.conversation, value); },

  /** @returns {{conversationId: string, turnId: string, seq: number} | null} */
  get running() {
    const running = readJson(KEYS.running);
    return running?.conversationId ? running : null;
  },
  set running(value) { write(KEYS.running, value ? JSON.stringify(value) : null); },

  /** @returns {{page?: string, tab?: string, subtab?: string, state?: string, model?: string} | null} */
  get page() { return readJson(KEYS.page); },
  set page(value) { write(KEYS.page, value ? JSON.stringify(value) : null); },
};

/**
 * Takes a token from the URL fragment (`#token=...`), stores it, and
 * removes it from the address bar so it is not bookmarked or shared.
 */
export function takeTokenFromFragment() {
  const fragment = new URLSearchParams(location.hash.slice(1));
  const token = fragment.get("token");
  if (token === null) return;
  session.token = token.trim();
  fragment.delete("token");
  const rest = fragment.toString();
  history.replaceState(null, "", `${location.pathname}${location.search}${rest ? `#${rest}` : ""}`);
}
