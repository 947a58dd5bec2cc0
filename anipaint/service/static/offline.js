// @ts-check
// The page offline: the service worker (/sw.js) keeps the page, its scripts, the styles and, once used, the
// runtime and the device models, so that after one paint on this device the page loads and paints with the
// server out of reach. It keeps what passes through it. What was loaded before it took control went past it:
// the page itself, its modules and thumbnails on the first visit, and everything a device paint started before
// then fetched (its worker stays outside the service worker for good). Those are handed to it here, once it has
// control; <html data-offline> says "keeping" while it fetches them and "kept" once it has them all
// (state.serviceWorker, state.offline).

/** @import { PageStore, State } from "./store.js" */

// A hand-over answered: once none is left, html[data-offline] says how the last one ended.
/**
 * @param {PageStore} store
 * @param {State["offline"]["mark"]} mark
 */
function answered(store, mark) {
  store.update((s) => {
    const handing = s.offline.handing - 1;
    return { offline: { handing, mark: handing === 0 ? mark : s.offline.mark } };
  });
}

// Hands `urls` (or what `urls()` lists once the service worker has control) to the service worker to keep;
// what it does not keep, it leaves. Returns at once.
/**
 * @param {PageStore} store
 * @param {string[] | (() => string[])} urls
 */
export function keepForOffline(store, urls) {
  const control = store.state.serviceWorker;
  if (!control || (Array.isArray(urls) && !urls.length)) return;
  store.update((s) => ({ offline: { handing: s.offline.handing + 1, mark: "keeping" } }));
  control.then((active) => {
    if (active) active.postMessage({ keep: typeof urls === "function" ? urls() : urls });
    else answered(store, "none");
  });
}

/** @param {PageStore} store */
export function keepOffline(store) {
  store.watch((s) => [s.offline], (s) => {
    if (s.offline.mark) document.documentElement.dataset.offline = s.offline.mark;
  });
  if (!("serviceWorker" in navigator)) return;
  const serviceWorker = (async () => {
    try {
      await navigator.serviceWorker.register("/sw.js");
      const { active } = await navigator.serviceWorker.ready;
      // The first visit: in control once it has claimed this page, and only then does it see this page's fetches.
      if (!navigator.serviceWorker.controller) {
        await new Promise((resolve) => {
          navigator.serviceWorker.addEventListener("controllerchange", resolve, { once: true });
        });
      }
      navigator.serviceWorker.addEventListener("message", (event) => {
        if (event.data && event.data.kept) answered(store, "kept");
      });
      return active;
    } catch (_) {
      // No offline copy (a private window, say): the page works as before while the server answers.
      return null;
    }
  })();
  store.update({ serviceWorker });
  keepForOffline(store, () => [new URL("/", location.href).href,
    ...performance.getEntriesByType("resource").map((entry) => entry.name)]);
}
