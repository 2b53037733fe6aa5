// Uploads: collector files picked or dropped, sent as one upload job, then the job's
// progress until it completes or fails, and the result of each file; the recent jobs below.

import { call, get } from "./api.js";
import { el, formatTime, notice, table } from "./dom.js";

const STATUS = { 1: "Running", 2: "Complete", 3: "Canceled", 4: "Timed out", 5: "Failed", 6: "Ingesting" };
const FINAL = new Set([2, 3, 4, 5]);
const POLL_MS = 1000;

/** The headers that name a file: the reference web client's X-File-Upload-Name when the
 *  name is printable ASCII, else Content-Disposition's UTF-8 filename* (a browser cannot
 *  put other characters in a header). */
function nameHeaders(file) {
  if (/^[\x20-\x7e]*$/.test(file.name)) return { "X-File-Upload-Name": file.name };
  return { "Content-Disposition": `attachment; filename*=UTF-8''${encodeURIComponent(file.name)}` };
}

function contentType(file) {
  return file.name.toLowerCase().endsWith(".zip") ? "application/zip" : "application/json";
}

async function job(id) {
  const answer = await get("/file-upload", { id: `eq:${id}` });
  return answer.data[0];
}

function describe(row) {
  return `Job ${row.id}: ${STATUS[row.status] || row.status}${row.status_message ? ` (${row.status_message})` : ""}`;
}

async function followJob(box, id, current) {
  for (;;) {
    const row = await job(id);
    if (!current()) return null;
    box.replaceChildren(el("p", { class: `job-status status-${row.status}`, id: "job-status" }, describe(row)));
    if (FINAL.has(row.status)) return row;
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}

async function showResults(box, id) {
  const answer = await get(`/file-upload/${id}/completed-tasks`);
  box.append(
    table(
      [
        ["File", (task) => (task.parent_file_name ? `${task.parent_file_name} › ${task.file_name}` : task.file_name)],
        ["Errors", (task) => task.errors.join("; ") || "none"],
        ["Warnings", (task) => task.warnings.join("; ") || "none"],
      ],
      answer.data,
      { class: "file-results", id: "file-results" },
    ),
  );
}

async function send(files, box, current) {
  box.replaceChildren(el("p", { class: "muted" }, `Starting a job for ${files.length} file(s)…`));
  const started = await call("POST", "/file-upload/start");
  const id = started.data.id;
  try {
    for (const [index, file] of files.entries()) {
      box.replaceChildren(el("p", { class: "muted" }, `Job ${id}: sending ${file.name} (${index + 1} of ${files.length})…`));
      await call("POST", `/file-upload/${id}`, {
        rawBody: file,
        headers: { "Content-Type": contentType(file), ...nameHeaders(file) },
      });
    }
    await call("POST", `/file-upload/${id}/end`);
  } catch (error) {
    // A job with a file the server refused is ended, not left to time out.
    await call("POST", `/file-upload/${id}/cancel`).catch(() => {});
    throw error;
  }
  const ended = await followJob(box, id, current);
  if (ended) await showResults(box, id);
}

async function drawJobs(box) {
  const answer = await get("/file-upload", { limit: 10, sort_by: "-id" });
  box.replaceChildren(
    table(
      [
        ["Job", (row) => row.id],
        ["Status", (row) => STATUS[row.status] || row.status],
        ["Files", (row) => row.files.map((file) => file.name).join(", ")],
        ["Started", (row) => formatTime(row.start_time)],
        ["Ended", (row) => formatTime(row.end_time)],
        ["Message", (row) => row.status_message],
      ],
      answer.data,
      { class: "jobs", id: "job-table" },
    ),
  );
}

export async function showUploads(page, _rest, current) {
  const picker = el("input", { type: "file", id: "upload-files", multiple: true, accept: ".json,.zip,application/json,application/zip" });
  const drop = el("div", { class: "drop", id: "upload-drop", tabindex: "0" }, "Drop SharpHound, AzureHound or OpenGraph files (JSON or zip) here, or ", picker);
  const progress = el("div", { id: "upload-progress" });
  const jobs = el("div", {});
  const start = async (files) => {
    if (!files.length) return;
    const refused = [...files].filter((file) => !/\.(json|zip)$/i.test(file.name));
    if (refused.length) {
      progress.replaceChildren(notice(`Not a collector file (JSON or zip): ${refused.map((file) => file.name).join(", ")}. Nothing was sent.`));
      return;
    }
    try {
      await send([...files], progress, current);
    } catch (error) {
      progress.append(notice(error.message));
    }
    await drawJobs(jobs).catch(() => {});
  };
  picker.addEventListener("change", () => start(picker.files));
  drop.addEventListener("dragover", (event) => {
    event.preventDefault();
    drop.classList.add("over");
  });
  drop.addEventListener("dragleave", () => drop.classList.remove("over"));
  drop.addEventListener("drop", (event) => {
    event.preventDefault();
    drop.classList.remove("over");
    start(event.dataTransfer.files);
  });
  await drawJobs(jobs);
  if (!current()) return;
  page.append(el("h1", {}, "Uploads"), drop, progress, el("h2", {}, "Recent jobs"), jobs);
}
