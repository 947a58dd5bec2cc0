// @ts-check
// The styles: loaded from the server (and refreshed while it prepares them), their thumbnails, the choice, and
// the views drawn from them: the cards, the background select, the note and the licence.
// Painting on this device, a card says when its style can only be painted on the server (device-mode.js says why).
// Whether a style can paint backgrounds is read here only (the server says `kind`, no capability field).

import { getStyles, getThumbnail } from "./api.js";
import { deviceBlock } from "./device-mode.js";
import { $, within } from "./dom.js";
import { styleAbout, translate } from "./i18n.js";

/** @import { StyleInfo } from "./api.js" */
/** @import { PageStore, State } from "./store.js" */
/** @import { Lang, Translate } from "./i18n.js" */

const THUMB_RETRY_MS = 3000;
const PREPARING_POLL_MS = 5000;

// Styles that paint whole pictures, so can paint the background around anime faces.
/** @param {StyleInfo} style */
export const paintsBackgrounds = (style) => style.kind !== "face";

/** @param {State} state */
export const usableStyles = (state) => state.styles.filter((s) => s.available);

// "Hayao (AnimeGANv3)" → ["Hayao", "AnimeGANv3"].
/**
 * @param {string} label
 * @returns {[string, string]}
 */
export function splitLabel(label) {
  const m = /^(.*?)\s*\((.*)\)\s*$/.exec(label);
  return m ? [m[1], m[2]] : [label, ""];
}

// The short name of a style id, for the result line.
/**
 * @param {State} state
 * @param {string} id
 */
export function styleName(state, id) {
  const style = state.styles.find((s) => s.id === id);
  return style ? splitLabel(style.label)[0] : id;
}

// The background style the page would send: the chosen one while it is still offered, else none ("same as style").
/** @param {State} state */
export function offeredBackground(state) {
  const id = state.options.background;
  return id && usableStyles(state).some((s) => s.id === id && paintsBackgrounds(s)) ? id : "";
}

/** @param {StyleInfo[]} styles */
const preparing = (styles) => styles.some((s) => s.state === "converting" || s.state === "optimising");

// First load: the saved style if it can paint here, else the server's default, else the first that can.
/**
 * @param {PageStore} store
 * @param {() => void} onFailure
 */
export async function loadStyles(store, onFailure) {
  let styles;
  try { styles = await getStyles(); } catch (_) { onFailure(); return; }
  let saved = null;
  try { saved = localStorage.getItem("anipaint.style"); } catch (_) { /* ignore */ }
  const usable = styles.filter((s) => s.available);
  const pick = usable.find((s) => s.id === saved) || usable.find((s) => s.default) || usable[0];
  store.update({ styles, stylesLoaded: true, style: pick ? pick.id : null });
  for (const s of usable) loadThumbnail(store, s.id, s.thumbnail, 0);
  if (preparing(styles)) setTimeout(() => refreshStyles(store), PREPARING_POLL_MS);
}

// Styles the server is still converting or optimising in the background: refresh their state until ready.
/** @param {PageStore} store */
async function refreshStyles(store) {
  try {
    const styles = await getStyles();
    const known = new Set(usableStyles(store.state).map((s) => s.id));
    store.update({ styles });
    for (const s of usableStyles(store.state)) if (!known.has(s.id)) loadThumbnail(store, s.id, s.thumbnail, 0);
  } catch (_) { /* try again later */ }
  if (preparing(store.state.styles)) setTimeout(() => refreshStyles(store), PREPARING_POLL_MS);
}

/**
 * @param {PageStore} store
 * @param {string} id
 * @param {string} url
 * @param {number} tries
 */
async function loadThumbnail(store, id, url, tries) {
  try {
    const thumb = await getThumbnail(url, tries > 0);
    if (!thumb) return;
    const old = store.state.thumbs[id];
    if (old) URL.revokeObjectURL(old.url);
    store.update((s) => ({ thumbs: { ...s.thumbs, [id]: { url: URL.createObjectURL(thumb.blob), pending: thumb.pending } } }));
    if (thumb.pending && tries < 40) setTimeout(() => loadThumbnail(store, id, url, tries + 1), THUMB_RETRY_MS);
  } catch (_) {
    if (tries < 5) setTimeout(() => loadThumbnail(store, id, url, tries + 1), THUMB_RETRY_MS);
  }
}

/**
 * @param {PageStore} store
 * @param {string} id
 */
export function selectStyle(store, id) {
  try { localStorage.setItem("anipaint.style", id); } catch (_) { /* ignore */ }
  store.update({ style: id });
}

// Text with `code` spans, built as nodes (never as HTML).
/**
 * @param {HTMLElement} el
 * @param {string} text
 */
function setCodeText(el, text) {
  el.textContent = "";
  text.split("`").forEach((part, i) => {
    if (!part) return;
    if (i % 2) { const code = document.createElement("code"); code.textContent = part; el.appendChild(code); }
    else el.appendChild(document.createTextNode(part));
  });
}

/**
 * @param {PageStore} store
 * @param {string} id
 */
function newCard(store, id) {
  const card = document.createElement("label");
  card.className = "style-card";
  card.dataset.style = id;
  card.setAttribute("data-testid", `style-${id}`);
  card.innerHTML = '<input type="radio" name="style"><span class="thumb pending"><img alt="">' +
    '<span class="badge" hidden></span></span><span class="tick" aria-hidden="true">✓</span>' +
    '<span class="name"></span><span class="reason"></span>';
  const input = /** @type {HTMLInputElement} */ (within(card, "input"));
  input.value = id;
  input.addEventListener("change", () => selectStyle(store, id));
  return card;
}

// Only the styles that can paint here get a card: which others an operator can add is `anipaint styles`' business.
/**
 * @param {PageStore} store
 * @param {State} s
 */
function drawStyles(store, s) {
  if (!s.stylesLoaded) return;
  /** @type {Translate} */
  const t = (key, vars) => translate(s.lang, key, vars);
  const box = $("styles");
  const usable = usableStyles(s);
  const commercialOnly = Boolean(s.config && s.config.commercial_only);
  /** @type {NodeListOf<HTMLElement>} */
  const drawn = box.querySelectorAll(".style-card");
  const cards = new Map([...drawn].map((c) => [c.dataset.style, c]));
  for (const el of [...box.children]) if (!el.classList.contains("style-card")) el.remove();
  for (const [id, card] of cards) if (!usable.some((u) => u.id === id)) card.remove();
  if (!usable.length) {
    const empty = document.createElement("p");
    empty.className = "style-empty muted";
    empty.dataset.testid = "styles-empty";
    setCodeText(empty, t(commercialOnly ? "style.noneCommercial" : "style.none"));
    box.appendChild(empty);
  }
  for (const style of usable) {
    const card = cards.get(style.id) || box.appendChild(newCard(store, style.id));
    const [name, family] = splitLabel(style.label);
    within(card, ".name").textContent = name;
    const serverOnly = s.device.rows ? deviceBlock(s, style.id) : ""; // none before the device's list is read
    const status = serverOnly ? t("device.card") : stateText(t, s.lang, style);
    within(card, ".reason").textContent = [family, status].filter(Boolean).join(" · ");
    card.dataset.state = style.state || "";
    card.classList.toggle("unavailable", Boolean(serverOnly));
    card.title = [style.label, styleAbout(s.lang, style), t("style.licence", { id: style.licence }), serverOnly]
      .filter(Boolean).join("\n");
    card.dataset.licence = style.licence;
    card.classList.toggle("selected", style.id === s.style);
    /** @type {HTMLInputElement} */ (within(card, "input")).checked = style.id === s.style;
    const badge = within(card, ".badge");
    badge.hidden = !style.default;
    badge.textContent = t("style.default");
    const thumb = s.thumbs[style.id];
    const img = /** @type {HTMLImageElement} */ (within(card, "img"));
    if (thumb && img.getAttribute("src") !== thumb.url) img.src = thumb.url;
    within(card, ".thumb").classList.toggle("pending", !thumb || thumb.pending);
  }
  const chosen = s.styles.find((st) => st.id === s.style);
  $("style-note").textContent = chosen ? `${chosen.label} — ${styleAbout(s.lang, chosen)}` : "";
  drawLicence(t, s, chosen, commercialOnly);
}

/**
 * What a card says of its style's state: nothing once it is ready.
 * @param {Translate} t
 * @param {Lang} lang
 * @param {StyleInfo} style
 * @returns {string}
 */
function stateText(t, lang, style) {
  if (style.state === "converting" || style.state === "optimising") return t("style." + style.state);
  if (style.state !== "download") return "";
  if (!style.download_error) return t("style.download");
  const when = style.retry_at ? new Date(style.retry_at).toLocaleTimeString(lang) : "";
  return t("style.downloadFailed", { why: style.download_error, time: when });
}

/**
 * @param {Translate} t
 * @param {State} s
 * @param {StyleInfo | undefined} chosen
 * @param {boolean} commercialOnly
 */
function drawLicence(t, s, chosen, commercialOnly) {
  const box = $("style-licence");
  box.textContent = "";
  if (!chosen) {
    if (commercialOnly && s.styles.length) box.textContent = t("style.commercialOnly");
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

// The background select offers every usable style that paints whole pictures; "" (the first option) is the
// style's own.
/** @param {State} s */
function drawBackgrounds(s) {
  const select = /** @type {HTMLSelectElement} */ ($("background"));
  while (select.options.length > 1) select.remove(1);
  for (const style of usableStyles(s)) {
    if (!paintsBackgrounds(style)) continue;
    const option = document.createElement("option");
    option.value = style.id;
    option.textContent = splitLabel(style.label)[0];
    select.appendChild(option);
  }
  select.value = offeredBackground(s);
}

/** @param {PageStore} store */
export function watchStyles(store) {
  store.watch((s) => [s.lang, s.styles, s.stylesLoaded, s.style, s.config, s.thumbs, s.device],
    (s) => drawStyles(store, s));
  store.watch((s) => [s.styles, s.options.background], drawBackgrounds);
  const select = /** @type {HTMLSelectElement} */ ($("background"));
  select.addEventListener("change", () => {
    store.update((s) => ({ options: { ...s.options, background: select.value } }));
  });
}
