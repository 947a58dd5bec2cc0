// The page's one state object and who redraws when it changes: no framework, just update() and watch().
//
// Everything the page shows is drawn from `store.state`; a change is a new value for a top-level key (objects and
// arrays are replaced, never changed in place), so a view can tell what changed by identity alone.

export function createStore(initial) {
  const state = { ...initial };
  const views = [];
  let drawing = false;
  let again = false;

  // Calls `draw(state)` now and whenever one of `pick(state)`'s values is no longer the same (===).
  function watch(pick, draw) {
    const view = { pick, draw, seen: null };
    views.push(view);
    run(view);
  }

  function run(view) {
    const now = view.pick(state);
    if (view.seen && now.length === view.seen.length && now.every((v, i) => v === view.seen[i])) return;
    view.seen = now;
    view.draw(state);
  }

  // Merges `patch` (or what `patch(state)` returns) into the state and redraws the views it concerns, at once.
  function update(patch) {
    Object.assign(state, typeof patch === "function" ? patch(state) : patch);
    if (drawing) { again = true; return; } // an update from inside a view: drawn once this pass ends
    drawing = true;
    try {
      do {
        again = false;
        for (const view of views) run(view);
      } while (again);
    } finally {
      drawing = false;
    }
  }

  return { state, update, watch };
}

// What the state holds (app.js makes it; every other module reads it and changes it through update()).
export function initialState(lang, device) {
  return {
    lang, // "en" or "zh"
    server: "starting", // starting, ready, down, empty: the pill at the top
    config: null, // /api/config once read
    styles: [], // /api/styles
    stylesLoaded: false,
    style: null, // the chosen style's id
    thumbs: {}, // style id → {url (blob:), pending}
    file: null, // the chosen photo or clip (File or Blob), as uploaded to paint
    clip: null, // what the chosen file is when it moves: "video" or "animation" (clip.js); null for a photo
    fileUrl: null, // the object URL it is shown from: its own, or its server preview's (photo.js drawable)
    dragging: false,
    options: { faces: true, size: "512", portrait: false, background: "", temporal: true }, // temporal: "Steady video"
    device, // painting on this device: {on, support (why not: ""), rows (/api/device/styles), failed} (deviceMode.js)
    job: null, // the paint in progress: {file, beforeUrl, name, portrait, clip, started, controller}
    progress: null, // {stage, progress (0…1), position, frame, frames, eta} while a job runs
    // {url, width, height, style, seconds, portrait, facesFound, beforeUrl, name, blend, where, engine}; a painted
    // clip has {clip, mediaType, frames} and no blend
    result: null,
    download: null, // {href, name}: follows the strength slider once it is let go
    split: 50, // the compare slider, 0…100
    strength: 100, // the strength slider, 0…100
    message: null, // {kind, key, sub: text or {key, vars}}
    phase: "idle", // body[data-state]: idle, ready, uploading, queued, running, done, error
  };
}
