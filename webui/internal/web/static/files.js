// The file browser's uploads, resumable: a small client of tus 1.0 of our
// own (create, send in parts, go on after a break or a reload), so that
// the build stays Go alone (docs/webui.md says why). The page works
// without it, but for uploads.
"use strict";

(() => {
  const root = document.getElementById("files");
  if (!root) return;
  const endpoint = root.dataset.uploads;
  const dir = root.dataset.dir;
  const conn = root.dataset.connection;
  const list = document.getElementById("uploads");
  const input = document.getElementById("upload-files");
  const replace = document.getElementById("upload-replace");
  // A share link's drop box: no listing to reload into, so each upload
  // says it arrived, and the page says how many did.
  const dropbox = "dropbox" in root.dataset;
  const summary = document.getElementById("upload-summary");
  let sent = 0;
  // A part's bytes: each is one request, and what a break can cost.
  const PART = 8 * 1024 * 1024;
  const tus = { "Tus-Resumable": "1.0.0" };

  const target = (name) => (dir === "/" ? "" : dir) + "/" + name;
  // Where an upload of this file to this place was begun, kept across
  // reloads: a browser cannot reopen a file by itself, so choosing the
  // same file again goes on from there.
  const keyOf = (file) => ["sftpgate-upload", conn, file.size, file.lastModified, target(file.name)].join("|");
  const b64 = (s) => btoa(String.fromCharCode(...new TextEncoder().encode(s)));
  const metadata = (m) => Object.entries(m).map(([k, v]) => k + " " + b64(v)).join(",");
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  const percent = (n, total) => (total ? Math.floor((100 * n) / total) : 100);

  async function reason(res) {
    try {
      return (await res.json()).error.message;
    } catch (_) {
      return res.redirected ? "you were logged out: log in again" : `the server answered ${res.status}`;
    }
  }

  // offsetOf asks how far an upload got; null when it is gone.
  async function offsetOf(url) {
    const res = await fetch(url, { method: "HEAD", headers: tus });
    const offset = res.headers.get("Upload-Offset");
    if (res.ok && offset !== null) return Number(offset);
    if (res.status === 404) return null;
    throw new Error(res.redirected ? "you were logged out: log in again" : `the server answered ${res.status}`);
  }

  function row(name) {
    const li = document.createElement("li");
    li.innerHTML = '<span class="name"></span> <progress max="100" value="0"></progress> <span class="state muted"></span>';
    li.querySelector(".name").textContent = name;
    list.append(li);
    const bar = li.querySelector("progress");
    bar.setAttribute("aria-label", `Upload of ${name}`);
    const state = li.querySelector(".state");
    return {
      progress(sent, total) {
        bar.value = percent(sent, total);
        li.dataset.sent = String(sent);
        state.textContent = `${bar.value}%`;
      },
      note(text) { li.dataset.note = text; state.textContent = text; },
      from(offset) { li.dataset.from = String(offset); },
      done() { bar.value = 100; li.classList.add("done"); state.textContent = dropbox ? "sent" : "done"; },
      fail(text) { li.classList.add("failed"); state.textContent = text; },
    };
  }

  // failure is an answer's reason, and whether a retry would get it again:
  // only an offset that moved, a held upload, a busy gateway or a broken
  // link are worth another try.
  function failure(status, body, retryAfter) {
    let message = `the server answered ${status}`;
    let code = "";
    try {
      ({ message, code } = JSON.parse(body).error);
    } catch (_) { /* not the gateway's answer */ }
    const err = new Error(message);
    err.final = status >= 400 && status < 500 && code !== "mismatched_offset" && ![423, 429].includes(status);
    err.wait = Number(retryAfter) * 1000 || 0;
    return err;
  }

  // patch sends the part of file at offset; it resolves to the new offset.
  function patch(url, file, offset, onProgress) {
    return new Promise((resolve, reject) => {
      const xhr = new XMLHttpRequest();
      xhr.open("PATCH", url);
      xhr.setRequestHeader("Tus-Resumable", "1.0.0");
      xhr.setRequestHeader("Upload-Offset", String(offset));
      xhr.setRequestHeader("Content-Type", "application/offset+octet-stream");
      xhr.upload.onprogress = (e) => onProgress(offset + e.loaded);
      xhr.onload = () => {
        if (xhr.status === 204 && xhr.getResponseHeader("Upload-Offset") !== null) {
          resolve(Number(xhr.getResponseHeader("Upload-Offset")));
          return;
        }
        if (xhr.responseURL.endsWith("/login")) {
          const err = new Error("you were logged out: log in again");
          err.final = true;
          reject(err);
          return;
        }
        reject(failure(xhr.status, xhr.responseText, xhr.getResponseHeader("Retry-After")));
      };
      xhr.onerror = () => reject(new Error("the connection broke"));
      xhr.send(file.slice(offset, Math.min(offset + PART, file.size)));
    });
  }

  // Retries back off up to half a minute, for as long as this many tries.
  const TRIES = 20;
  const backoff = (tries, err) => Math.max(err.wait || 0, Math.min(30000, 500 * 2 ** tries));
  const online = () => (navigator.onLine ? Promise.resolve() : new Promise((r) => addEventListener("online", r, { once: true })));

  async function upload(file) {
    const line = row(file.name);
    const key = keyOf(file);
    try {
      let url = localStorage.getItem(key);
      let offset = url ? await offsetOf(url) : null;
      if (offset === null) {
        const res = await fetch(endpoint, {
          method: "POST",
          headers: { ...tus, "Upload-Length": String(file.size),
            "Upload-Metadata": metadata({ path: target(file.name), overwrite: replace && replace.checked ? "true" : "false", filename: file.name }) },
        });
        if (res.status !== 201) throw new Error(await reason(res));
        url = new URL(res.headers.get("Location"), location.href).pathname;
        localStorage.setItem(key, url);
        offset = 0;
      } else {
        line.note(`going on from ${percent(offset, file.size)}%`);
        line.from(offset);
        line.progress(offset, file.size);
      }
      for (let tries = 0; offset < file.size; ) {
        try {
          offset = await patch(url, file, offset, (sent) => line.progress(sent, file.size));
          tries = 0;
        } catch (err) {
          if (err.final || ++tries > TRIES) {
            if (err.final) localStorage.removeItem(key);
            throw err;
          }
          line.note(`${err.message}; trying again`);
          await sleep(backoff(tries, err));
          await online();
          // Where the server's copy ends: asked again on the next turn if
          // this fails too.
          const at = await offsetOf(url).catch(() => offset);
          if (at === null) {
            localStorage.removeItem(key);
            throw new Error("the upload is gone (it expired or was ended): choose the file again");
          }
          offset = at;
        }
      }
      localStorage.removeItem(key);
      line.done();
      return true;
    } catch (err) {
      line.fail(err.message);
      return false;
    }
  }

  async function uploadAll(files) {
    let all = true;
    for (const file of files) {
      const ok = await upload(file);
      all = ok && all;
      if (ok) sent++;
    }
    if (dropbox) {
      if (sent > 0) {
        summary.textContent = `${sent} ${sent === 1 ? "file" : "files"} sent. They are there for whoever shared this link; you can send more.`;
        summary.hidden = false;
      }
      return;
    }
    if (all) setTimeout(() => location.reload(), 400);
  }

  input.addEventListener("change", () => {
    const files = [...input.files];
    input.value = "";
    uploadAll(files);
  });
  root.addEventListener("dragover", (e) => { e.preventDefault(); root.classList.add("over"); });
  root.addEventListener("dragleave", () => root.classList.remove("over"));
  root.addEventListener("drop", (e) => {
    e.preventDefault();
    root.classList.remove("over");
    uploadAll([...e.dataTransfer.files]);
  });

  // Uploads to this folder that a reload or a closed tab left unfinished.
  for (let i = 0; i < localStorage.length; i++) {
    const parts = (localStorage.key(i) || "").split("|");
    if (parts[0] !== "sftpgate-upload" || parts[1] !== conn) continue;
    const path = parts.slice(4).join("|");
    if (path.slice(0, path.lastIndexOf("/")) !== (dir === "/" ? "" : dir)) continue;
    const key = localStorage.key(i);
    const url = localStorage.getItem(key);
    const line = row(path.slice(path.lastIndexOf("/") + 1));
    line.note("unfinished: choose the file again to go on");
    offsetOf(url).then((at) => {
      if (at === null) {
        localStorage.removeItem(key);
        line.fail("expired");
      }
    }, () => {});
  }
})();
