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
    loadedStyles: false,
    style: null,
    blend: null, // {photoLab, paintedLab, painted: ImageData, out: ImageData, blob}
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
      // Not warming up but empty: no style can paint here, so the default style never loads.
      if (!res.ok && state.loadedStyles && !state.styles.some((s) => s.available)) serverState = "empty";
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
      state.styles = await res.json();
      state.loadedStyles = true;
      let saved = null;
      try { saved = localStorage.getItem("anipaint.style"); } catch (_) { /* ignore */ }
      const usable = state.styles.filter((s) => s.available);
      const pick = usable.find((s) => s.id === saved) || usable.find((s) => s.default) || usable[0];
      state.style = pick ? pick.id : null;
      renderStyles(true);
      watchPreparation();
    } catch (_) {
      showMessage("error", "err.network");
    }
  }

  // Styles the server is still converting or optimising in the background: refresh their state until ready.
  function watchPreparation() {
    if (state.styles.some((s) => s.state === "converting" || s.state === "optimising")) {
      setTimeout(refreshStyles, 5000);
    }
  }

  async function refreshStyles() {
    try {
      const res = await fetch("/api/styles");
      if (!res.ok) throw new Error(String(res.status));
      state.styles = await res.json();
      renderStyles(false);
    } catch (_) { /* try again later */ }
    watchPreparation();
  }

  function splitLabel(label) {
    const m = /^(.*?)\s*\((.*)\)\s*$/.exec(label);
    return m ? [m[1], m[2]] : [label, ""];
  }

  // Text with `code` spans, built as nodes (never as HTML).
  function setCodeText(el, text) {
    el.textContent = "";
    text.split("`").forEach((part, i) => {
      if (!part) return;
      if (i % 2) { const code = document.createElement("code"); code.textContent = part; el.appendChild(code); }
      else el.appendChild(document.createTextNode(part));
    });
  }

  // Only the styles that can paint here get a card; the others are counted in one "more styles" line.
  function renderStyles(fresh) {
    const box = $("styles");
    if (!state.loadedStyles) return;
    const usable = state.styles.filter((s) => s.available);
    const commercialOnly = Boolean(state.config && state.config.commercial_only);
    if (fresh) box.textContent = "";
    if (!usable.length) {
      box.textContent = "";
      const empty = document.createElement("p");
      empty.className = "style-empty muted";
      empty.dataset.testid = "styles-empty";
      setCodeText(empty, t(commercialOnly ? "style.noneCommercial" : "style.none"));
      box.appendChild(empty);
    }
    for (const s of usable) {
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
        input.addEventListener("change", () => selectStyle(s.id));
        box.appendChild(card);
        loadThumbnail(card, s.thumbnail, 0);
      }
      const [name, family] = splitLabel(s.label);
      card.querySelector(".name").textContent = name;
      const busy = s.state === "converting" || s.state === "optimising";
      card.querySelector(".reason").textContent = busy ? `${family} · ${t("style." + s.state)}` : family;
      card.dataset.state = s.state || "";
      card.title = `${s.label}\n${s.description}\n${t("style.licence", { id: s.licence })}`;
      card.dataset.licence = s.licence;
      card.classList.toggle("selected", s.id === state.style);
      card.querySelector("input").checked = s.id === state.style;
      const badge = card.querySelector(".badge");
      badge.hidden = !s.default;
      badge.textContent = t("style.default");
    }
    renderBackgrounds(usable);
    const chosen = state.styles.find((s) => s.id === state.style);
    $("style-note").textContent = chosen ? `${chosen.label} — ${chosen.description}` : "";
    renderLicence(chosen, commercialOnly);
    const more = state.styles.filter((s) => !s.available);
    $("more-styles").hidden = !more.length;
    if (more.length) {
      setCodeText($("more-styles"), t("style.more", { n: more.length }));
      $("more-styles").title = more.map((s) => `${s.id}: ${s.reason || ""}`).join("\n");
    }
    updatePaintButton();
  }

  // The background select offers every style that paints whole pictures; "" (the first option) is the style's own.
  function renderBackgrounds(usable) {
    const select = $("background");
    const kept = select.value;
    while (select.options.length > 1) select.remove(1);
    for (const s of usable) {
      if (s.kind === "face") continue;
      const option = document.createElement("option");
      option.value = s.id;
      option.textContent = splitLabel(s.label)[0];
      select.appendChild(option);
    }
    select.value = [...select.options].some((o) => o.value === kept) ? kept : "";
  }

  function renderLicence(chosen, commercialOnly) {
    const box = $("style-licence");
    box.textContent = "";
    if (!chosen) {
      if (commercialOnly && state.styles.length) box.textContent = t("style.commercialOnly");
      return;
    }
    const pill = document.createElement("span");
    pill.className = chosen.commercial ? "lic commercial" : "lic";
    pill.textContent = t("style.licence", { id: chosen.licence });
    pill.title = `${chosen.licence_text}\n${chosen.licence_source}`;
    box.appendChild(pill);
    const terms = t(chosen.commercial ? "style.licence.commercial" : "style.licence.noncommercial");
    box.appendChild(document.createTextNode(commercialOnly ? `${terms} · ${t("style.commercialOnly")}` : terms));
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
    const portrait = $("portrait").checked;
    form.append("portrait", portrait ? "true" : "false");
    if ($("background").value) form.append("background", $("background").value);
    state.job = {
      portrait, id: null, style: state.style, name: baseName(state.file), beforeUrl: state.fileUrl, file: state.file, finished: false,
    };
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

  async function showResult(job, info, blob) {
    if (state.resultUrl) URL.revokeObjectURL(state.resultUrl);
    state.resultUrl = URL.createObjectURL(blob);
    try {
      await keepForBlending(job, info, blob);
    } catch (_) {
      showMessage("error", "err.failed", null, "this browser cannot read the painted picture back");
      return;
    }
    $("before").src = job.beforeUrl;
    const compare = $("compare");
    compare.style.aspectRatio = `${info.width} / ${info.height}`;
    compare.hidden = false;
    $("placeholder").hidden = true;
    $("compare-slider").value = 50;
    setSplit(50);
    $("strength").value = 100;
    setStrength(100);
    $("strength-row").hidden = false;
    const link = $("download");
    link.href = state.resultUrl;
    job.downloadName = `${job.name}-anipaint-${info.style}`;
    link.download = `${job.downloadName}.png`;
    const style = state.styles.find((s) => s.id === info.style);
    job.info = { style: style ? splitLabel(style.label)[0] : info.style, w: info.width, h: info.height };
    const seconds = ((performance.now() - job.started) / 1000).toFixed(1);
    const faces = job.portrait ? ` · ${t("result.faces", { n: info.faces_found || 0 })}` : "";
    $("result-info").textContent = t("result.info", { ...job.info, s: seconds }) + faces;
    $("result-actions").hidden = false;
    $("progress").hidden = true;
    document.body.dataset.state = "done";
  }

  // ---------------------------------------------------------------- style strength (re-blended here)
  // The full-strength picture and the photo at its size are kept in L*a*b*; the slider mixes them in place.
  async function keepForBlending(job, info, blob) {
    const w = info.width, h = info.height;
    const canvas = $("after");
    canvas.width = w;
    canvas.height = h;
    const ctx = canvas.getContext("2d", { willReadFrequently: true });
    const painted = await createImageBitmap(blob);
    ctx.clearRect(0, 0, w, h);
    ctx.drawImage(painted, 0, 0);
    const paintedData = ctx.getImageData(0, 0, w, h);
    const photo = await createImageBitmap(job.file);
    const scratch = document.createElement("canvas");
    scratch.width = w;
    scratch.height = h;
    const sctx = scratch.getContext("2d", { willReadFrequently: true });
    sctx.imageSmoothingQuality = "high";
    sctx.drawImage(photo, 0, 0, w, h);
    const photoData = sctx.getImageData(0, 0, w, h);
    state.blend = {
      photoLab: window.AnipaintBlend.toLab(photoData.data),
      paintedLab: window.AnipaintBlend.toLab(paintedData.data),
      painted: paintedData,
      out: new ImageData(new Uint8ClampedArray(paintedData.data), w, h),
      frame: 0,
      value: 100,
    };
  }

  function setStrength(value) {
    const b = state.blend;
    const v = Math.min(100, Math.max(0, Math.round(Number(value))));
    $("strength-value").textContent = `${v}%`;
    if (!b) return;
    b.value = v;
    if (b.frame) return; // one repaint per animation frame, however fast the slider moves
    b.frame = requestAnimationFrame(() => {
      b.frame = 0;
      const ctx = $("after").getContext("2d");
      if (b.value >= 100) ctx.putImageData(b.painted, 0, 0); // the plain style, exactly
      else {
        window.AnipaintBlend.mix(b.photoLab, b.paintedLab, b.value / 100, b.out.data);
        ctx.putImageData(b.out, 0, 0);
      }
      $("compare").dataset.strength = String(b.value);
    });
  }

  // The download follows the slider: the server's PNG at 100 %, the blended canvas below.
  function updateDownload() {
    const job = state.job;
    const b = state.blend;
    if (!job || !b) return;
    const link = $("download");
    if (b.value >= 100) {
      link.href = state.resultUrl;
      link.download = `${job.downloadName}.png`;
      return;
    }
    const wanted = b.value;
    requestAnimationFrame(() => $("after").toBlob((png) => {
      if (!png || state.blend !== b || b.value !== wanted) return;
      if (state.blendUrl) URL.revokeObjectURL(state.blendUrl);
      state.blendUrl = URL.createObjectURL(png);
      link.href = state.blendUrl;
      link.download = `${job.downloadName}-${wanted}.png`;
    }, "image/png"));
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
    // "done" waits for showResult: the picture is fetched and decoded after the job reports done.
    const status = info.status === "done" ? "running" : info.status || "running";
    document.body.dataset.state = stage === "uploading" ? "uploading" : status;
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
    $("strength").addEventListener("input", (e) => setStrength(e.target.value));
    $("strength").addEventListener("change", updateDownload);
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
