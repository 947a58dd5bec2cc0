// Every string the page shows, in English and Chinese, and the view that writes them into the static markup.
// The language is the saved choice, else navigator.language (zh* → zh).

export const STRINGS = {
  en: {
    "doc.title": "AniPaint — photos into anime paintings",
    "tagline": "Turn your photos into anime paintings",
    "lang.switch": "中文",
    "status.starting": "Warming up…",
    "status.ready": "Ready",
    "status.down": "Offline",
    "status.empty": "No styles here",
    "step.photo": "Choose a photo",
    "drop.title": "Drop a photo here",
    "drop.hint": "or click to choose · paste with Ctrl+V",
    "drop.limit": "JPEG, PNG, WebP, GIF, BMP, TIFF, AVIF or HEIC/HEIF · up to {mb} MB",
    "drop.change": "Choose another",
    "step.style": "Pick a style",
    "style.default": "default",
    "style.unavailable": "Not available here",
    "style.converting": "converting…",
    "style.optimising": "optimising…",
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
    "download": "Download PNG",
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
    "style.more": "{n} more styles can be added here: `anipaint models fetch <style>` or their files in the models folder (see the README).",
    "style.none": "No style is available here yet: run `anipaint models prepare` or `anipaint models fetch <style>`.",
    "style.commercialOnly": "This server offers only styles whose licence allows commercial use.",
    "style.noneCommercial": "No style here is cleared for commercial use, and this server offers only those. See the README's licence table.",
    "strength.label": "Style strength",
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
    "step.photo": "选择照片",
    "drop.title": "把照片拖到这里",
    "drop.hint": "或点击选择 · 也可以 Ctrl+V 粘贴",
    "drop.limit": "支持 JPEG、PNG、WebP、GIF、BMP、TIFF、AVIF、HEIC/HEIF · 最大 {mb} MB",
    "drop.change": "换一张",
    "step.style": "选择风格",
    "style.default": "默认",
    "style.unavailable": "此处不可用",
    "style.converting": "转换中…",
    "style.optimising": "优化中…",
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
    "download": "下载 PNG",
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
    "style.more": "还可以添加 {n} 个风格：运行 `anipaint models fetch <风格>`，或把模型文件放进模型文件夹（见 README）。",
    "style.none": "这里还没有可用的风格：请运行 `anipaint models prepare` 或 `anipaint models fetch <风格>`。",
    "style.commercialOnly": "本服务只提供许可允许商业使用的风格。",
    "style.noneCommercial": "这里没有允许商业使用的风格，而本服务只提供这类风格。见 README 的许可表。",
    "strength.label": "风格强度",
    "footer.api": "API 文档",
  },
};

export function pickLanguage() {
  let saved = null;
  try { saved = localStorage.getItem("anipaint.lang"); } catch (_) { /* private mode */ }
  if (saved && STRINGS[saved]) return saved;
  const nav = (navigator.languages && navigator.languages[0]) || navigator.language || "en";
  return nav.toLowerCase().startsWith("zh") ? "zh" : "en";
}

export function saveLanguage(lang) {
  try { localStorage.setItem("anipaint.lang", lang); } catch (_) { /* ignore */ }
}

// The text for `key` in `lang` (English if missing there), with each {name} replaced by vars[name].
export function translate(lang, key, vars) {
  let text = (STRINGS[lang] && STRINGS[lang][key]) || STRINGS.en[key] || key;
  for (const [name, value] of Object.entries(vars || {})) text = text.split(`{${name}}`).join(String(value));
  return text;
}

// Every element with data-i18n gets its text (its other data-* attributes fill the {names}), the document its
// title and language.
export function watchStaticText(store) {
  store.watch((s) => [s.lang, s.config], (s) => {
    document.documentElement.lang = s.lang === "zh" ? "zh-CN" : "en";
    document.title = translate(s.lang, "doc.title");
    if (s.config) document.getElementById("drop-limit").dataset.mb = megabytes(s.config.max_upload_bytes);
    for (const el of document.querySelectorAll("[data-i18n]")) el.textContent = translate(s.lang, el.dataset.i18n, el.dataset);
    document.getElementById("compare-slider").setAttribute("aria-label", translate(s.lang, "compare.label"));
  });
}

export const megabytes = (bytes) => Math.round(bytes / (1024 * 1024));
