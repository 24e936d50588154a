// A small syntax highlighter for the code blocks of answers (toolwire's own, no dependency).
//
// It colours what most languages share: comments, strings, numbers and keywords (one set per family, a
// generic set for the rest). It builds text nodes and spans, never HTML, so it cannot undo the sanitiser;
// the code's text is unchanged (copying or selecting it gives the same characters).

const WORDS = {
  python: "and as assert async await break class continue def del elif else except False finally for from global if import in is lambda None nonlocal not or pass raise return True try while with yield self",
  js: "async await break case catch class const continue default delete do else export extends false finally for from function if import in instanceof let new null of return static super switch this throw true try typeof undefined var void while yield",
  sql: "add all alter and as asc between by case create delete desc distinct drop else end exists from full group having in index inner insert into is join key left like limit not null on or order outer primary references right select set table then union update values when where with count sum avg min max",
  shell: "case do done echo elif else esac exit export fi for function if in local read return set then until while",
  generic: "and as async await break case catch class const continue def default do else enum export false finally fn for from func function if impl import in interface let match module mut new nil none not null or package pub return self static struct super switch this throw true try type use var void while yield",
};
const FAMILY = {
  py: "python", python: "python",
  js: "js", javascript: "js", ts: "js", typescript: "js", jsx: "js", tsx: "js", json: "js", mjs: "js",
  sql: "sql", postgresql: "sql", sqlite: "sql", mysql: "sql",
  sh: "shell", bash: "shell", shell: "shell", zsh: "shell", console: "shell",
};
const SETS = Object.fromEntries(Object.entries(WORDS).map(([family, words]) => [family, new Set(words.split(" "))]));

// Comment syntax per family: line comments, and whether /* */ blocks exist.
const COMMENTS = { python: ["#"], shell: ["#"], sql: ["--"], js: ["//"], generic: ["//", "#"] };
const BLOCKS = { js: true, sql: true, generic: true };

function pattern(family) {
  const line = COMMENTS[family].map((c) => `${c.replace(/[/]/g, "\\/")}[^\\n]*`);
  const parts = [
    ...(BLOCKS[family] ? ["\\/\\*[\\s\\S]*?(?:\\*\\/|$)"] : []),
    ...line,
    '"""[\\s\\S]*?(?:"""|$)', // Python docstrings before plain strings
    '"(?:[^"\\\\\\n]|\\\\.)*"?',
    "'(?:[^'\\\\\\n]|\\\\.)*'?",
    "`(?:[^`\\\\]|\\\\.)*`?",
    "\\b\\d[\\d_]*(?:\\.\\d+)?(?:[eE][+-]?\\d+)?\\b|\\b0x[\\da-fA-F]+\\b",
    "[A-Za-z_][\\w]*",
  ];
  return new RegExp(parts.join("|"), "g");
}

function kind(token, family) {
  const first = token[0];
  if (token.startsWith("/*") || COMMENTS[family].some((c) => token.startsWith(c))) return "com";
  if (first === '"' || first === "'" || first === "`") return "str";
  if (/\d/.test(first)) return "num";
  const words = SETS[family];
  if (words.has(family === "sql" ? token.toLowerCase() : token)) return "kw";
  return null;
}

/** Colour the text of `code` (an element holding only text) for `language` (a fence's info word, maybe empty). */
export function highlight(code, language = "") {
  const family = FAMILY[language.toLowerCase()] || "generic";
  const text = code.textContent;
  const out = document.createDocumentFragment();
  const re = pattern(family);
  let last = 0;
  for (let match = re.exec(text); match !== null; match = re.exec(text)) {
    if (match[0] === "") {
      re.lastIndex += 1;
      continue;
    }
    const type = kind(match[0], family);
    if (!type) continue;
    if (match.index > last) out.append(text.slice(last, match.index));
    const span = document.createElement("span");
    span.className = `tok-${type}`;
    span.textContent = match[0];
    out.append(span);
    last = match.index + match[0].length;
  }
  if (last === 0) return; // nothing to colour
  out.append(text.slice(last));
  code.replaceChildren(out);
}
