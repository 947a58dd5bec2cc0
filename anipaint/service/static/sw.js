// @ts-check
/// <reference lib="webworker" />
// The page's service worker (served at /sw.js, so its scope is the whole site): keeps what painting on this
// device needs, so that after one device paint the page loads and paints with the server out of reach.
//
// Model files (/device/models/<sha256>.onnx) are content-addressed: from the cache first, fetched once. Everything
// else it keeps (the page, its scripts, the runtime, the styles and their thumbnails, the config) comes from the
// network first, so the page is never stale while the server answers, and from the cache when it does not; what
// was fetched past this worker before it took control (the first visit's page, a device paint's runtime and
// model), the page sends here to be kept (offline.js).
// Paints, jobs, previews, readiness and metrics are never kept: offline they fail, which is how the page knows.

const SHELL = "anipaint-shell-v1";
const MODELS = "anipaint-models";
const KEEP = [/^\/$/, /^\/static\//, /^\/favicon\.ico$/, /^\/api\/(styles|config|device\/styles)$/,
  /^\/api\/styles\/[^/]+\/thumbnail$/];

// This scope: a service worker's (the program's `self` is typed as the page's window).
const sw = /** @type {ServiceWorkerGlobalScope} */ (/** @type {unknown} */ (self));

sw.addEventListener("install", () => sw.skipWaiting());
sw.addEventListener("activate", (event) => {
  event.waitUntil((async () => {
    for (const name of await caches.keys()) if (name !== SHELL && name !== MODELS) await caches.delete(name);
    await sw.clients.claim();
  })());
});

/**
 * @param {Request} request
 * @returns {Promise<Response>}
 */
async function modelFirst(request) {
  const cache = await caches.open(MODELS);
  const hit = await cache.match(request);
  if (hit) return hit;
  const res = await fetch(request);
  // The worker checks the sha256 and deletes a cached file that fails it.
  if (res.ok) await cache.put(request, res.clone());
  return res;
}

/**
 * @param {Request} request
 * @returns {Promise<Response>}
 */
async function networkFirst(request) {
  const cache = await caches.open(SHELL);
  try {
    const res = await fetch(request);
    if (res.status === 200) {
      // The runtime is 30 MB: not written again when the cached copy is the same file (its ETag).
      const tag = res.headers.get("ETag");
      const old = tag && (await cache.match(request, { ignoreVary: true }));
      if (!old || old.headers.get("ETag") !== tag) await cache.put(request, res.clone());
    }
    return res;
  } catch (error) {
    const hit = await cache.match(request, { ignoreVary: true });
    if (hit) return hit;
    throw error;
  }
}

// The page hands over what was fetched past this worker (before it took control: offline.js). Kept as if fetched
// through it, unless already kept: the runtime is 30 MB, and the page hands it over after every device paint.
/** @param {string} href */
async function keepHandedOver(href) {
  const url = new URL(href);
  if (url.origin !== sw.location.origin) return;
  const request = new Request(url);
  if (url.pathname.startsWith("/device/models/")) await modelFirst(request);
  else if (KEEP.some((re) => re.test(url.pathname))
           && !(await (await caches.open(SHELL)).match(request, { ignoreVary: true }))) await networkFirst(request);
}

sw.addEventListener("message", (event) => {
  /** @type {string[]} */
  const urls = (event.data && event.data.keep) || [];
  event.waitUntil((async () => {
    for (const href of urls) {
      try { await keepHandedOver(href); } catch (_) { /* gone meanwhile: kept on its next fetch */ }
    }
    event.source?.postMessage({ kept: true });
  })());
});

sw.addEventListener("fetch", (event) => {
  const { request } = event;
  const url = new URL(request.url);
  if (request.method !== "GET" || url.origin !== sw.location.origin) return;
  if (url.pathname.startsWith("/device/models/")) event.respondWith(modelFirst(request));
  else if (KEEP.some((re) => re.test(url.pathname))) event.respondWith(networkFirst(request));
});
