// API tokens: the signed-in user's list, creation (the key is shown once, here, and is kept
// nowhere by the console) and revocation.

import { call, get } from "./api.js";
import { el, formatTime, notice, table, unwrap } from "./dom.js";

const DAY = 86400;
const LIFETIMES = [
  ["", "never"],
  [String(30 * DAY), "in 30 days"],
  [String(90 * DAY), "in 90 days"],
  [String(365 * DAY), "in a year"],
];

async function drawList(box, refresh) {
  const answer = await get("/tokens", { sort_by: "-created_at" });
  const rows = answer.data.tokens;
  box.replaceChildren(
    rows.length
      ? table(
          [
            ["Name", (row) => unwrap(row.name) || ""],
            ["Id", (row) => row.id],
            ["Created", (row) => formatTime(row.created_at)],
            ["Last used", (row) => formatTime(row.last_access)],
            ["Expires", (row) => formatTime(unwrap(row.expires_at)) || "never"],
            [
              "",
              (row) => {
                const button = el("button", { type: "button", class: "revoke danger", "data-token-id": row.id }, "Revoke");
                button.addEventListener("click", async () => {
                  if (!window.confirm(`Revoke the token ${unwrap(row.name) || row.id}? Scripts using it stop working.`)) return;
                  try {
                    await call("DELETE", `/tokens/${encodeURIComponent(row.id)}`);
                    // A key still shown for this token names nothing any more.
                    if (document.getElementById("new-token-id")?.textContent === row.id) {
                      document.getElementById("new-token")?.replaceChildren();
                    }
                    await refresh();
                  } catch (error) {
                    box.prepend(notice(error.message));
                  }
                });
                return button;
              },
            ],
          ],
          rows,
          { class: "tokens", id: "token-table" },
        )
      : el("p", { id: "token-table" }, "No tokens yet."),
  );
}

export async function showTokens(page, _rest, current) {
  const list = el("div", {});
  const shown = el("div", { id: "new-token" });
  const name = el("input", { id: "token-name", required: true, maxlength: 250, placeholder: "what the token is for", "aria-label": "token name" });
  const lifetime = el(
    "select",
    { id: "token-lifetime", "aria-label": "expires" },
    LIFETIMES.map(([seconds, label]) => el("option", { value: seconds }, label)),
  );
  const form = el("form", { class: "controls", id: "token-form" }, name, el("label", {}, "expires ", lifetime), el("button", { type: "submit" }, "Create token"));
  const refresh = () => drawList(list, refresh);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const body = { token_name: name.value };
      if (lifetime.value) body.lifetime_seconds = Number(lifetime.value);
      const answer = await call("POST", "/tokens", { body });
      const token = answer.data;
      name.value = "";
      shown.replaceChildren(
        el(
          "div",
          { class: "card secret" },
          el("p", {}, "Copy the key now: it is not shown again."),
          el("dl", {}, el("dt", {}, "Token id"), el("dd", { class: "mono", id: "new-token-id" }, token.id), el("dt", {}, "Key"), el("dd", { class: "mono", id: "new-token-key" }, token.key)),
        ),
      );
      await refresh();
    } catch (error) {
      shown.replaceChildren(notice(error.message));
    }
  });
  await refresh();
  if (!current()) return;
  page.append(el("h1", {}, "API tokens"), form, shown, list);
}
