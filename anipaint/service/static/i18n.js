// @ts-check
// Every string the page shows, in English and Chinese, and the view that writes them into the static markup.
// The language is the saved choice, else navigator.language (zh* → zh).

import { $ } from "./dom.js";

/** @import { StyleInfo } from "./api.js" */
/** @import { PageStore } from "./store.js" */
/** @typedef {"en" | "zh"} Lang */
/** @typedef {(key: string, vars?: Readonly<Record<string, unknown>>) => string} Translate  translate() in a language */

/** @type {Record<Lang, Record<string, string>>} */
export const STRINGS = {
  en: {
    "doc.title": "AniPaint — photos into anime paintings",
    "tagline": "Turn your photos into anime paintings",
    "lang.switch": "中文",
    "status.starting": "Warming up…",
    "status.ready": "Ready",
    "status.down": "Offline",
    "status.empty": "No styles here",
    "step.photo": "Choose a photo or video",
    "drop.title": "Drop a photo or video here",
    "drop.hint": "or click to choose · paste with Ctrl+V",
    "drop.limit": "JPEG, PNG, WebP, GIF, BMP, TIFF, AVIF or HEIC/HEIF · up to {mb} MB",
    "drop.change": "Choose another",
    "step.style": "Pick a style",
    "style.default": "default",
    "style.unavailable": "Not available here",
    "style.converting": "converting…",
    "style.optimising": "optimising…",
    "style.download": "download on first use",
    "style.downloadFailed": "download failed: {why}, retry at {time}",
    "style.loading": "Loading styles…",
    "step.options": "Options",
    "opt.faces": "Face enhancement",
    "opt.faces.hint": "Repaints each face at its own resolution",
    "opt.portrait": "Anime faces",
    "opt.portrait.hint": "Turns each face into an anime face",
    "opt.background": "Background style",
    "opt.background.same": "Same as style",
    "result.faces": "{n} anime faces",
    "opt.size": "Size",
    "opt.original": "Original",
    "paint": "Paint it",
    "painting": "Painting…",
    "cancel": "Cancel",
    "result.title": "Your anime picture",
    "result.empty": "Your painting will appear here.",
    "result.empty.hint": "Choose a photo and a style, then press “Paint it”.",
    "progress.uploading": "Uploading…",
    "progress.queued": "Waiting in line — position {n}",
    "stage.queued": "Waiting in line…",
    "stage.starting": "Getting the brushes ready…",
    "stage.decode": "Reading your photo…",
    "stage.paint": "Painting…",
    "stage.faces": "Touching up faces…",
    "stage.encode": "Finishing touches…",
    "stage.done": "Done!",
    "compare.before": "Before",
    "compare.after": "After",
    "compare.label": "Drag to compare before and after",
    "download": "Download {type}",
    "result.info": "{style} · {w}×{h} · {s} s",
    "err.busy": "The painter is busy — please try again in a moment",
    "err.busy.retry": "Try again in about {n} s.",
    "err.tooBig": "That picture is too big — please choose a smaller one",
    "err.tooBig.limit": "Up to {mb} MB and {mp} megapixels.",
    "err.notImage": "That file is not a picture we can read — try a JPEG or PNG",
    "err.style": "That style is not available right now",
    "err.timeout": "That took too long — try the 512 size",
    "err.failed": "Painting failed",
    "err.network": "Cannot reach the painter — check your connection",
    "err.noFile": "Choose a photo first",
    "err.gone": "The picture expired — please paint it again",
    "footer.licence": "Each style's model weights carry their own licence, shown with the style.",
    "style.licence": "Licence: {id}",
    "style.licence.commercial": "commercial use allowed",
    "style.licence.noncommercial": "not for commercial use",
    "style.none": "No style can paint here yet. Please come back in a little while.",
    "style.commercialOnly": "This server offers only styles whose licence allows commercial use.",
    "style.noneCommercial": "No style here is cleared for commercial use, and this site offers only those.",
    "strength.label": "Style strength",
    "opt.device": "Paint on this device",
    "opt.device.hint": "Your photo stays in this browser; turning this on downloads the painter once",
    "opt.device.unsupported": "This browser cannot paint on the device ({why})",
    "opt.needsServer": "Needs the server: off while painting on this device",
    "opt.original.device": "Up to {n} px on this device",
    "device.style": "{style} cannot paint on this device: {why}",
    "device.notReady": "its model is not ready yet, paint it on the server meanwhile",
    "device.loading": "checking which styles this device can paint…",
    "device.noList": "the list of styles this device can paint could not be read",
    "device.card": "server only",
    "device.offline": "The server cannot be reached: painting on this device still works",
    "device.offline.off": "The server cannot be reached: turn on “Paint on this device” to paint without it",
    "device.damaged": "This style's model file on this device was damaged (it failed its checksum) and was not used: painting downloads it again",
    "stage.download": "Downloading the painter…",
    "result.device": "painted on this device ({ep})",
    "result.server": "painted on the server",
    "err.checksum": "The style's model file is damaged and was not used",
    "err.deviceDecode": "This browser cannot read this photo, so it cannot be painted on this device: turn off “Paint on this device” to paint it on the server",
    "err.device": "Painting on this device failed",
    "drop.clip": "Videos: MP4, MOV or WebM, or an animated GIF, WebP or PNG · up to {vmb} MB and {vs} s",
    "opt.steady": "Steady video",
    "opt.steady.hint": "Keeps each frame steady with the last, so the style does not flicker",
    "opt.clip": "Anime faces and a background style are for photos: a video is painted in one style",
    "camera.start": "Camera",
    "camera.hint": "live, painted on this device: nothing is uploaded",
    "camera.starting": "Starting the camera…",
    "camera.waiting": "Getting the painter ready…",
    "camera.stats": "{fps} fps · {w}×{h} · {ep}",
    "camera.take": "Take picture",
    "camera.record": "Record",
    "camera.recordStop": "Stop recording",
    "camera.pause": "Pause",
    "camera.resume": "Resume",
    "camera.leave": "Leave camera",
    "camera.smoother": "Smoother",
    "camera.sharper": "Sharper",
    "camera.clip": "Download clip",
    "camera.alt": "Live anime painting of your camera's view",
    "camera.err.noCamera": "No camera was found on this device.",
    "camera.err.refused": "The camera was not allowed: allow it in the browser's address bar and press Camera again.",
    "camera.err.inUse": "The camera is in use by another app: close it and press Camera again.",
    "camera.err.style": "This style cannot paint live on this device: pick one that can.",
    "camera.err.unsupported": "This browser cannot paint on the device, so the camera cannot be painted live.",
    "camera.err.network": "The painter could not be downloaded: check the connection and press Camera again.",
    "camera.err.checksum": "The style's model file was damaged and was not used: press Camera again to download it.",
    "camera.err.failed": "The live camera stopped: something went wrong on this device.",
    "camera.slow": "This device paints under 2 frames a second even at the smallest size: try {style}, the quickest style.",
    "device.clip": "A video is painted on the server only, so it would leave this device.",
    "device.useServer": "Turn off “Paint on this device” to paint it there",
    "stage.decode.clip": "Reading your video…",
    "progress.frames": "Frame {n} of {total}",
    "progress.frame": "Frame {n}",
    "progress.eta": "about {time} left",
    "time.s": "{s} s",
    "time.min": "{m} min {s} s",
    "result.frames": "{n} frames",
    "err.clipTooBig": "That video is too big or too long",
    "err.tooBig.clip": "Videos up to {mb} MB and {s} s.",
    "err.notClip": "That video cannot be read — try an MP4",
    "footer.api": "API docs",
  },
  zh: {
    "doc.title": "AniPaint — 把照片变成动漫画",
    "tagline": "把你的照片变成动漫风格的画",
    "lang.switch": "English",
    "status.starting": "准备中…",
    "status.ready": "已就绪",
    "status.down": "离线",
    "status.empty": "没有可用风格",
    "step.photo": "选择照片或视频",
    "drop.title": "把照片或视频拖到这里",
    "drop.hint": "或点击选择 · 也可以 Ctrl+V 粘贴",
    "drop.limit": "支持 JPEG、PNG、WebP、GIF、BMP、TIFF、AVIF、HEIC/HEIF · 最大 {mb} MB",
    "drop.change": "换一张",
    "step.style": "选择风格",
    "style.default": "默认",
    "style.unavailable": "此处不可用",
    "style.converting": "转换中…",
    "style.optimising": "优化中…",
    "style.download": "首次使用时下载",
    "style.downloadFailed": "下载失败：{why}，{time} 重试",
    "style.loading": "正在加载风格…",
    "step.options": "选项",
    "opt.faces": "人脸增强",
    "opt.faces.hint": "单独重绘每张人脸，更清晰",
    "opt.portrait": "动漫脸",
    "opt.portrait.hint": "把每张人脸画成动漫角色的脸",
    "opt.background": "背景风格",
    "opt.background.same": "与所选风格相同",
    "result.faces": "{n} 张动漫脸",
    "opt.size": "尺寸",
    "opt.original": "原图",
    "paint": "开始绘制",
    "painting": "绘制中…",
    "cancel": "取消",
    "result.title": "你的动漫画",
    "result.empty": "绘制好的图片会显示在这里。",
    "result.empty.hint": "选择照片和风格，然后点击“开始绘制”。",
    "progress.uploading": "正在上传…",
    "progress.queued": "排队中 — 第 {n} 位",
    "stage.queued": "排队中…",
    "stage.starting": "正在准备画笔…",
    "stage.decode": "正在读取照片…",
    "stage.paint": "正在绘制…",
    "stage.faces": "正在优化人脸…",
    "stage.encode": "最后润色…",
    "stage.done": "完成！",
    "compare.before": "原图",
    "compare.after": "动漫",
    "compare.label": "拖动滑块对比前后效果",
    "download": "下载 {type}",
    "result.info": "{style} · {w}×{h} · {s} 秒",
    "err.busy": "系统繁忙，请稍后再试",
    "err.busy.retry": "大约 {n} 秒后再试。",
    "err.tooBig": "图片太大了，请换一张小一点的",
    "err.tooBig.limit": "最大 {mb} MB、{mp} 百万像素。",
    "err.notImage": "无法识别这个文件，请换一张 JPEG 或 PNG 图片",
    "err.style": "该风格暂时不可用",
    "err.timeout": "处理超时，请试试 512 尺寸",
    "err.failed": "绘制失败",
    "err.network": "无法连接服务器，请检查网络",
    "err.noFile": "请先选择一张照片",
    "err.gone": "图片已过期，请重新绘制",
    "footer.licence": "每个风格的模型权重都有各自的许可，见风格下方说明。",
    "style.licence": "许可：{id}",
    "style.licence.commercial": "允许商业使用",
    "style.licence.noncommercial": "不可商业使用",
    "style.none": "这里暂时还没有可用的风格，请稍后再来。",
    "style.commercialOnly": "本服务只提供许可允许商业使用的风格。",
    "style.noneCommercial": "这里没有允许商业使用的风格，而本站只提供这类风格。",
    "strength.label": "风格强度",
    "opt.device": "在本设备上绘制",
    "opt.device.hint": "照片只留在这个浏览器里；打开后会下载一次绘图程序",
    "opt.device.unsupported": "这个浏览器无法在本设备上绘制（{why}）",
    "opt.needsServer": "需要服务器：在本设备上绘制时不可用",
    "opt.original.device": "在本设备上最大 {n} 像素",
    "device.style": "{style} 无法在本设备上绘制：{why}",
    "device.notReady": "它的模型还没准备好，暂时请在服务器上绘制",
    "device.loading": "正在查看本设备能绘制哪些风格…",
    "device.noList": "无法读取本设备可绘制的风格列表",
    "device.card": "仅服务器",
    "device.offline": "无法连接服务器：仍可在本设备上绘制",
    "device.offline.off": "无法连接服务器：打开“在本设备上绘制”即可不用服务器绘制",
    "device.damaged": "本设备上该风格的模型文件已损坏（未通过校验），未被使用：绘制时会重新下载",
    "stage.download": "正在下载绘图程序…",
    "result.device": "在本设备上绘制（{ep}）",
    "result.server": "在服务器上绘制",
    "err.checksum": "该风格的模型文件已损坏，未被使用",
    "err.deviceDecode": "这个浏览器无法读取这张照片，所以不能在本设备上绘制：关闭“在本设备上绘制”即可在服务器上绘制",
    "err.device": "在本设备上绘制失败",
    "drop.clip": "视频：MP4、MOV、WebM，或 GIF、WebP、PNG 动图 · 最大 {vmb} MB、{vs} 秒",
    "opt.steady": "稳定视频",
    "opt.steady.hint": "让每一帧与上一帧保持一致，画风不闪烁",
    "opt.clip": "动漫脸和背景风格只用于照片：视频整体用一种风格绘制",
    "camera.start": "摄像头",
    "camera.hint": "实时在本设备上绘制：不会上传任何画面",
    "camera.starting": "正在打开摄像头…",
    "camera.waiting": "正在准备绘图程序…",
    "camera.stats": "{fps} 帧/秒 · {w}×{h} · {ep}",
    "camera.take": "拍照",
    "camera.record": "录制",
    "camera.recordStop": "停止录制",
    "camera.pause": "暂停",
    "camera.resume": "继续",
    "camera.leave": "关闭摄像头",
    "camera.smoother": "更流畅",
    "camera.sharper": "更清晰",
    "camera.clip": "下载视频",
    "camera.alt": "摄像头画面的实时动漫绘制",
    "camera.err.noCamera": "本设备上没有找到摄像头。",
    "camera.err.refused": "摄像头未获允许：请在浏览器地址栏中允许后再按“摄像头”。",
    "camera.err.inUse": "摄像头正被其他应用使用：请关闭它后再按“摄像头”。",
    "camera.err.style": "这个风格无法在本设备上实时绘制：请选择可以的风格。",
    "camera.err.unsupported": "这个浏览器无法在本设备上绘制，所以无法实时绘制摄像头画面。",
    "camera.err.network": "无法下载绘图程序：请检查网络后再按“摄像头”。",
    "camera.err.checksum": "该风格的模型文件已损坏，未被使用：再按“摄像头”即可重新下载。",
    "camera.err.failed": "实时摄像头已停止：本设备上出了问题。",
    "camera.slow": "即使在最小尺寸下，本设备每秒也画不到 2 帧：试试最快的风格 {style}。",
    "device.clip": "视频只能在服务器上绘制，所以需要离开本设备。",
    "device.useServer": "关闭“在本设备上绘制”即可在服务器上绘制",
    "stage.decode.clip": "正在读取视频…",
    "progress.frames": "第 {n} 帧，共 {total} 帧",
    "progress.frame": "第 {n} 帧",
    "progress.eta": "大约还需 {time}",
    "time.s": "{s} 秒",
    "time.min": "{m} 分 {s} 秒",
    "result.frames": "{n} 帧",
    "err.clipTooBig": "视频太大或太长了",
    "err.tooBig.clip": "视频最大 {mb} MB、{s} 秒。",
    "err.notClip": "无法读取这个视频，请换一个 MP4",
    "footer.api": "API 文档",
    "style.about.v3-hayao": "宫崎骏式的色彩；能画出脸上的眼睛和嘴。",
    "style.about.v3-shinkai": "明亮的天空和清透的光线，新海诚风格。",
    "style.about.v3-cute": "柔和可爱；最快的风格。",
    "style.about.v3-sketch": "白底上的粗黑墨线；整张照片和人脸都适用。",
    "style.about.v3-jp-face": "把对齐好的人脸裁切图变成动漫脸（大眼睛、干净的皮肤、手绘的头发）；用在整张照片上会抹掉人脸。",
    "style.about.whitebox": "平涂的卡通色块和干净的轮廓（White-box Cartoonization，带它自己的引导滤波）。",
    "style.about.cartoongan-shinkai": "干净的动画电影风格（轻量 ShuffleNet 生成器）；Apache-2.0 许可的风格。",
    "style.about.cartoongan-paprika": "棕褐色调，带有明显的棋盘格伪影；Apache-2.0 许可。",
    "style.about.v2-hayao": "官方的 AnimeGANv2 Hayao 生成器（int8 权重还原为浮点数）。",
    "style.about.v1-hayao": "最初的 AnimeGAN Hayao 风格。",
    "style.about.v1-shinkai": "最初的 AnimeGAN Shinkai 风格。",
    "style.about.v1-paprika": "最初的 AnimeGAN Paprika 风格。",
    "style.about.v1-charge": "由 AnimeGAN-js 的作者训练。",
    "style.about.v1-iblard": "由 AnimeGAN-js 的作者训练。",
    "style.about.v1-strange-daddy": "由 AnimeGAN-js 的作者训练。",
    "style.about.v2-face-paint-512-v2": "专为人脸训练；来自 PyTorch 移植版。",
    "style.about.v2-face-paint-512-v1": "专为人脸训练；来自 PyTorch 移植版。",
    "style.about.v2-celeba-distill": "来自 PyTorch 移植版的蒸馏人脸风格。",
    "style.about.v2-paprika": "来自 PyTorch 移植版的 Paprika 风格。",
  },
};

/**
 * @param {unknown} value
 * @returns {value is Lang}
 */
const isLang = (value) => typeof value === "string" && Object.keys(STRINGS).includes(value);

/** @returns {Lang} */
export function pickLanguage() {
  let saved = null;
  try { saved = localStorage.getItem("anipaint.lang"); } catch (_) { /* private mode */ }
  if (isLang(saved)) return saved;
  const nav = (navigator.languages && navigator.languages[0]) || navigator.language || "en";
  return nav.toLowerCase().startsWith("zh") ? "zh" : "en";
}

/** @param {Lang} lang */
export function saveLanguage(lang) {
  try { localStorage.setItem("anipaint.lang", lang); } catch (_) { /* ignore */ }
}

// The text for `key` in `lang` (English if missing there), with each {name} replaced by vars[name].
/**
 * @param {Lang} lang
 * @param {string} key
 * @param {Readonly<Record<string, unknown>>} [vars]
 * @returns {string}
 */
export function translate(lang, key, vars) {
  let text = (STRINGS[lang] && STRINGS[lang][key]) || STRINGS.en[key] || key;
  for (const [name, value] of Object.entries(vars || {})) text = text.split(`{${name}}`).join(String(value));
  return text;
}

// A style's one-line description in `lang`: the page's own translation where it has one (`style.about.<id>`),
// else the server's text, so a style the page does not know yet still says what it is.
/**
 * @param {Lang} lang
 * @param {StyleInfo} style
 * @returns {string}
 */
export function styleAbout(lang, style) {
  return (STRINGS[lang] && STRINGS[lang][`style.about.${style.id}`]) || style.description;
}

// Every element with data-i18n gets its text (its other data-* attributes fill the {names}), the document its
// title and language.
/** @param {PageStore} store */
export function watchStaticText(store) {
  store.watch((s) => [s.lang, s.config], (s) => {
    document.documentElement.lang = s.lang === "zh" ? "zh-CN" : "en";
    document.title = translate(s.lang, "doc.title");
    if (s.config) $("drop-limit").dataset.mb = String(megabytes(s.config.max_upload_bytes));
    if (s.config && s.config.video_max_bytes) {
      const clip = $("clip-limit").dataset;
      clip.vmb = String(megabytes(s.config.video_max_bytes));
      clip.vs = String(s.config.video_max_seconds);
    }
    for (const el of /** @type {NodeListOf<HTMLElement>} */ (document.querySelectorAll("[data-i18n]"))) {
      el.textContent = translate(s.lang, el.dataset.i18n || "", el.dataset);
    }
    $("compare-slider").setAttribute("aria-label", translate(s.lang, "compare.label"));
  });
}

/** @param {number} bytes */
export const megabytes = (bytes) => Math.round(bytes / (1024 * 1024));
