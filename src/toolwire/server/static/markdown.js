// Answers as markdown (vendor/marked), sanitised by vendor/purify.min.js (DOMPurify, loaded as a classic script
// before the modules), code blocks coloured by highlight.js with a copy button; and copying to the clipboard.

import { Marked } from "./vendor/marked.esm.js";
import { app, element, escapeHtml } from "./page.js";
import { highlight } from "./highlight.js";

// Raw HTML in an answer is shown as text; images become links (the CSP loads no foreign image anyway).
// DOMPurify then removes whatever is left that could run or navigate somewhere unsafe.
const markdown = new Marked(
  { gfm: true, breaks: false, async: false },
  {
    renderer: {
      html: ({ text }) => escapeHtml(text),
      // The fence's language as a data attribute: the sanitiser drops classes, and the highlighter reads it.
      code: ({ text, lang }) => `<pre><code data-lang="${escapeHtml((lang || "").split(/\s/)[0])}">${escapeHtml(text)}</code></pre>\n`,
      image: ({ href, text }) => `<a href="${escapeHtml(href)}">${escapeHtml(text || href)}</a>`,
    },
  },
);

const PURIFY = {
  ALLOWED_URI_REGEXP: /^(?:https?:|mailto:|#)/i,
  FORBID_TAGS: ["style", "form", "input", "button", "textarea", "select", "img", "svg", "math", "iframe"],
  FORBID_ATTR: ["style", "class", "id", "name"],
  RETURN_DOM_FRAGMENT: true,
};

const purify = globalThis.DOMPurify;

if (purify?.addHook) {
  purify.addHook("afterSanitizeAttributes", (node) => {
    if (node.tagName === "A" && node.getAttribute("href")) {
      node.setAttribute("target", "_blank");
      node.setAttribute("rel", "noopener noreferrer");
    }
  });
}

export function renderMarkdown(text) {
  const box = element("div", { class: "text markdown" });
  if (!purify?.sanitize) {
    box.className = "text"; // no sanitiser loaded: plain text, never unsanitised HTML
    box.textContent = text;
    return box;
  }
  const html = purify.sanitize(markdown.parse(text), PURIFY);
  for (const wide of html.querySelectorAll("pre, table")) wide.tabIndex = 0; // they scroll: reachable by keyboard
  for (const pre of html.querySelectorAll("pre")) {
    const code = pre.querySelector("code") || pre;
    highlight(code, code.getAttribute("data-lang") || "");
    const block = element("div", { class: "code-block" });
    const copy = element("button", { type: "button", class: "copy", "data-testid": "copy-code", "aria-label": "Copy code" }, "Copy");
    copy.addEventListener("click", () => copyText(code.textContent, copy));
    pre.replaceWith(block);
    block.append(copy, pre);
  }
  box.append(html);
  return box;
}

// -- copying ------------------------------------------------------------------------------------------
export async function copyText(text, button) {
  let copied = false;
  try {
    await navigator.clipboard.writeText(text);
    copied = true;
  } catch {
    copied = legacyCopy(text); // no clipboard API (an http address on a LAN is not a secure context)
  }
  const label = button.dataset.label || button.textContent;
  button.dataset.label = label;
  button.textContent = copied ? "Copied" : "Not copied";
  app.announce(copied ? "Copied." : "Could not copy.");
  setTimeout(() => (button.textContent = label), 1500); // the label comes back; nothing waits on this
}

function legacyCopy(text) {
  const area = element("textarea", { readonly: "", "aria-hidden": "true", class: "offscreen" });
  area.value = text;
  document.body.append(area);
  area.select();
  let done = false;
  try {
    done = document.execCommand("copy");
  } catch {
    done = false;
  }
  area.remove();
  return done;
}
