package browser

// The scripts run in the page. Each is an expression whose value chromedp
// decodes; what they return is the page's own text, untrusted.

// snapshotJS numbers the page's visible links, buttons and fields (the
// attribute data-loadout-ref), and returns the title, the URL, the
// visible text (at most %d characters) and the elements with their
// labels. It first waits for the page to settle: no change to the DOM
// for 300 ms, at most 2 s.
const snapshotJS = `(async () => {
  const maxText = %d, maxRefs = %d;
  await new Promise(done => {
    let quiet = setTimeout(finish, 300);
    const cap = setTimeout(finish, 2000);
    const mo = new MutationObserver(() => { clearTimeout(quiet); quiet = setTimeout(finish, 300); });
    function finish() { mo.disconnect(); clearTimeout(cap); clearTimeout(quiet); done(); }
    mo.observe(document, {subtree: true, childList: true, attributes: true, characterData: true});
  });
  const clip = (s, n) => { s = (s || '').replace(/\s+/g, ' ').trim(); return s.length > n ? s.slice(0, n) + '…' : s; };
  document.querySelectorAll('[data-loadout-ref]').forEach(e => e.removeAttribute('data-loadout-ref'));
  const sel = 'a[href], button, input:not([type=hidden]), select, textarea, [role=button], [role=link], summary';
  const refs = [];
  for (const e of document.querySelectorAll(sel)) {
    if (refs.length >= maxRefs) break;
    if (!e.getClientRects().length) continue;
    const n = refs.length + 1;
    e.setAttribute('data-loadout-ref', String(n));
    const tag = e.tagName.toLowerCase();
    const type = (e.getAttribute('type') || '').toLowerCase();
    let label = e.getAttribute('aria-label') || '';
    if (!label && e.labels && e.labels.length) {
      const l = e.labels[0].cloneNode(true);
      l.querySelectorAll('input, select, textarea, button').forEach(x => x.remove());
      label = l.textContent;
    }
    if (!label) label = e.innerText || e.getAttribute('placeholder') || e.getAttribute('title') || e.getAttribute('alt') || e.value || e.getAttribute('name') || '';
    const r = {ref: n, tag: tag, type: type, label: clip(label, 80), name: e.getAttribute('name') || ''};
    if (tag === 'a') r.href = clip(e.href, 200);
    if (tag === 'input' || tag === 'textarea') r.value = type === 'password' ? (e.value ? '••••' : '') : clip(e.value, 80);
    if (tag === 'select') r.options = Array.from(e.options).slice(0, 30).map(o => clip(o.text, 40));
    if (tag === 'select') r.value = e.selectedOptions.length ? clip(e.selectedOptions[0].text, 40) : '';
    refs.push(r);
  }
  const text = document.body ? document.body.innerText : '';
  return {title: document.title, url: location.href, text: text.length > maxText ? text.slice(0, maxText) : text,
    cut: text.length > maxText, refs: refs};
})()`

// formJS describes what acting on element %d would send: whether it
// submits a form (and the form's method, action and fields, with the
// value %s typed into the element when a text is given), and whether the
// form asks for payment. The element is found by its number.
const formJS = `(() => {
  const el = document.querySelector('[data-loadout-ref="%d"]');
  const typed = %s;
  if (!el) return {found: false};
  const tag = el.tagName.toLowerCase(), type = (el.getAttribute('type') || '').toLowerCase();
  const form = el.form || el.closest('form');
  const label = (el.innerText || el.value || el.getAttribute('aria-label') || '').replace(/\s+/g, ' ').trim().slice(0, 80);
  const buttonish = tag === 'button' || (tag === 'input' && ['submit', 'image', 'button'].includes(type)) || el.getAttribute('role') === 'button';
  let submits = false;
  if (form && (tag === 'button' && (type === '' || type === 'submit'))) submits = true;
  if (form && tag === 'input' && (type === 'submit' || type === 'image')) submits = true;
  if (typed !== null && form) submits = true;
  if (tag === 'select' && (el.getAttribute('onchange') || '').length) submits = true;
  const pay = /\b(buy|pay|order|checkout|check out|purchase|subscribe|donate|place order|book now)\b/i;
  const risky = buttonish && pay.test(label);
  const payField = e => {
    const ac = (e.getAttribute('autocomplete') || '').toLowerCase();
    const nm = ((e.getAttribute('name') || '') + ' ' + (e.id || '')).toLowerCase();
    return ac.includes('cc-') || /(card|cc-?num|cvc|cvv|csc|expir|iban)/.test(nm);
  };
  const scope = form || document;
  const payment = Array.from(scope.querySelectorAll('input, select')).some(payField);
  const out = {found: true, tag: tag, submits: submits, risky: risky, payment: payment, payField: payField(el), label: label, host: location.hostname};
  if (form) {
    out.method = (form.getAttribute('method') || 'get').toUpperCase();
    let action = form.action || location.href;
    try { action = new URL(action, location.href); out.action = action.host + action.pathname; out.actionHost = action.hostname; } catch (e) {}
    const fields = [];
    let more = 0;
    for (const e of form.elements) {
      if (!e.name || e.disabled) continue;
      const t = (e.getAttribute('type') || '').toLowerCase();
      if (['submit', 'image', 'button', 'reset', 'file'].includes(t)) continue;
      if ((t === 'checkbox' || t === 'radio') && !e.checked) continue;
      let v = e === el && typed !== null ? typed : e.value;
      if (e.tagName.toLowerCase() === 'select' && e.selectedOptions.length) v = e.selectedOptions[0].text;
      if (t === 'password') v = '(a password)';
      else if (payField(e) && v.length > 4) v = '•••• ' + v.slice(-4);
      if (v.length > 60) v = v.slice(0, 60) + '…';
      if (fields.length < 20) fields.push([e.name, v]); else more++;
    }
    out.fields = fields;
    out.more = more;
  }
  return out;
})()`

// actJS acts on element %d: "click", "type" (the text %s, then submit
// its form when %t) or "select" (the option %s, by its text or value).
const actJS = `(() => {
  const el = document.querySelector('[data-loadout-ref="%d"]');
  if (!el) return 'gone';
  const action = %q, text = %s, submit = %t;
  el.scrollIntoView({block: 'center'});
  if (action === 'click') { el.click(); return 'ok'; }
  el.focus();
  if (action === 'type') {
    const proto = el.tagName.toLowerCase() === 'textarea' ? HTMLTextAreaElement.prototype : HTMLInputElement.prototype;
    const set = Object.getOwnPropertyDescriptor(proto, 'value');
    if (!set || !('value' in el)) { if (el.isContentEditable) { el.innerText = text; } else { return 'not a field'; } }
    else set.set.call(el, text);
    el.dispatchEvent(new Event('input', {bubbles: true}));
    el.dispatchEvent(new Event('change', {bubbles: true}));
    if (submit) {
      const opts = {key: 'Enter', code: 'Enter', keyCode: 13, which: 13, bubbles: true, cancelable: true};
      const go = el.dispatchEvent(new KeyboardEvent('keydown', opts));
      el.dispatchEvent(new KeyboardEvent('keyup', opts));
      if (go && el.form) el.form.requestSubmit();
    }
    return 'ok';
  }
  if (action === 'select') {
    if (el.tagName.toLowerCase() !== 'select') return 'not a list';
    const want = text.trim().toLowerCase();
    const o = Array.from(el.options).find(o => o.text.trim().toLowerCase() === want || o.value.toLowerCase() === want);
    if (!o) return 'no option';
    el.value = o.value;
    el.dispatchEvent(new Event('input', {bubbles: true}));
    el.dispatchEvent(new Event('change', {bubbles: true}));
    return 'ok';
  }
  return 'unknown';
})()`

// scrollJS scrolls by most of a screen, down or up (%s).
const scrollJS = `(() => { window.scrollBy(0, (%s) * window.innerHeight * 0.85); return 'ok'; })()`
