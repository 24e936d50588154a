// Form fields built from a JSON schema's properties, shared by a client tool's form (cards.js) and a tool's
// question (questions.js): one labelled field per property, its JSON type picking the input (an enum a
// select), required ones marked; and the values read back, typed.

import { element } from "./page.js";

// The input a property gets: its declared type, else (no schema) the type of the value it is prefilled with.
export function fieldKind(prop, value) {
  const declared = Array.isArray(prop?.type) ? prop.type.find((t) => t !== "null") : prop?.type;
  if (prop?.enum) return "enum";
  if (declared === "integer") return "number";
  if (["boolean", "number", "string"].includes(declared)) return declared;
  if (declared) return "json";
  return typeof value === "boolean" || typeof value === "number" || typeof value === "string" ? typeof value : "json";
}

export function fieldInput(id, kind, prop, value) {
  if (kind === "boolean") {
    const input = element("input", { id, type: "checkbox" });
    input.checked = !!value;
    return input;
  }
  if (kind === "enum") {
    const input = element("select", { id });
    for (const option of prop.enum) input.append(element("option", { value: JSON.stringify(option) }, String(option)));
    if (value !== undefined) input.value = JSON.stringify(value);
    return input;
  }
  if (kind === "number") {
    const input = element("input", { id, type: "number", step: prop?.type === "integer" ? "1" : "any" });
    input.value = value === undefined || value === null ? "" : String(value);
    return input;
  }
  if (kind === "string") {
    const text = typeof value === "string" ? value : "";
    const input = element(text.length > 60 ? "textarea" : "input", { id, type: text.length > 60 ? null : "text" });
    input.value = text;
    return input;
  }
  const input = element("textarea", { id, class: "json-field" });
  input.value = value === undefined ? "" : JSON.stringify(value, null, 2);
  return input;
}

/** One labelled field appended to `form`: `[name, kind, input, needed]`, as `readFields` takes it. A required
 * field is marked for the eye (an asterisk screen readers skip) and for assistive technology (`required`). */
export function addField(form, id, name, prop, value, { required = false, needed = required } = {}) {
  const kind = fieldKind(prop, value);
  const label = element("label", { for: id }, prop?.title || name || "Answer");
  const input = fieldInput(id, kind, prop, value);
  if (required && kind !== "boolean") {
    input.required = true;
    label.append(element("span", { class: "required-mark", "aria-hidden": "true" }, " *"));
  }
  if (prop?.description) input.setAttribute("aria-description", prop.description);
  const row = element("div", { class: "field" });
  row.append(label, input);
  form.append(row);
  return [name, kind, input, needed];
}

/** `{value}`: the fields' values as one object (a field named null is the whole value), an optional field
 * left empty left out; null, with the problem in `error` and the focus on the field, when a JSON field does
 * not parse. */
export function readFields(fields, error) {
  let output = {};
  for (const [name, kind, input, needed] of fields) {
    if (kind !== "boolean" && input.value === "" && !needed) continue; // an optional field left empty
    let value;
    if (kind === "boolean") value = input.checked;
    else if (kind === "number") value = input.value === "" ? null : Number(input.value);
    else if (kind === "string") value = input.value;
    else {
      try {
        value = JSON.parse(input.value);
      } catch {
        error.textContent = `${name}: not valid JSON`;
        input.focus();
        return null;
      }
    }
    if (name === null) output = value;
    else output[name] = value;
  }
  return { value: output };
}
