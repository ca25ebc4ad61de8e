// enhance.js is what inbox.js, bulk.js and playground.js share: the
// feature check, the form helpers, the fetch that posts a form for an
// NDJSON answer and the reader of that answer, line by line. It defines
// one global, window.enhance, and only in a browser that can stream a
// fetch's body; without it the page scripts return at once, and every
// form submits natively.
//
// It is a classic script, not an ES module, loaded with defer before the
// others: deferred scripts run in document order, and the layout puts this
// one in the head ahead of inbox.js (also in the head), bulk.js and
// playground.js (in their pages' bodies). Modules would need type="module"
// on every script tag and would leave out the browsers that stream fetch
// but have no modules, to save one global name; one namespace is all the
// pages need.
(function () {
	'use strict';

	if (typeof window.fetch !== 'function' ||
		typeof window.ReadableStream !== 'function' ||
		typeof window.TextDecoder !== 'function' ||
		typeof window.URLSearchParams !== 'function' ||
		typeof window.FormData !== 'function') {
		return;
	}

	// A form exposes its named controls as properties, which shadow the
	// form's own (an input named "action" hides form.action, one named
	// "submit" hides form.submit). Schema fields may have any name, so call
	// the prototypes' methods directly.
	var E = Element.prototype;
	var submitNative = HTMLFormElement.prototype.submit;
	function attr(el, name) { return E.getAttribute.call(el, name); }
	function hasAttr(el, name) { return E.hasAttribute.call(el, name); }
	function setAttr(el, name, value) { E.setAttribute.call(el, name, value); }
	function removeAttr(el, name) { E.removeAttribute.call(el, name); }
	function matches(el, sel) { return E.matches.call(el, sel); }
	function closest(el, sel) { return E.closest.call(el, sel); }
	function all(el, sel) { return E.querySelectorAll.call(el, sel); }
	function one(el, sel) { return E.querySelector.call(el, sel); }
	function append(el, child) { return Node.prototype.appendChild.call(el, child); }

	function plural(n, one, many) {
		return n + ' ' + (n === 1 ? one : many);
	}

	var CONTROLS = 'input, select, textarea, button, fieldset';

	// disable turns every control off at once, so a double click or a
	// second Enter sends nothing more, and remembers which were off already.
	function disable(form) {
		all(form, CONTROLS).forEach(function (c) {
			if (c.disabled) setAttr(c, 'data-was-disabled', '');
			c.disabled = true;
		});
		setAttr(form, 'aria-busy', 'true');
	}

	function enable(form) {
		all(form, CONTROLS).forEach(function (c) {
			if (hasAttr(c, 'data-was-disabled')) {
				removeAttr(c, 'data-was-disabled');
			} else {
				c.disabled = false;
			}
		});
		removeAttr(form, 'aria-busy');
	}

	// The button that last submitted each form, for browsers without
	// SubmitEvent.submitter.
	var lastButton = new WeakMap();
	document.addEventListener('click', function (event) {
		var button = event.target instanceof Element ? closest(event.target, 'button, input[type="submit"]') : null;
		if (button && button.form) lastButton.set(button.form, button);
	}, true);

	function submitter(event) {
		return event.submitter !== undefined ? event.submitter : lastButton.get(event.target) || null;
	}

	// body is what the form would post, the submitting button's name and
	// value included. Collect it before disabling the form: disabled
	// controls are not submitted.
	function body(form, button) {
		var data = new FormData(form);
		if (button && button.name) data.append(button.name, button.value);
		return new URLSearchParams(data);
	}

	function action(form) {
		return new URL(attr(form, 'action') || '', window.location.href).href;
	}

	// post sends a form's body asking for an NDJSON answer. A redirect is
	// not followed: it is how the server refuses (a 303 with a flash, or to
	// the sign-in page), and the caller decides where to go.
	function post(url, data) {
		return window.fetch(url, {
			method: 'POST',
			body: data,
			headers: { 'Accept': 'application/x-ndjson' },
			redirect: 'manual',
			credentials: 'same-origin'
		});
	}

	// isRedirect tells a redirect that post did not follow (an opaque
	// redirect has status 0).
	function isRedirect(response) {
		return response.type === 'opaqueredirect' || response.status === 0 ||
			(response.status >= 300 && response.status < 400);
	}

	// readLines reads an NDJSON answer as it arrives and calls each(msg)
	// with every line that is a JSON object, in order; lines that are empty
	// or not JSON are skipped. A line may arrive in pieces, and a character
	// split between two chunks is decoded whole. It resolves true as soon as
	// each returns true (and cancels the rest of the body), false when the
	// body ended first, and rejects when the stream breaks.
	async function readLines(response, each) {
		var decoder = new TextDecoder();
		var buffered = '';
		function feed(chunk, last) {
			buffered += chunk;
			var parts = buffered.split('\n');
			buffered = last ? '' : parts.pop();
			for (var i = 0; i < parts.length; i++) {
				var line = parts[i].trim();
				if (!line) continue;
				var msg;
				try {
					msg = JSON.parse(line);
				} catch (e) {
					continue;
				}
				if (msg && typeof msg === 'object' && each(msg)) return true;
			}
			return false;
		}
		if (!response.body || typeof response.body.getReader !== 'function') {
			return feed(await response.text(), true);
		}
		var reader = response.body.getReader();
		for (;;) {
			var r = await reader.read();
			if (r.done) return feed(decoder.decode(), true);
			if (feed(decoder.decode(r.value, { stream: true }), false)) {
				reader.cancel().catch(function () {});
				return true;
			}
		}
	}

	// forgetSubmitter drops the hidden copy of a submitter left by an earlier
	// native submission, which would otherwise send two decisions.
	function forgetSubmitter(form) {
		all(form, 'input[data-submitter]').forEach(function (el) { el.remove(); });
	}

	// submitNatively lets the browser post the form, so that the server
	// answers with its own page (the 422 form with field errors, a 403, a
	// 503…). The native submit() sends no submitter and fires no submit
	// event, so the button's name and value travel in a hidden input.
	function submitNatively(form, button) {
		forgetSubmitter(form);
		if (button && button.name) {
			var input = document.createElement('input');
			input.type = 'hidden';
			input.name = button.name;
			input.value = button.value;
			setAttr(input, 'data-submitter', '');
			append(form, input);
		}
		submitNative.call(form);
	}

	window.enhance = Object.freeze({
		attr: attr, hasAttr: hasAttr, setAttr: setAttr, removeAttr: removeAttr,
		matches: matches, closest: closest, all: all, one: one, append: append,
		plural: plural, disable: disable, enable: enable,
		submitter: submitter, body: body, action: action, post: post, isRedirect: isRedirect,
		readLines: readLines, forgetSubmitter: forgetSubmitter, submitNatively: submitNatively
	});
}());
