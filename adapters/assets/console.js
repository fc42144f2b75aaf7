// The console's one script (no inline code anywhere: the pages' policy forbids it).
// 1. Partial updates: an element with data-poll is replaced by the fragment at that
//    address every second, until the fragment no longer asks to be polled.
// 2. The audit chain checked in this browser: every row's hash recomputed with Web
//    Crypto (SHA-256 over prevHash and the row's canonical JSON, RFC 8785) and the
//    newest signed checkpoint (a C2SP signed note) verified with Ed25519.
// 3. Conversations: an element with data-stream listens to the message stream at
//    that address and shows each new message of its conversation as it arrives
//    (as text); each time the stream opens, the list is read again.
"use strict";

function poll(element) {
  const url = element.getAttribute("data-poll");
  if (!url) return;
  setTimeout(async () => {
    try {
      const answer = await fetch(url, { credentials: "same-origin" });
      if (!answer.ok) { poll(element); return; }
      const holder = document.createElement("div");
      holder.innerHTML = await answer.text();
      const next = holder.firstElementChild;
      if (!next) return;
      element.replaceWith(next);
      poll(next);
    } catch (_) {
      poll(element);
    }
  }, 1000);
}

// RFC 8785: members sorted by UTF-16 code units (JavaScript's own string order),
// strings and numbers as JSON.stringify writes them.
function canonical(value) {
  if (value === null || typeof value !== "object") return JSON.stringify(value);
  if (Array.isArray(value)) return "[" + value.map(canonical).join(",") + "]";
  const keys = Object.keys(value).sort();
  return "{" + keys.map((k) => JSON.stringify(k) + ":" + canonical(value[k])).join(",") + "}";
}

// Timestamps as the chain seals them: UTC, six fraction digits.
function stamp(text) {
  const m = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(?:Z|[+-]00:?00)$/.exec(text || "");
  if (!m) return text;
  return m[1] + "." + ((m[2] || "") + "000000").slice(0, 6) + "Z";
}

function sealedFields(row) {
  return {
    action: row.action, actorEmail: row.actorEmail ?? null, actorId: row.actorId,
    affectedOrgId: row.affectedOrgId ?? null, chainKey: row.chainKey,
    createdAt: stamp(row.createdAt), details: row.details, id: row.id,
    idempotencyKey: row.idempotencyKey ?? null, occurredAt: stamp(row.occurredAt),
    orgId: row.orgId, outcome: row.outcome ?? null, redactionVersion: row.redactionVersion,
    seq: row.seq, service: row.service ?? null, targetId: row.targetId ?? null,
    targetType: row.targetType ?? null,
  };
}

const encoder = new TextEncoder();

function hex(buffer) {
  return Array.from(new Uint8Array(buffer), (b) => b.toString(16).padStart(2, "0")).join("");
}

function unbase64(text) {
  const raw = atob(text);
  const out = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i++) out[i] = raw.charCodeAt(i);
  return out;
}

// A verifier key `<name>+<key id hex>+<base64(0x01 ‖ public key)>`.
async function verifierKey(text) {
  const parts = text.trim().split("+");
  if (parts.length !== 3) throw new Error("the verifier key is malformed");
  const raw = unbase64(parts[2]);
  if (raw.length !== 33 || raw[0] !== 1) throw new Error("the verifier key is not Ed25519");
  const key = await crypto.subtle.importKey("raw", raw.slice(1), { name: "Ed25519" }, false, ["verify"]);
  return { name: parts[0], id: parts[1].toLowerCase(), key };
}

// A checkpoint note: `<origin>/audit/<chain>`, seq, hash, time, blank line, signatures.
async function openNote(note, verifier) {
  const split = note.indexOf("\n\n");
  if (split < 0) throw new Error("the checkpoint is not a signed note");
  const text = note.slice(0, split + 1);
  const lines = text.split("\n");
  const seq = Number(lines[1]);
  const hash = lines[2];
  const chain = (lines[0] || "").split("/audit/")[1];
  for (const line of note.slice(split + 2).split("\n")) {
    const m = /^\u2014 (\S+) (\S+)$/.exec(line);
    if (!m || m[1] !== verifier.name) continue;
    const blob = unbase64(m[2]);
    if (blob.length !== 68 || hex(blob.slice(0, 4)) !== verifier.id) continue;
    const ok = await crypto.subtle.verify({ name: "Ed25519" }, verifier.key, blob.slice(4), encoder.encode(text));
    if (ok) return { seq, hash, chain };
  }
  throw new Error("the checkpoint's signature does not verify");
}

// Checks JSON lines (a checkpoint line first, then the rows in seq order).
async function verifyLines(text, keyText) {
  const rows = [];
  const notes = [];
  for (const line of text.split("\n")) {
    if (!line.trim()) continue;
    const value = JSON.parse(line);
    if (typeof value.checkpoint === "string") notes.push(value.checkpoint); else rows.push(value);
  }
  if (rows.length === 0) return { ok: false, text: "no events in the file" };
  let previous = null;
  for (const row of rows) {
    const linked = previous === null
      ? (row.seq !== 1 || row.prevHash === "0".repeat(64))
      : (row.seq === previous.seq + 1 && row.prevHash === previous.hash);
    const digest = await crypto.subtle.digest("SHA-256", encoder.encode(row.prevHash + canonical(sealedFields(row))));
    if (!linked || hex(digest) !== row.hash) {
      return { ok: false, broken: row.seq, text: `broken at seq ${row.seq} (${rows.indexOf(row)} of ${rows.length} events valid before it)` };
    }
    previous = row;
  }
  let checkpoint = "no signed checkpoint";
  if (notes.length > 0) {
    if (!keyText) return { ok: false, text: "a checkpoint but no verifier key" };
    const verifier = await verifierKey(keyText);
    const signed = await openNote(notes[0], verifier);
    const at = rows.find((r) => r.seq === signed.seq);
    if (signed.chain !== rows[0].chainKey) return { ok: false, text: "the checkpoint is of another chain" };
    if (!at) return { ok: false, text: `the events end before the checkpoint at seq ${signed.seq} (truncated)` };
    if (at.hash !== signed.hash) return { ok: false, broken: signed.seq, text: `rewritten: seq ${signed.seq} differs from its signed checkpoint` };
    checkpoint = `checkpoint at seq ${signed.seq} verified`;
  }
  return { ok: true, text: `${rows.length} of ${rows.length} events valid, ${checkpoint}` };
}

async function show(target, work) {
  target.textContent = "checking…";
  try {
    const verdict = await work();
    target.textContent = verdict.text;
    target.setAttribute("data-ok", String(verdict.ok));
    if (verdict.broken !== undefined) target.setAttribute("data-broken-seq", String(verdict.broken));
  } catch (error) {
    target.textContent = "could not check: " + error.message;
    target.setAttribute("data-ok", "false");
  }
}

async function fetchText(url) {
  const answer = await fetch(url, { credentials: "same-origin" });
  if (!answer.ok) throw new Error(`${url} answered ${answer.status}`);
  return answer.text();
}

async function keyOf(url) {
  try { return await fetchText(url); } catch (_) { return ""; }
}

function personOf(id) {
  for (const item of document.querySelectorAll("#people [data-person]")) {
    if (item.dataset.person === id) return item.textContent;
  }
  return id;
}

function said(message) {
  const item = document.createElement("li");
  item.dataset.message = message.id;
  const author = document.createElement("strong");
  author.textContent = personOf(message.authorId);
  const when = document.createElement("small");
  when.textContent = message.createdAt;
  item.append(author, " ", when, document.createElement("br"), message.body);
  return item;
}

function listen(list) {
  const source = new EventSource(list.dataset.stream);
  // Each time the stream opens (the first time and after a break), the list is read
  // again: what arrived before it opened is shown too, and never twice.
  source.addEventListener("open", async () => {
    try {
      const answer = await fetch(location.href, { credentials: "same-origin" });
      const page = new DOMParser().parseFromString(await answer.text(), "text/html");
      const fresh = page.getElementById(list.id);
      if (answer.ok && fresh) {
        const arrived = Array.from(list.children).filter((item) => !fresh.querySelector(`[data-message="${CSS.escape(item.dataset.message || "")}"]`));
        list.replaceChildren(...fresh.children, ...arrived);
      }
    } catch (_) { /* the next message still arrives */ }
  });
  source.addEventListener("message", (event) => {
    let message;
    try { message = JSON.parse(event.data); } catch (_) { return; }
    if (message.conversationId !== list.dataset.conversation) return;
    if (list.querySelector(`[data-message="${CSS.escape(message.id)}"]`)) return;
    list.append(said(message));
  });
}

document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll("[data-poll]").forEach(poll);
  document.querySelectorAll("ol[data-stream]").forEach(listen);

  // A copy button copies the field it names (a new token, shown once).
  document.querySelectorAll("button[data-copy]").forEach((button) => {
    button.addEventListener("click", async () => {
      const field = document.getElementById(button.dataset.copy);
      if (!field) return;
      field.select();
      try {
        await navigator.clipboard.writeText(field.value);
        button.textContent = "Copied";
      } catch (_) {
        button.textContent = "Selected: press Ctrl+C";
      }
    });
  });

  const browser = document.getElementById("browser-verdict");
  if (browser) {
    show(browser, async () => verifyLines(await fetchText(browser.dataset.chain), await keyOf(browser.dataset.key)));
  }

  const zone = document.getElementById("dropzone");
  const input = document.getElementById("chain-file");
  const verdict = document.getElementById("file-verdict");
  if (zone && input && verdict) {
    const check = (file) => show(verdict, async () => verifyLines(await file.text(), await keyOf(zone.dataset.key)));
    input.addEventListener("change", () => { if (input.files && input.files[0]) check(input.files[0]); });
    zone.addEventListener("dragover", (e) => { e.preventDefault(); zone.classList.add("over"); });
    zone.addEventListener("dragleave", () => zone.classList.remove("over"));
    zone.addEventListener("drop", (e) => {
      e.preventDefault();
      zone.classList.remove("over");
      if (e.dataTransfer && e.dataTransfer.files[0]) check(e.dataTransfer.files[0]);
    });
  }
});
