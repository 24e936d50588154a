"""The web page of ``test_browser_origin.py``, and a tiny HTTP server that serves it on a loopback port
(another origin than the toolwire server's).

The page tries, against the toolwire server named in its query string (``tw``, ``ws``), what any page the
developer visits could try against a development server, and leaves what it saw in ``window.__results``:

- ``plain``: a "simple" POST (``text/plain``, ``mode: "no-cors"``: no preflight) that would start a run;
- ``json``: the same turn as a CORS request with ``application/json`` (preflighted);
- ``ws``: a WebSocket to a session, sending a user message once open;
- ``read``: ``fetch`` of the session list, reading the body.

A parameter that is absent skips its attempt. Relative URLs work too (``tw=`` empty: the page's origin).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>a page on another origin</title></head>
<body><p>Nothing to see here.</p>
<script>
const q = new URLSearchParams(location.search);
const tw = q.get("tw") || "";
const results = {};

async function attempt(name, fn) {
  try { results[name] = await fn(); } catch (e) { results[name] = {error: String(e)}; }
}

function socket(url, text) {
  return new Promise((resolve) => {
    const seen = [];
    let ws;
    try { ws = new WebSocket(url); } catch (e) { resolve({error: String(e), seen}); return; }
    const done = () => resolve({seen});
    ws.onopen = () => { seen.push("open"); ws.send(JSON.stringify({type: "user-message", text})); };
    ws.onmessage = (m) => { seen.push("message " + m.data); if (seen.length > 2) ws.close(); };
    ws.onerror = () => seen.push("error");
    ws.onclose = (e) => { seen.push("close " + e.code); done(); };
    setTimeout(() => { seen.push("timeout"); done(); }, 4000);
  });
}

async function main() {
  if (q.has("plain")) await attempt("plain", async () => {
    const r = await fetch(tw + "/api/sessions/" + q.get("plain") + "/messages", {
      method: "POST", mode: "no-cors", headers: {"content-type": "text/plain"},
      body: JSON.stringify({text: "secret leaked"}),
    });
    return {type: r.type, status: r.status};
  });
  if (q.has("json")) await attempt("json", async () => {
    const r = await fetch(tw + "/api/sessions/" + q.get("json") + "/messages", {
      method: "POST", headers: {"content-type": "application/json"},
      body: JSON.stringify({text: "secret leaked"}),
    });
    return {type: r.type, status: r.status, body: await r.text()};
  });
  if (q.has("ws")) await attempt("ws", () => socket(q.get("ws"), "secret leaked over ws"));
  if (q.has("read")) await attempt("read", async () => {
    const r = await fetch(tw + "/api/sessions");
    return {type: r.type, status: r.status, body: await r.text()};
  });
  window.__results = results;
  document.title = "done";
}
main();
</script></body></html>
"""


class _PageHandler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = PAGE.encode()
        self.send_response(200)
        self.send_header("content-type", "text/html; charset=utf-8")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def page_server() -> Iterator[int]:
    """Serve :data:`PAGE` on ``127.0.0.1:<port>``; yields the port."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _PageHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
