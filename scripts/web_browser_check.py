#!/usr/bin/python3
"""The operator's page in a real browser (Debian's chromium + chromedriver, headless),
against `adplayerd web` beside a real daemon that plays an episode with an overlay.

    web_browser_check.py URL ADPLAYERCTL SOCKET ARTIFACT_DIR

Checks, in order (each waits at most 20 s: a bound for a failing run, not a timing claim):
1. the page shows the episode playing and its overlay, hardware decoding in words;
2. after `adplayerctl pause` (another client), the page shows `paused` and no ad — with no
   reload: a marker set on the page before the pause is still there after;
   its proof of play lists the overlay's play with what the screen showed (headless here:
   `unverified: no output`, each check with its time in the cell's title);
3. the page's Play button plays (the daemon's own status says so), its Pause button pauses;
4. a screenshot of the page is saved to ARTIFACT_DIR/web-page.png;
5. with every event stream taken, a new page is refused (503, Retry-After) and says so; once
   the streams are free it follows again by itself and shows what happened meanwhile.

Prints one JSON object (the figures: how long the page took to show the pause, in ms) and
exits 0; on a failed check, says which on stderr and exits 1.
"""
import json
import os
import re
import subprocess
import sys
import time

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

url, ctl, socket, artifacts = sys.argv[1:5]


def fail(message):
    print("web_browser_check: " + message, file=sys.stderr)
    sys.exit(1)


def daemon_status():
    out = subprocess.run([ctl, "--socket", socket, "--json", "status"], capture_output=True, text=True, timeout=20)
    return json.loads(out.stdout)["result"]


options = Options()
for argument in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,1400",
                 "--no-proxy-server", "--user-data-dir=" + os.path.join(artifacts, "chromium-profile")]:
    options.add_argument(argument)
options.binary_location = "/usr/bin/chromium"
driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
result = {}
try:
    driver.get(url)
    wait = WebDriverWait(driver, 20, poll_frequency=0.02)

    def field(name):
        return driver.find_element(By.CSS_SELECTOR, '[data-field="%s"]' % name).text

    def until(what, condition):
        try:
            wait.until(lambda _: condition())
        except Exception:
            fail("%s (state=%r item=%r ad=%r health=%r)" % (what, field("state"), field("item"), field("ad"), field("health")))

    until("the page shows the episode playing with its overlay",
          lambda: field("state") == "playing" and "episode" in field("item") and field("ad").startswith("overlay"))
    result["health"] = field("health")
    if field("health") not in ("ok", "degraded", "failing"):
        fail("no health verdict on the page: %r" % field("health"))
    # Hardware decoding in words a person uses ("not asked for, not in use"), not mpv's values.
    result["hwdec"] = field("hwdec")
    if not re.fullmatch(r"(–|not asked for|asked for \(\S+\)), (–|not in use|in use \(\S+\))", result["hwdec"]):
        fail("hardware decoding not said as a person would: %r" % result["hwdec"])
    driver.execute_script("window.__notReloaded = true;")

    started = time.monotonic()
    paused = subprocess.run([ctl, "--socket", socket, "pause"], capture_output=True, text=True, timeout=20)
    if paused.returncode != 0:
        fail("adplayerctl pause: " + paused.stderr)
    until("the page shows paused and the overlay gone", lambda: field("state") == "paused" and field("ad") == "none")
    result["pause_shown_ms"] = round((time.monotonic() - started) * 1000, 1)
    if driver.execute_script("return window.__notReloaded === true;") is not True:
        fail("the page was reloaded to show the pause")

    def display_cell():
        cells = driver.find_elements(By.CSS_SELECTOR, '[data-field="plays"] td.display')
        return (cells[0].text, cells[0].get_attribute("title")) if cells else ("", "")
    until("the page's proof of play shows the play's display evidence",
          lambda: display_cell()[0] == "unverified: no output" and "pixels no grab: no output at 20" in display_cell()[1])
    # Its loudness column (R28): an overlay has no sound to level.
    loudness = driver.find_elements(By.CSS_SELECTOR, '[data-field="plays"] td.loudness')
    if not loudness or loudness[0].text != "–":
        fail("the overlay's play shows a loudness: %r" % (loudness[0].text if loudness else None))

    driver.find_element(By.CSS_SELECTOR, '[data-action="play"]').click()
    until("the Play button plays (the daemon says playing)", lambda: daemon_status()["playing"] is True)
    until("the page shows playing again", lambda: field("state") == "playing")
    driver.find_element(By.CSS_SELECTOR, '[data-action="pause"]').click()
    until("the Pause button pauses (the daemon says paused)", lambda: daemon_status()["playing"] is False)
    until("the page shows paused again", lambda: field("state") == "paused")

    os.makedirs(artifacts, exist_ok=True)
    path = os.path.join(artifacts, "web-page.png")
    driver.save_screenshot(path)
    result["screenshot"] = path

    # 5. A page opened while every event stream is taken is refused (503 with Retry-After),
    #    says so, and recovers by itself once streams are free: it shows what happened meanwhile.
    from urllib.parse import urlparse
    import socket as sockets
    where = urlparse(url)
    taken = []
    for _ in range(31):   # with this page's own: all 32
        s = sockets.create_connection((where.hostname, where.port), timeout=10)
        s.sendall(("GET /events HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (where.hostname, where.port)).encode())
        taken.append(s)
    for s in taken:
        if not s.recv(4096).startswith(b"HTTP/1.1 200"):
            fail("an event stream was refused before the cap")
    refused = sockets.create_connection((where.hostname, where.port), timeout=10)
    refused.sendall(("GET /events HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (where.hostname, where.port)).encode())
    answer = refused.recv(4096)
    refused.close()
    if not answer.startswith(b"HTTP/1.1 503") or b"Retry-After" not in answer:
        fail("past the cap, not a 503 with Retry-After: %r" % answer[:200])
    driver.switch_to.new_window("tab")
    driver.get(url)
    until("a page refused its stream says the web server is not answering", lambda: field("daemon") == "web server not answering")
    for s in taken:
        s.close()
    played = subprocess.run([ctl, "--socket", socket, "play"], capture_output=True, text=True, timeout=20)
    if played.returncode != 0:
        fail("adplayerctl play: " + played.stderr)
    until("the refused page recovers and shows what happened meanwhile (playing)",
          lambda: field("daemon") == "daemon answers" and field("state") == "playing")
    print(json.dumps(result))
finally:
    driver.quit()
