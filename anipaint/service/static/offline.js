// The page offline: the service worker (/sw.js) keeps the page, its scripts, the styles and, once used, the
// runtime and the device models, so that after one paint on this device the page loads and paints with the
// server out of reach.

export async function keepOffline() {
  if (!("serviceWorker" in navigator)) return;
  try {
    await navigator.serviceWorker.register("/sw.js");
  } catch (_) {
    // No offline copy (a private window, say): the page works as before while the server answers.
  }
}
