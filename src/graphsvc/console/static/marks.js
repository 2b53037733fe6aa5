// Marks: an object's tags shown as badges, and marking it owned or not, through the
// reference's older asset-group route its own client used (Owned is asset group 2).

import { call } from "./api.js";
import { el, notice } from "./dom.js";

const OWNED_GROUP = 2;

export function badges(node) {
  return el(
    "span",
    { class: "badges" },
    node.isTierZero ? el("span", { class: "badge tier-zero" }, "Tier Zero") : null,
    node.isOwnedObject ? el("span", { class: "badge owned" }, "Owned") : null,
  );
}

/** A button that marks the object owned, or no longer owned; `changed(owned)` after. */
export function ownedButton(objectId, owned, changed, id) {
  const status = el("span", { class: "mark-status" });
  const button = el("button", { type: "button", class: "mark-owned", id, "data-object-id": objectId }, owned ? "Unmark owned" : "Mark owned");
  let isOwned = owned;
  button.addEventListener("click", async () => {
    button.disabled = true;
    status.replaceChildren();
    try {
      const action = isOwned ? "remove" : "add";
      await call("PUT", `/asset-groups/${OWNED_GROUP}/selectors`, { body: [{ selector_name: objectId, sid: objectId, action }] });
      isOwned = !isOwned;
      button.textContent = isOwned ? "Unmark owned" : "Mark owned";
      changed(isOwned);
    } catch (error) {
      status.replaceChildren(notice(error.message));
    } finally {
      button.disabled = false;
    }
  });
  return el("span", { class: "mark" }, button, status);
}
