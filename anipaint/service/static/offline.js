// The page offline: the service worker (/sw.js) keeps the page, its scripts, the styles and, once used, the
// runtime and the device models, so that after one paint on this device the page loads and paints with the
// server out of reach. It keeps what passes through it. What was loaded before it took control went past it:
// the page itself, its modules and thumbnails on the first visit, and everything a device paint started before
// then fetched (its worker stays outside the service worker for good). Those are handed to it here, once it has
// control; <html data-offline> says "keeping" while it fetches them and "kept" once it has them all.

let control = null; // Promise of the active service worker once it controls this page; null where there is none
let handing = 0; // hand-overs not yet answered

function mark(state) {
  document.documentElement.dataset.offline = state;
}

// Hands `urls` (or what `urls()` lists once the service worker has control) to the service worker to keep;
// what it does not keep, it leaves. Returns at once.
export function keepForOffline(urls) {
  if (!control || (Array.isArray(urls) && !urls.length)) return;
  handing += 1;
  mark("keeping");
  control.then((active) => {
    if (active) active.postMessage({ keep: typeof urls === "function" ? urls() : urls });
    else if (--handing === 0) mark("none");
  });
}

export function keepOffline() {
  if (!("serviceWorker" in navigator)) return;
  control = (async () => {
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
        if (event.data && event.data.kept && --handing === 0) mark("kept");
      });
      return active;
    } catch (_) {
      // No offline copy (a private window, say): the page works as before while the server answers.
      return null;
    }
  })();
  keepForOffline(() => [new URL("/", location.href).href,
    ...performance.getEntriesByType("resource").map((entry) => entry.name)]);
}
