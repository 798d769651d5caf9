"""What the browser tests share: signing in by keyboard, screenshots that check every control's
name, and moving the focus with Tab."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.sync_api import Page, expect

from tests.plugins.live_api import LiveApi

__all__ = ["shoot", "sign_in", "tab_to"]

UNNAMED_CONTROLS = """() => {
  const text = (node) => (node ? node.textContent : "") || "";
  const missing = [];
  const controls = document.querySelectorAll(
    "a[href], button, input:not([type=hidden]), select, textarea, summary, [tabindex]");
  for (const el of controls) {
    let name = el.getAttribute("aria-label") || "";
    const labelledBy = el.getAttribute("aria-labelledby");
    if (!name && labelledBy) {
      name = labelledBy.split(/\\s+/).map((id) => text(document.getElementById(id))).join(" ");
    }
    if (!name && el.labels && el.labels.length) {
      name = Array.from(el.labels).map(text).join(" ");
    }
    if (!name && ["A", "BUTTON", "SUMMARY"].includes(el.tagName)) { name = text(el); }
    if (!name && el.id === "main") { name = "main"; }
    if (!name) { name = el.getAttribute("title") || ""; }
    if (!name.trim()) { missing.push(el.outerHTML.slice(0, 160)); }
  }
  for (const svg of document.querySelectorAll("svg[role=img]")) {
    const id = svg.getAttribute("aria-labelledby");
    if (!id || !text(document.getElementById(id)).trim()) {
      missing.push(svg.outerHTML.slice(0, 160));
    }
  }
  return missing;
}"""


def shoot(page: Page, shots: Path, name: str) -> None:
    """Save a full-page screenshot, and check that every control on it has a name."""
    page.screenshot(path=shots / f"{name}.png", full_page=True)
    assert page.evaluate(UNNAMED_CONTROLS) == [], f"controls without a name on {name}"


def sign_in(page: Page, api: LiveApi, token: str, *, shots: Path | None = None) -> None:
    """Sign in through the form with the keyboard only: type the token, press Enter."""
    page.goto(f"{api.base_url}/ui/")
    expect(page).to_have_url(re.compile(r"/ui/login\?next="))
    expect(page.get_by_label("Token")).to_be_focused()  # autofocus: type straight away
    if shots is not None:
        shoot(page, shots, "sign-in")
    page.keyboard.type(token)
    page.keyboard.press("Enter")
    expect(page).to_have_url(f"{api.base_url}/ui/runs")
    assert token not in page.url
    assert token not in page.content()
    assert page.evaluate("document.cookie") == "", "the session cookie is HttpOnly"
    assert page.evaluate("JSON.stringify(localStorage) + JSON.stringify(sessionStorage)") == (
        "{}{}"
    )


def tab_to(page: Page, name: str, *, limit: int = 60) -> None:
    """Press Tab until the focused element's text is ``name``."""
    for _ in range(limit):
        page.keyboard.press("Tab")
        focused = page.evaluate(
            "() => (document.activeElement.innerText || document.activeElement.value || '')"
        )
        if focused.strip() == name:
            return
    raise AssertionError(f"Tab never reached {name!r}")
