// Voice Service console: small progressive enhancements. Every page works as plain forms;
// this file adds toggles, copy, busy buttons, previews played in the page, the "Try it"
// player and in-browser recording.
"use strict";

// A page that answers a POST (a new key's secret, a form's errors) must not be posted
// again by a reload: make the current history entry a plain GET of the same URL.
if (window.history && history.replaceState) {
  history.replaceState(null, "", location.href);
}

document.addEventListener("DOMContentLoaded", () => {
  for (const form of document.querySelectorAll("[data-collapsible]")) form.hidden = true;

  for (const button of document.querySelectorAll("[data-toggle]")) {
    const target = document.getElementById(button.dataset.toggle);
    if (!target) continue;
    button.addEventListener("click", () => {
      target.hidden = !target.hidden;
      button.setAttribute("aria-expanded", String(!target.hidden));
      if (!target.hidden) target.querySelector("input:not([type=hidden])")?.focus();
    });
  }

  for (const button of document.querySelectorAll("[data-copy]")) {
    button.addEventListener("click", async () => {
      const source = document.getElementById(button.dataset.copy);
      if (!source) return;
      try {
        await navigator.clipboard.writeText(source.textContent.trim());
        button.dataset.copied = "true";
        button.textContent = "Copied";
      } catch {
        window.getSelection().selectAllChildren(source); // let the user copy it by hand
      }
    });
  }

  setUpBusyForms();
  setUpPreviews();
  setUpTryIt();
  setUpRecorder();
});

// A button that started a slow request says so, and cannot start it twice.
function setBusy(button) {
  button.dataset.idleText = button.textContent;
  if (button.dataset.busyText) button.textContent = button.dataset.busyText;
  button.disabled = true;
  button.setAttribute("aria-busy", "true");
}

function setIdle(button) {
  if (button.dataset.idleText !== undefined) button.textContent = button.dataset.idleText;
  button.disabled = false;
  button.removeAttribute("aria-busy");
}

// Forms posted the plain way (cloning can take long): busy until the next page comes.
function setUpBusyForms() {
  const forms = [];
  for (const button of document.querySelectorAll("form:not([data-preview]) [data-busy-text]")) {
    const form = button.form;
    forms.push(form);
    const status = form.querySelector("[data-busy-status]");
    form.addEventListener("submit", () => {
      setBusy(button);
      form.setAttribute("aria-busy", "true");
      if (status) status.textContent = status.dataset.busyStatus;
    });
  }
  // A page shown again from the back-forward cache would keep its buttons disabled.
  window.addEventListener("pageshow", (event) => {
    if (!event.persisted) return;
    for (const form of forms) {
      form.removeAttribute("aria-busy");
      for (const button of form.querySelectorAll("[aria-busy]")) setIdle(button);
      for (const status of form.querySelectorAll("[data-busy-status]")) status.textContent = "";
    }
  });
}

// Without script a preview form opens the audio; with it, the page fetches and plays it,
// and says when it is loading or failed.
function setUpPreviews() {
  const player = document.getElementById("preview-player");
  const status = document.getElementById("preview-status");
  if (!player || !status) return;
  for (const form of document.querySelectorAll("form[data-preview]")) {
    const button = form.querySelector("button");
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      if (button.disabled) return;
      const focused = document.activeElement === button;
      setBusy(button);
      status.textContent = `Loading the preview of ${form.dataset.preview}…`;
      try {
        const response = await fetch(form.action, {
          headers: { Accept: "audio/mpeg, application/json" },
          credentials: "same-origin",
        });
        if (!response.ok) {
          const body = await response.json().catch(() => null);
          status.textContent = body?.error?.message || `The preview failed (${response.status}).`;
          return;
        }
        if (player.src) URL.revokeObjectURL(player.src);
        player.src = URL.createObjectURL(await response.blob());
        player.play().catch(() => {});
        status.textContent = "";
      } catch {
        status.textContent = "The preview failed; check your connection.";
      } finally {
        setIdle(button);
        if (focused) button.focus(); // a disabled button lost the keyboard's focus
      }
    });
  }
}

function setUpTryIt() {
  const form = document.getElementById("try-form");
  if (!form) return;
  const audio = document.getElementById("try-audio");
  const status = document.getElementById("try-status");
  const button = form.querySelector("button[type=submit]");
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    setBusy(button);
    status.textContent = "Synthesizing…";
    try {
      const response = await fetch(form.action, {
        method: "POST",
        body: new FormData(form),
        headers: { Accept: "application/json, audio/mpeg" },
        credentials: "same-origin",
      });
      if (!response.ok) {
        const body = await response.json().catch(() => null);
        status.textContent = body?.error?.message || `Failed (${response.status}).`;
        return;
      }
      const requestId = response.headers.get("X-Request-ID");
      if (audio.src) URL.revokeObjectURL(audio.src);
      audio.src = URL.createObjectURL(await response.blob());
      audio.play().catch(() => {});
      status.textContent = requestId ? `Done: ${requestId}` : "Done.";
    } catch {
      status.textContent = "The request failed; check your connection.";
    } finally {
      setIdle(button);
    }
  });
}

function setUpRecorder() {
  const box = document.querySelector("[data-recorder]");
  const input = document.getElementById("clone-file");
  if (!box || !input || !window.MediaRecorder || !navigator.mediaDevices) return;
  box.hidden = false;
  const start = box.querySelector("[data-record-start]");
  const stop = box.querySelector("[data-record-stop]");
  const status = box.querySelector("[data-record-status]");
  let recorder = null;
  let chunks = [];
  let started = 0;

  start.addEventListener("click", async () => {
    try {
      const stream = await navigator.mediaDevices.getUserMedia({ audio: true });
      recorder = new MediaRecorder(stream);
    } catch {
      status.textContent = "The browser did not allow the microphone.";
      return;
    }
    chunks = [];
    recorder.addEventListener("dataavailable", (event) => chunks.push(event.data));
    recorder.addEventListener("stop", () => {
      recorder.stream.getTracks().forEach((track) => track.stop());
      const type = recorder.mimeType || "audio/webm";
      const extension = type.includes("ogg") ? "ogg" : type.includes("mp4") ? "m4a" : "webm";
      const file = new File(chunks, `recording.${extension}`, { type });
      const transfer = new DataTransfer();
      transfer.items.add(file);
      input.files = transfer.files;
      const seconds = Math.round((Date.now() - started) / 1000);
      status.textContent = `Recorded ${seconds} s; it will be sent with the form.`;
    });
    recorder.start();
    started = Date.now();
    start.disabled = true;
    stop.disabled = false;
    status.textContent = "Recording… read a few sentences aloud.";
  });

  stop.addEventListener("click", () => {
    if (recorder && recorder.state === "recording") recorder.stop();
    start.disabled = false;
    stop.disabled = true;
  });
}
