// The page offline: the service worker (/sw.js) keeps the page, its scripts, the styles and, once used, the
// runtime and the device models, so that after one paint on this device the page loads and paints with the
// server out of reach. It keeps what passes through it; what the page loaded before it took control (the page
// itself, its modules, the thumbnails: the first visit) is handed to it here once it is active.

export async function keepOffline() {
  if (!("serviceWorker" in navigator)) return;
  try {
    await navigator.serviceWorker.register("/sw.js");
    const { active } = await navigator.serviceWorker.ready;
    // The first visit: in control once it has claimed this page, and only then does it see the device's fetches.
    if (!navigator.serviceWorker.controller) {
      await new Promise((resolve) => {
        navigator.serviceWorker.addEventListener("controllerchange", resolve, { once: true });
      });
    }
    const loaded = performance.getEntriesByType("resource").map((entry) => entry.name);
    navigator.serviceWorker.addEventListener("message", (event) => {
      // For whoever waits on it (the tests): the offline copy of this page is complete.
      if (event.data && event.data.kept) document.documentElement.dataset.offline = "kept";
    });
    active.postMessage({ keep: [new URL("/", location.href).href, ...loaded] });
  } catch (_) {
    // No offline copy (a private window, say): the page works as before while the server answers.
  }
}
