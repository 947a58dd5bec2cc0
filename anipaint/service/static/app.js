// AniPaint page: choose a photo, pick a style, queue a job, poll it, compare before/after, download.
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  const STRINGS = window.ANIPAINT_STRINGS;
  const POLL_MS = 400;
  const THUMB_RETRY_MS = 3000;

  const state = {
    lang: pickLanguage(),
    config: null,
    styles: [],
    style: null,
    file: null,
    fileUrl: null,
    job: null, // {id, style, name, beforeUrl}
    pollTimer: null,
    resultUrl: null,
    message: null, // {kind, key, vars, sub}
    progress: null, // {stage, progress, position}
  };

  // ---------------------------------------------------------------- language
  function pickLanguage() {
    let saved = null;
    try { saved = localStorage.getItem("anipaint.lang"); } catch (_) { /* private mode */ }
    if (saved && STRINGS[saved]) return saved;
    const nav = (navigator.languages && navigator.languages[0]) || navigator.language || "en";
    return nav.toLowerCase().startsWith("zh") ? "zh" : "en";
  }

  function t(key, vars) {
    let text = (STRINGS[state.lang] && STRINGS[state.lang][key]) || STRINGS.en[key] || key;
    for (const [name, value] of Object.entries(vars || {})) text = text.split(`{${name}}`).join(String(value));
    return text;
  }

  function applyLanguage() {
    document.documentElement.lang = state.lang === "zh" ? "zh-CN" : "en";
    document.title = t("doc.title");
    for (const el of document.querySelectorAll("[data-i18n]")) el.textContent = t(el.dataset.i18n, el.dataset);
    $("compare-slider").setAttribute("aria-label", t("compare.label"));
    renderStyles();
    renderMessage();
    renderProgress();
    renderServerStatus();
  }

  // ---------------------------------------------------------------- messages
  function showMessage(kind, key, vars, sub) {
    state.message = { kind, key, vars, sub: sub || "" };
    renderMessage();
    document.body.dataset.state = "error";
  }

  function clearMessage() {
    state.message = null;
    renderMessage();
  }

  function renderMessage() {
    const box = $("message");
    if (!state.message) { box.hidden = true; return; }
    const m = state.message;
    box.dataset.kind = m.kind;
    $("message-text").textContent = t(m.key, m.vars);
    $("message-sub").textContent = typeof m.sub === "function" ? m.sub() : m.sub;
    box.hidden = false;
  }

  // ---------------------------------------------------------------- server status + config
  let serverState = "starting";
  function renderServerStatus() {
    const pill = $("server-status");
    pill.dataset.state = serverState;
    pill.querySelector(".label").textContent = t(`status.${serverState === "ready" ? "ready" : serverState}`);
  }

  async function watchReadiness() {
    try {
      const res = await fetch("/readyz", { cache: "no-store" });
      serverState = res.ok ? "ready" : "starting";
    } catch (_) {
      serverState = "down";
    }
    renderServerStatus();
    if (serverState !== "ready") setTimeout(watchReadiness, 2000);
  }

  async function loadConfig() {
    try {
      const res = await fetch("/api/config");
      if (!res.ok) return;
      state.config = await res.json();
      $("drop-limit").dataset.mb = Math.round(state.config.max_upload_bytes / (1024 * 1024));
      $("faces").checked = state.config.faces;
      applyLanguage();
    } catch (_) { /* the defaults in the page still work */ }
  }

  function limits() {
    const c = state.config || { max_upload_bytes: 20 * 1024 * 1024, max_pixels: 40e6 };
    return { mb: Math.round(c.max_upload_bytes / (1024 * 1024)), mp: Math.round(c.max_pixels / 1e6) };
  }

  // ---------------------------------------------------------------- styles
  async function loadStyles() {
    try {
      const res = await fetch("/api/styles");
      if (!res.ok) throw new Error(String(res.status));
      const styles = await res.json();
      styles.sort((a, b) => Number(b.available) - Number(a.available));
      state.styles = styles;
      let saved = null;
      try { saved = localStorage.getItem("anipaint.style"); } catch (_) { /* ignore */ }
      const usable = styles.filter((s) => s.available);
      const pick = usable.find((s) => s.id === saved) || usable.find((s) => s.default) || usable[0];
      state.style = pick ? pick.id : null;
      renderStyles(true);
    } catch (_) {
      showMessage("error", "err.network");
    }
  }

  function splitLabel(label) {
    const m = /^(.*?)\s*\((.*)\)\s*$/.exec(label);
    return m ? [m[1], m[2]] : [label, ""];
  }

  function renderStyles(fresh) {
    const box = $("styles");
    if (!state.styles.length) return;
    if (fresh) box.textContent = "";
    for (const s of state.styles) {
      let card = box.querySelector(`[data-style="${CSS.escape(s.id)}"]`);
      if (!card) {
        card = document.createElement("label");
        card.className = "style-card";
        card.dataset.style = s.id;
        card.setAttribute("data-testid", `style-${s.id}`);
        card.innerHTML = '<input type="radio" name="style"><span class="thumb pending"><img alt="">' +
          '<span class="badge" hidden></span></span><span class="tick" aria-hidden="true">✓</span>' +
          '<span class="name"></span><span class="reason"></span>';
        const input = card.querySelector("input");
        input.value = s.id;
        input.disabled = !s.available;
        input.addEventListener("change", () => selectStyle(s.id));
        box.appendChild(card);
        loadThumbnail(card, s.thumbnail, 0);
      }
      const [name, family] = splitLabel(s.label);
      card.querySelector(".name").textContent = name;
      card.querySelector(".reason").textContent = s.available ? family : t("style.unavailable");
      card.title = s.available ? `${s.label}\n${s.description}` : `${s.label}\n${s.reason || ""}`;
      card.classList.toggle("unavailable", !s.available);
      card.dataset.available = String(s.available);
      card.classList.toggle("selected", s.id === state.style);
      card.querySelector("input").checked = s.id === state.style;
      const badge = card.querySelector(".badge");
      badge.hidden = !s.default;
      badge.textContent = t("style.default");
    }
    const chosen = state.styles.find((s) => s.id === state.style);
    $("style-note").textContent = chosen ? `${chosen.label} — ${chosen.description}` : "";
    updatePaintButton();
  }

  function selectStyle(id) {
    state.style = id;
    try { localStorage.setItem("anipaint.style", id); } catch (_) { /* ignore */ }
    renderStyles();
  }

  async function loadThumbnail(card, url, tries) {
    const holder = card.querySelector(".thumb");
    try {
      const res = await fetch(url, { cache: tries ? "no-store" : "default" });
      if (!res.ok) return;
      const pending = res.headers.get("X-Thumbnail") === "pending";
      const img = holder.querySelector("img");
      const old = img.src;
      img.src = URL.createObjectURL(await res.blob());
      if (old.startsWith("blob:")) URL.revokeObjectURL(old);
      holder.classList.toggle("pending", pending);
      if (pending && tries < 40) setTimeout(() => loadThumbnail(card, url, tries + 1), THUMB_RETRY_MS);
    } catch (_) {
      if (tries < 5) setTimeout(() => loadThumbnail(card, url, tries + 1), THUMB_RETRY_MS);
    }
  }

  // ---------------------------------------------------------------- the photo
  function setFile(file) {
    if (!file) return;
    if (file.type && !file.type.startsWith("image/")) {
      showMessage("error", "err.notImage", null, file.name);
      return;
    }
    if (state.config && file.size > state.config.max_upload_bytes) {
      showMessage("error", "err.tooBig", null, () => t("err.tooBig.limit", limits()));
      return;
    }
    clearMessage();
    if (state.fileUrl && (!state.job || state.job.beforeUrl !== state.fileUrl)) URL.revokeObjectURL(state.fileUrl);
    state.file = file;
    state.fileUrl = URL.createObjectURL(file);
    const preview = $("preview");
    preview.src = state.fileUrl;
    preview.hidden = false;
    $("file-name").textContent = file.name || "";
    $("file-name").hidden = !file.name;
    $("dropzone").dataset.state = "filled";
    document.body.dataset.state = "ready";
    updatePaintButton();
  }

  function updatePaintButton() {
    $("paint").disabled = !state.file || !state.style || Boolean(state.job && !state.job.finished);
  }

  function baseName(file) {
    const raw = (file && file.name) || "image";
    const stem = raw.replace(/\.[^.]*$/, "").replace(/[^\p{L}\p{N}_-]+/gu, "-").replace(/^-+|-+$/g, "");
    return stem.slice(0, 60) || "image";
  }

  // ---------------------------------------------------------------- painting
  async function paint() {
    if (!state.file) { showMessage("error", "err.noFile"); return; }
    clearMessage();
    const size = document.querySelector('input[name="size"]:checked').value;
    const form = new FormData();
    form.append("image", state.file, state.file.name || "pasted.png");
    form.append("style", state.style);
    form.append("faces", $("faces").checked ? "true" : "false");
    form.append("max_side", size === "original" ? "0" : size);
    state.job = { id: null, style: state.style, name: baseName(state.file), beforeUrl: state.fileUrl, finished: false };
    setBusy(true);
    setProgress({ stage: "uploading", progress: 0, position: 0 });
    if (window.matchMedia("(max-width: 880px)").matches) $("result-card").scrollIntoView({ behavior: "smooth" });
    let res;
    try {
      res = await fetch("/api/jobs", { method: "POST", body: form });
    } catch (_) {
      finish();
      showMessage("error", "err.network");
      return;
    }
    if (res.status !== 202) { finish(); await showHttpError(res); return; }
    const job = await res.json();
    state.job.id = job.id;
    state.job.style = job.style;
    setProgress(job);
    poll();
  }

  function poll() {
    const job = state.job;
    state.pollTimer = setTimeout(async () => {
      if (state.job !== job) return;
      let res;
      try {
        res = await fetch(`/api/jobs/${job.id}`, { cache: "no-store" });
      } catch (_) {
        poll(); // a blip: keep trying
        return;
      }
      if (state.job !== job) return;
      if (res.status === 404) { finish(); showMessage("error", "err.gone"); return; }
      if (!res.ok) { poll(); return; }
      const info = await res.json();
      setProgress(info);
      if (info.status === "done") await fetchResult(job, info);
      else if (info.status === "failed") { finish(); showJobFailure(info); }
      else poll();
    }, POLL_MS);
  }

  async function fetchResult(job, info) {
    let res;
    try { res = await fetch(`/api/jobs/${job.id}/result`); } catch (_) { res = null; }
    if (!res || !res.ok) { finish(); showMessage("error", res && res.status === 404 ? "err.gone" : "err.network"); return; }
    const blob = await res.blob();
    finish();
    showResult(job, info, blob);
  }

  function showResult(job, info, blob) {
    if (state.resultUrl) URL.revokeObjectURL(state.resultUrl);
    state.resultUrl = URL.createObjectURL(blob);
    $("after").src = state.resultUrl;
    $("before").src = job.beforeUrl;
    const compare = $("compare");
    compare.style.aspectRatio = `${info.width} / ${info.height}`;
    compare.hidden = false;
    $("placeholder").hidden = true;
    $("compare-slider").value = 50;
    setSplit(50);
    const link = $("download");
    link.href = state.resultUrl;
    link.download = `${job.name}-anipaint-${info.style}.png`;
    const style = state.styles.find((s) => s.id === info.style);
    job.info = { style: style ? splitLabel(style.label)[0] : info.style, w: info.width, h: info.height };
    const seconds = ((performance.now() - job.started) / 1000).toFixed(1);
    $("result-info").textContent = t("result.info", { ...job.info, s: seconds });
    $("result-actions").hidden = false;
    $("progress").hidden = true;
    document.body.dataset.state = "done";
  }

  function showJobFailure(info) {
    const kind = info.error_kind;
    if (kind === "image") showMessage("error", "err.notImage", null, info.error);
    else if (kind === "style") showMessage("error", "err.style", null, info.error);
    else if (kind === "busy") showMessage("busy", "err.busy");
    else showMessage("error", "err.failed", null, info.error || "");
  }

  async function showHttpError(res) {
    let detail = "";
    try { detail = (await res.json()).detail || ""; } catch (_) { /* not JSON */ }
    if (res.status === 503) {
      const retry = Number(res.headers.get("Retry-After")) || 5;
      showMessage("busy", "err.busy", null, () => t("err.busy.retry", { n: retry }));
    } else if (res.status === 413) {
      showMessage("error", "err.tooBig", null, () => t("err.tooBig.limit", limits()));
    } else if (res.status === 415) {
      showMessage("error", "err.notImage", null, detail);
    } else if (res.status === 504) {
      showMessage("error", "err.timeout", null, detail);
    } else if ((res.status === 400 || res.status === 422) && /style/i.test(detail)) {
      showMessage("error", "err.style", null, detail);
    } else {
      showMessage("error", "err.failed", null, detail || `HTTP ${res.status}`);
    }
  }

  function setBusy(busy) {
    const button = $("paint");
    button.classList.toggle("busy", busy);
    $("paint-label").dataset.i18n = busy ? "painting" : "paint";
    $("paint-label").textContent = t(busy ? "painting" : "paint");
    if (busy && state.job) $("progress-photo").src = state.job.beforeUrl;
    if (busy && state.job) state.job.started = performance.now();
    updatePaintButton();
  }

  function finish() {
    clearTimeout(state.pollTimer);
    if (state.job) state.job.finished = true;
    setBusy(false);
    $("progress").hidden = true;
    state.progress = null;
    if ($("compare").hidden) $("placeholder").hidden = false;
  }

  async function cancel() {
    const job = state.job;
    if (!job || job.finished) return;
    finish();
    document.body.dataset.state = "ready";
    if (job.id) {
      try { await fetch(`/api/jobs/${job.id}`, { method: "DELETE" }); } catch (_) { /* gone anyway */ }
    }
  }

  // ---------------------------------------------------------------- progress
  function setProgress(info) {
    const stage = info.status === "queued" ? "queued" : info.stage || info.status;
    state.progress = { stage, progress: info.progress || 0, position: info.position || 0 };
    document.body.dataset.state = stage === "uploading" ? "uploading" : info.status || "running";
    renderProgress();
  }

  function renderProgress() {
    const p = state.progress;
    const box = $("progress");
    if (!p) return;
    box.hidden = false;
    $("placeholder").hidden = true;
    box.dataset.stage = p.stage;
    const pct = Math.round(p.progress * 100);
    $("progress-fill").style.width = `${Math.max(4, pct)}%`;
    $("progress-bar").setAttribute("aria-valuenow", String(pct));
    let text;
    if (p.stage === "uploading") text = t("progress.uploading");
    else if (p.stage === "queued") text = p.position ? t("progress.queued", { n: p.position }) : t("stage.queued");
    else text = `${t(`stage.${p.stage}`)} ${pct}%`;
    $("progress-text").textContent = text;
  }

  // ---------------------------------------------------------------- compare slider
  function setSplit(value) {
    const v = Math.min(100, Math.max(0, Number(value)));
    $("before").style.clipPath = `inset(0 ${(100 - v).toFixed(2)}% 0 0)`;
    $("divider").style.left = `${v}%`;
    $("compare").dataset.split = v.toFixed(1);
  }

  // ---------------------------------------------------------------- wiring
  function wire() {
    const zone = $("dropzone");
    const input = $("file-input");
    zone.addEventListener("click", () => input.click());
    zone.addEventListener("keydown", (e) => {
      if (e.key === "Enter" || e.key === " ") { e.preventDefault(); input.click(); }
    });
    input.addEventListener("change", () => { setFile(input.files[0]); input.value = ""; });
    for (const name of ["dragenter", "dragover"]) {
      zone.addEventListener(name, (e) => { e.preventDefault(); zone.classList.add("dragging"); });
    }
    for (const name of ["dragleave", "dragend", "drop"]) {
      zone.addEventListener(name, () => zone.classList.remove("dragging"));
    }
    zone.addEventListener("drop", (e) => {
      e.preventDefault();
      if (e.dataTransfer && e.dataTransfer.files.length) setFile(e.dataTransfer.files[0]);
    });
    window.addEventListener("dragover", (e) => e.preventDefault());
    window.addEventListener("drop", (e) => e.preventDefault());
    document.addEventListener("paste", (e) => {
      const items = (e.clipboardData && e.clipboardData.items) || [];
      for (const item of items) {
        if (item.kind === "file" && item.type.startsWith("image/")) {
          e.preventDefault();
          setFile(item.getAsFile());
          return;
        }
      }
    });
    $("paint").addEventListener("click", paint);
    $("cancel").addEventListener("click", cancel);
    $("compare-slider").addEventListener("input", (e) => setSplit(e.target.value));
    $("lang-toggle").addEventListener("click", () => {
      state.lang = state.lang === "zh" ? "en" : "zh";
      try { localStorage.setItem("anipaint.lang", state.lang); } catch (_) { /* ignore */ }
      applyLanguage();
      if (state.job && state.job.info && !$("result-actions").hidden) {
        const seconds = $("result-info").textContent.match(/[\d.]+(?=\s*(s|秒)$)/);
        $("result-info").textContent = t("result.info", { ...state.job.info, s: seconds ? seconds[0] : "?" });
      }
    });
  }

  wire();
  applyLanguage();
  document.body.dataset.state = "idle";
  loadConfig();
  loadStyles();
  watchReadiness();
})();
