// @ts-check
// The DOM look-ups the page's views share. The markup (index.html, and the style cards styles.js builds) always has
// what they ask for, so a miss is a bug: it throws at once, naming what is missing.

/**
 * The page's element with id `id`.
 * @param {string} id
 * @returns {HTMLElement}
 */
export function $(id) {
  const el = document.getElementById(id);
  if (!el) throw new Error(`the page has no #${id}`);
  return el;
}

/**
 * The first element inside `root` that `selector` matches.
 * @param {ParentNode} root
 * @param {string} selector
 * @returns {HTMLElement}
 */
export function within(root, selector) {
  const el = root.querySelector(selector);
  if (!(el instanceof HTMLElement)) throw new Error(`nothing matches ${selector} here`);
  return el;
}
