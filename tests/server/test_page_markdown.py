"""Answers are markdown: rendered (vendored marked + DOMPurify), readable, and never a way to run code.

The hostile test streams an answer full of script-bearing HTML and ``javascript:`` links in small deltas,
so every partial state is rendered too, in a page whose Content-Security-Policy is bypassed: only the
page's own sanitising stands between the answer and the browser. A mutation observer records every
element the transcript ever held.
"""

from __future__ import annotations

import json
from pathlib import Path

from playwright.sync_api import Page, expect

from tests.server.test_page import OpenPage, Serve, assistant, connected, replying, send

pytest_plugins = ["tests.server.test_page"]  # its fixtures: a browser, pages, servers

VENDOR = Path(__file__).parents[2] / "src" / "toolwire" / "server" / "static" / "vendor"

ANSWER = """## Results

- **Paris**: 12 units
- *Oslo*: 7 units

```python
def total(units):
    return sum(units)
```

| city | units |
| --- | --- |
| Paris | 12 |

See [the docs](https://example.com/docs) or call `total()`."""

HOSTILE = """Safe **bold** start.

<img src=x onerror="window.__pwned='img'">

[click me](javascript:window.__pwned='link')

[data link](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)

![picture](javascript:window.__pwned='image')

<script>window.__pwned='script'</script>

<a href="javascript:window.__pwned='anchor'">raw anchor</a> <svg onload="window.__pwned='svg'"></svg>

<iframe src="javascript:window.__pwned='iframe'"></iframe>

<details open ontoggle="window.__pwned='details'">toggle</details>

<form action="javascript:window.__pwned='form'"><button>go</button></form>

Inline <b onmouseover="window.__pwned='b'">hover</b> and [fine](https://example.com/fine) end."""

# Records whatever the transcript ever holds that could run script or navigate to a script URL.
WATCH = """
window.__offences = [];
window.__lengths = new Set();
const BAD_URL = /^\\s*(javascript|vbscript|data):/i;
const BAD_TAGS = new Set(["SCRIPT", "IFRAME", "OBJECT", "EMBED", "SVG", "IMG", "FORM", "STYLE", "BASE", "META"]);
function inspect(node) {
  if (node.nodeType !== 1) return;
  for (const el of [node, ...node.querySelectorAll("*")]) {
    if (BAD_TAGS.has(el.tagName.toUpperCase())) window.__offences.push("tag " + el.tagName);
    for (const attr of el.attributes) {
      if (/^on/i.test(attr.name)) window.__offences.push("attribute " + attr.name);
      if (/^(href|src|action|formaction|xlink:href|srcdoc|data)$/i.test(attr.name) && BAD_URL.test(attr.value)) {
        window.__offences.push(attr.name + "=" + attr.value);
      }
    }
  }
}
new MutationObserver((records) => {
  const transcript = document.getElementById("transcript");
  for (const r of records) {
    if (!transcript || !transcript.contains(r.target)) continue;
    if (r.type === "attributes") inspect(r.target);
    for (const n of r.addedNodes) inspect(n);
    const bubble = transcript.querySelector('[data-role="assistant"] .text');
    if (bubble) window.__lengths.add(bubble.textContent.length);
  }
}).observe(document, { subtree: true, childList: true, attributes: true });
"""


def test_answers_render_as_readable_markdown(page: Page, serve: Serve) -> None:
    running = serve(replying(ANSWER))
    connected(page, f"{running.url}/?session=md")
    send(page, "Show **me** <b>the</b> numbers")

    answer = assistant(page)
    expect(answer.get_by_role("heading", name="Results", level=2)).to_be_visible(timeout=10_000)
    expect(answer.get_by_role("listitem")).to_have_text(["Paris: 12 units", "Oslo: 7 units"])
    expect(answer.locator("strong")).to_have_text("Paris")
    expect(answer.get_by_role("cell", name="Paris")).to_be_visible()
    link = answer.get_by_role("link", name="the docs")
    expect(link).to_have_attribute("href", "https://example.com/docs")
    expect(link).to_have_attribute("target", "_blank")
    expect(link).to_have_attribute("rel", "noopener noreferrer")

    # the code block keeps its lines and indentation, in a monospace font, inside the bubble
    code = answer.locator("pre")
    expect(code).to_have_text("def total(units):\n    return sum(units)\n")
    font = code.evaluate("el => getComputedStyle(el.querySelector('code')).fontFamily")
    assert "mono" in font.lower(), font
    code_box, bubble_box = code.bounding_box(), answer.bounding_box()
    assert (
        code_box and bubble_box and code_box["x"] + code_box["width"] <= bubble_box["x"] + bubble_box["width"]
    )

    # what the person typed is shown as typed, markdown and tags included
    user = page.locator('[data-testid="message"][data-role="user"]')
    expect(user).to_have_text("Show **me** <b>the</b> numbers")
    expect(user.locator("strong, b")).to_have_count(0)


def test_hostile_markdown_streamed_in_deltas_never_runs_or_survives(
    open_page: OpenPage, serve: Serve
) -> None:
    running = serve(replying(HOSTILE, chunk_size=7, pause=0.005))
    page = open_page(bypass_csp=True)  # the sanitiser alone must hold
    page.add_init_script(WATCH)
    connected(page, f"{running.url}/?session=xss")
    send(page, "Say something nasty")

    answer = assistant(page)
    expect(answer).to_contain_text("and fine end.", timeout=15_000)
    page.wait_for_timeout(300)  # anything an image error or a toggle would run has run by now

    assert page.evaluate("window.__lengths.size") >= 10, "the answer was not rendered delta by delta"
    assert page.evaluate("window.__offences") == []
    assert page.evaluate("window.__pwned") is None
    # the safe parts render; the dangerous markup is shown as text, the script links are inert text
    expect(answer.locator("strong")).to_have_text("bold")
    expect(answer.get_by_role("link", name="fine")).to_have_attribute("href", "https://example.com/fine")
    expect(answer).to_contain_text("<img src=x onerror=")
    expect(answer).to_contain_text("<script>")
    for name in ("click me", "data link", "picture"):
        expect(answer.get_by_text(name, exact=True)).to_be_visible()
        expect(answer.get_by_role("link", name=name)).to_have_count(0)  # an <a> with no href is no link
    answer.get_by_text("click me", exact=True).click()
    answer.get_by_text("hover").hover()
    assert page.evaluate("window.__pwned") is None
    assert page.evaluate("window.__offences") == []


def test_vendored_libraries_are_the_pinned_npm_files() -> None:
    """The page's copies of marked and DOMPurify are the files of the versions package.json pins."""
    node = Path(__file__).parent / "node"
    pinned = json.loads((node / "package.json").read_text())["dependencies"]
    readme = (VENDOR / "README.md").read_text()
    copies = {
        "marked.esm.js": ("marked", "lib/marked.esm.js"),
        "purify.min.js": ("dompurify", "dist/purify.min.js"),
    }
    for copy, (package, path) in copies.items():
        installed = node / "node_modules" / package
        assert json.loads((installed / "package.json").read_text())["version"] == pinned[package]
        assert (VENDOR / copy).read_bytes() == (installed / path).read_bytes(), (
            f"{copy} is not {package}'s {path}"
        )
        assert (VENDOR / f"{package}.LICENSE").read_bytes() == (installed / "LICENSE").read_bytes()
        assert f"| `{copy}` | [{package}]" in readme and f"| {pinned[package]} |" in readme
