"""The chat page of web/ in a real browser: headless Chromium driven by
Selenium against a running stack (tests/browser/main.rs starts it: the
scripted demo model, the demo registry, dev auth, `web.enabled = true`).

    python3 tests/browser/chat_page.py GATEWAY_URL ARTIFACT_DIR

It takes a token from the URL fragment, sends a message and sees the answer
stream in (more than one paint of the answer before the turn completes,
counted by a MutationObserver), a proposal card form and get accepted (the
next turn's answer shows the model was told), a chip send its value, an
approval prompt and a client tool continue their turns, a reload in the
middle of a turn resume it to its end, Stop cancel a turn, a listed
conversation read back with its accepted card, and a refused request show
its reason. Screenshots go to ARTIFACT_DIR. Every wait is bounded; a failed
step prints what the page showed and fails the run.
"""

import os
import sys
from pathlib import Path

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

# Generous bounds for a slow shared machine: waits end as soon as the
# condition holds, these only stop a run that would hang.
WAIT = 30

# Records, from before a message is sent, every change of the last
# assistant answer's text while its turn streams, and every state a card
# goes through.
OBSERVE = """
window.__paints = [];
window.__cardStates = [];
const log = document.getElementById("log");
new MutationObserver((records) => {
  for (const record of records) {
    const node = record.target.nodeType === Node.TEXT_NODE ? record.target.parentElement : record.target;
    const answer = node && node.closest && node.closest(".answer");
    const turn = answer && answer.closest(".turn.assistant");
    if (answer && turn.dataset.state === "streaming") window.__paints.push(answer.textContent.length);
    if (record.type === "attributes" && node.classList.contains("card")) window.__cardStates.push(node.dataset.state);
  }
}).observe(log, {subtree: true, childList: true, characterData: true, attributes: true, attributeFilter: ["data-state"]});
"""


class Page:
    """The chat page in one browser."""

    def __init__(self, base_url, artifacts):
        self.url = base_url.rstrip("/") + "/ui/"
        self.artifacts = artifacts
        options = webdriver.ChromeOptions()
        options.binary_location = os.environ.get("PARLEY_CHROMIUM", "/usr/bin/chromium")
        for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                         "--disable-gpu", "--window-size=1280,1100", "--force-prefers-reduced-motion"):
            options.add_argument(argument)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        service = Service(executable_path=os.environ.get("PARLEY_CHROMEDRIVER", "/usr/bin/chromedriver"))
        self.driver = webdriver.Chrome(options=options, service=service)

    def close(self):
        self.driver.quit()

    def wait(self, what, condition, timeout=WAIT):
        try:
            # The page redraws parts of itself (the conversation list after
            # each turn): an element found a moment ago may be gone.
            return WebDriverWait(self.driver, timeout, poll_frequency=0.05,
                                 ignored_exceptions=[StaleElementReferenceException]).until(lambda _: condition())
        except TimeoutException:
            self.screenshot("failure")
            logs = "\n".join(str(entry) for entry in self.driver.get_log("browser"))
            raise AssertionError(f"timed out waiting for {what}; the log shows:\n"
                                 f"{self.text('#log')}\nbrowser console:\n{logs}") from None

    def find(self, css):
        return self.driver.find_elements(By.CSS_SELECTOR, css)

    def text(self, css):
        return self.js("return [...document.querySelectorAll(arguments[0])].map((e) => e.innerText).join('\\n')", css)

    def js(self, script, *args):
        return self.driver.execute_script(script, *args)

    def screenshot(self, name):
        path = self.artifacts / f"{name}.png"
        self.driver.save_screenshot(str(path))
        print(f"screenshot: {path}")

    def open(self, fragment=""):
        self.driver.get(self.url + fragment)
        self.wait("the page to start", lambda: self.js("return document.body.dataset.ready") == "true")

    def set_field(self, css, value):
        element = self.find(css)[0]
        element.clear()
        if value:
            element.send_keys(value)

    def set_page(self, page, tab="", state=""):
        self.set_field("#page", page)
        self.set_field("#tab", tab)
        self.js("document.getElementById('state').value = arguments[0]", state)
        self.find("#page-form button[type=submit]")[0].click()
        self.wait(f"DescribePage of {page}", lambda: "proposals:" in self.text("#page-info"))

    def turns(self):
        return self.find(".turn.assistant")

    def last_turn_state(self):
        turns = self.turns()
        return turns[-1].get_attribute("data-state") if turns else None

    def send(self, message):
        count = len(self.turns())
        self.set_field("#message", message)
        self.find("#send")[0].click()
        self.wait("the turn to start", lambda: len(self.turns()) > count or self.find(".refusal"))

    def wait_turn_end(self, states=("completed",)):
        self.wait(f"the turn to end as {states}", lambda: self.last_turn_state() in states)
        return self.turns()[-1]


def check(condition, message):
    if not condition:
        raise AssertionError(message)
    print(f"ok: {message}")


def token_from_the_fragment(page):
    # Dev auth takes any token; the page sends it with every call from now on.
    page.open("#token=browser-test-token")
    check(page.js("return sessionStorage.getItem('parley.token')") == "browser-test-token",
          "the token of the URL fragment is kept in sessionStorage")
    check(page.js("return location.hash") == "", "and taken out of the address bar")


def streamed_answer_and_accepted_card(page):
    page.set_page("tables_list")
    page.js(OBSERVE)
    page.send("Help me create a job tracker for my applications")
    page.wait("a card forming", lambda: page.find(".card"))
    page.screenshot("card-forming")
    turn = page.wait_turn_end()
    paints = page.js("return window.__paints")
    check(len(set(paints)) > 1, f"the answer was painted {len(set(paints))} times while it streamed (> 1)")
    check("job application tracker" in turn.find_element(By.CSS_SELECTOR, ".answer").text,
          "the answer is the model's text")
    check("SCHEMA_PROPOSAL" not in turn.text, "no marker reached the page")
    check(turn.find_elements(By.CSS_SELECTOR, "details.reasoning"), "the reasoning is collapsible")
    tool = turn.find_element(By.CSS_SELECTOR, ".tool")
    check("current_time" in tool.text and tool.get_attribute("data-state") == "done",
          "the current_time tool row ended done")
    card_states = page.js("return window.__cardStates")
    check(card_states.count("forming") > 1,
          f"the card was redrawn while forming ({card_states.count('forming')} times, then {card_states[-2:]})")
    card = turn.find_element(By.CSS_SELECTOR, ".card")
    check(card.get_attribute("data-state") == "validated", "the card is validated at complete")
    check("Job Applications" in card.text and "Company" in card.text, "the card shows the proposed table")
    page.screenshot("chat-page")
    card.find_element(By.XPATH, ".//button[normalize-space()='Accept']").click()
    page.wait("the card to be accepted", lambda: card.get_attribute("data-state") == "accepted")
    page.screenshot("card-accepted")
    # The scripted model answers "what now?" this way only when the prompt
    # says the card was accepted: RecordPayloadDecision reached the store.
    page.send("What now?")
    turn = page.wait_turn_end()
    check("You accepted the Job Applications table" in turn.text, "the model was told the card was accepted")
    chips = turn.find_elements(By.CSS_SELECTOR, ".chip")
    check([c.text for c in chips][:1] == ["Add sample data"], "suggested values are chips")
    conversations = page.text("#conversations")
    check("job tracker" in conversations.lower(), "the conversation is listed")


def chip_sends_its_value(page):
    count = len(page.turns())
    page.find(".turn.assistant:last-of-type .chip")[-1].click()
    page.wait("the chip's turn", lambda: len(page.turns()) > count)
    page.wait_turn_end()
    users = page.find(".turn.user")
    check(users[-1].text == "How should I use the Status column?", "a chip sends its value")


def approval_and_client_tool(page):
    page.find("#new-chat")[0].click()
    page.set_page("table_view", "rows",
                  '{"table": {"id": "tbl_jobs", "name": "Job Applications", "row_count": 2},'
                  ' "sample_rows": [{"id": 1, "Company": "Acme Corp"}, {"id": 2, "Company": "Globex"}]}')
    page.send("Find the applications at Walrus")
    turn = page.wait_turn_end(("awaiting_input",))
    prompt = turn.find_element(By.CSS_SELECTOR, "form.prompt")
    check("lookup_rows" in prompt.text, "an approval prompt names the tool")
    page.screenshot("approval")
    prompt.find_element(By.XPATH, ".//button[normalize-space()='Reject']").click()
    turn = page.wait_turn_end()
    check("lookup_rows" in turn.find_element(By.CSS_SELECTOR, ".tool").text, "the rejected call is a tool row")

    page.send("Let me pick the rows that got an interview")
    turn = page.wait_turn_end(("awaiting_input",))
    prompt = turn.find_element(By.CSS_SELECTOR, "form.prompt")
    check("ask_user_to_pick_rows" in prompt.text, "a client tool asks for its result")
    output = prompt.find_element(By.CSS_SELECTOR, "textarea")
    output.clear()
    output.send_keys('{"row_ids": [1, 2]}')
    prompt.find_element(By.XPATH, ".//button[normalize-space()='Send result']").click()
    turn = page.wait_turn_end()
    card = turn.find_element(By.CSS_SELECTOR, ".card")
    check(card.get_attribute("data-state") == "validated" and "Interview" in card.text,
          "the turn went on with the tool's result to a data proposal")


def reload_mid_turn(page):
    page.find("#new-chat")[0].click()
    page.set_page("tables_list")
    page.send("Answer slowly, please")
    page.wait("the first part", lambda: "first part" in page.text(".turn.assistant .answer"))
    check(page.last_turn_state() == "streaming", "the turn is running when the page reloads")
    running = page.js("return sessionStorage.getItem('parley.running')")
    check(running and '"seq"' in running, f"the running turn is remembered ({running})")
    page.driver.refresh()
    page.wait("the page to start again", lambda: page.js("return document.body.dataset.ready") == "true")
    page.wait("the resumed turn", lambda: page.find(".turn.assistant[data-resumed]"))
    page.screenshot("resumed")
    turn = page.wait_turn_end()
    check(turn.get_attribute("data-resumed") == "true", "the page followed the turn with ResumeTurn")
    check(turn.find_element(By.CSS_SELECTOR, ".answer").text ==
          "This answer comes in two parts. The first part streams now, and the second part arrives "
          "after a pause, once the page has been reloaded.",
          "after the reload the turn went on to its end")
    check(page.js("return sessionStorage.getItem('parley.running')") is None, "the finished turn is forgotten")
    check(page.text(".turn.user").count("Answer slowly, please") == 1, "the user message is shown once")


def stop_cancels_the_turn(page):
    page.send("Answer slowly, once more")
    page.wait("the first part",
              lambda: "first part" in page.turns()[-1].find_element(By.CSS_SELECTOR, ".answer").text)
    page.find("#stop")[0].click()
    turn = page.wait_turn_end(("cancelled",))
    check("first part" in turn.find_element(By.CSS_SELECTOR, ".answer").text,
          "Stop cancels the turn and keeps its partial answer")
    check(page.js("return sessionStorage.getItem('parley.running')") is None, "the cancelled turn is forgotten")


def a_listed_conversation_reads_back(page):
    # Clicked in the page: the list is redrawn after every turn.
    page.wait("the conversation in the list", lambda: page.js(
        "const b = [...document.querySelectorAll('#conversations button')]"
        ".find((b) => b.textContent.toLowerCase().includes('job tracker'));"
        "if (b) b.click(); return Boolean(b);"))
    page.wait("the stored conversation", lambda: "create a job tracker" in page.text(".turn.user").lower())
    page.wait("its stored card", lambda: page.find(".card[data-state=accepted]"))
    card = page.find(".card[data-state=accepted]")[0]
    check("Job Applications" in card.text, "a listed conversation reads back with its card, accepted")
    chips = page.find(".turn.assistant")[-1].find_elements(By.CSS_SELECTOR, ".chip")
    check([chip.text for chip in chips][:1] == ["Create a job tracker"], "its last answer keeps its chips")


def refused_request_shows_its_reason(page):
    page.set_field("#model", "no-such-model")
    page.send("Hello")
    page.wait("the refusal", lambda: page.find(".refusal"))
    refusal = page.text(".refusal")
    check("invalid_argument" in refusal, f"the refusal shows its code: {refusal!r}")
    check("MODEL_NOT_ALLOWED" in refusal, "the refusal shows its ErrorInfo reason")
    check("BadRequest" in refusal and "model" in refusal, "the refusal shows its field violation")
    page.screenshot("refused")
    page.set_field("#model", "")


def main():
    base_url, artifacts = sys.argv[1], Path(sys.argv[2])
    artifacts.mkdir(parents=True, exist_ok=True)
    page = Page(base_url, artifacts)
    try:
        token_from_the_fragment(page)
        streamed_answer_and_accepted_card(page)
        chip_sends_its_value(page)
        approval_and_client_tool(page)
        reload_mid_turn(page)
        stop_cancels_the_turn(page)
        a_listed_conversation_reads_back(page)
        refused_request_shows_its_reason(page)
        console = [entry["message"] for entry in page.driver.get_log("browser")]
        blocked = [line for line in console if "Content Security Policy" in line]
        check(not blocked, f"nothing the page does is blocked by its Content-Security-Policy {blocked}")
    finally:
        page.close()
    print("browser test: passed")


if __name__ == "__main__":
    main()
