// inbox.js streams the inbox's decision forms (form[data-stream]): it posts
// the form with fetch, shows a live step counter from the NDJSON answer and
// loads /inbox when the run settles. Every form works without it; whenever
// this script cannot do better it lets the browser submit the form natively.
(function () {
	'use strict';

	// Without streaming fetch there is nothing to enhance: the forms submit
	// natively.
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
	function matches(el, sel) { return E.matches.call(el, sel); }
	function closest(el, sel) { return E.closest.call(el, sel); }
	function all(el, sel) { return E.querySelectorAll.call(el, sel); }
	function one(el, sel) { return E.querySelector.call(el, sel); }
	function setAttr(el, name, value) { E.setAttribute.call(el, name, value); }
	function removeAttr(el, name) { E.removeAttribute.call(el, name); }
	function append(el, child) { return Node.prototype.appendChild.call(el, child); }

	var CONTROLS = 'input, select, textarea, button, fieldset';
	var busy = new WeakSet();
	// The button that last submitted each form, for browsers without
	// SubmitEvent.submitter.
	var lastButton = new WeakMap();

	function steps(n) {
		return n + (n === 1 ? ' step' : ' steps');
	}

	function progressOf(form) {
		var run = closest(form, '[data-testid="inbox-run"]');
		return one(run || form, '[data-testid="progress"]');
	}

	function showProgress(el, text, n) {
		if (!el) return;
		el.hidden = false;
		el.textContent = text;
		if (typeof n === 'number') el.setAttribute('data-steps', String(n));
	}

	// disable turns every control off at once, so a double click or a
	// second Enter sends nothing more, and remembers which were off already.
	function disable(form) {
		all(form, CONTROLS).forEach(function (el) {
			if (el.disabled) el.setAttribute('data-was-disabled', '');
			el.disabled = true;
		});
		setAttr(form, 'aria-busy', 'true');
	}

	function enable(form) {
		all(form, CONTROLS).forEach(function (el) {
			if (el.hasAttribute('data-was-disabled')) {
				el.removeAttribute('data-was-disabled');
			} else {
				el.disabled = false;
			}
		});
		removeAttr(form, 'aria-busy');
	}

	// forgetSubmitter drops the hidden copy of a submitter left by an earlier
	// native submission, which would otherwise send two decisions.
	function forgetSubmitter(form) {
		all(form, 'input[data-submitter]').forEach(function (el) { el.remove(); });
	}

	// fallBack submits the form natively so that the server answers with its
	// own page (the 422 form with field errors, a 403, a 503…). The native
	// submit() sends no submitter and fires no submit event, so the button's
	// name and value travel in a hidden input.
	function fallBack(form, submitter, progress) {
		enable(form);
		forgetSubmitter(form);
		if (submitter && submitter.name) {
			var input = document.createElement('input');
			input.type = 'hidden';
			input.name = submitter.name;
			input.value = submitter.value;
			input.setAttribute('data-submitter', '');
			append(form, input);
		}
		if (progress) progress.hidden = true;
		busy.delete(form);
		submitNative.call(form);
	}

	function toInbox() {
		window.location.assign('/inbox');
	}

	// handle applies one NDJSON line; it answers true once the run settled
	// (or the server ended the stream with an error line).
	function handle(line, progress, state) {
		var msg;
		try {
			msg = JSON.parse(line);
		} catch (e) {
			return false;
		}
		if (!msg || typeof msg !== 'object') return false;
		if (typeof msg.steps === 'number') state.steps = msg.steps;
		switch (msg.type) {
		case 'progress':
		case 'keepalive':
			// Who may read the run is told which tool runs, and since when;
			// the counter then ticks by itself between lines.
			state.tool = typeof msg.tool === 'string' ? msg.tool : '';
			state.toolSince = Date.now() - (typeof msg.tool_ms === 'number' ? msg.tool_ms : 0);
			state.verb = msg.type === 'progress' ? 'Continuing… ' : 'Still working… ';
			showState(progress, state);
			return false;
		case 'following':
			// Someone else's decision won this turn: the counter follows
			// their continuation.
			state.verb = 'Following ' + (msg.decision && msg.decision.by ? msg.decision.by + '’s' : 'an earlier') + ' decision… ';
			showState(progress, state);
			return false;
		case 'settled':
		case 'error':
			return true;
		default:
			return false;
		}
	}

	// showState shows the counter, and the tool that runs with its time.
	function showState(progress, state) {
		var text = state.verb + steps(state.steps);
		if (state.tool) {
			text += ' · ' + state.tool + ', ' + Math.max(0, Math.round((Date.now() - state.toolSince) / 1000)) + ' s…';
		}
		showProgress(progress, text, state.steps);
	}

	// follow reads the stream line by line. Whatever way it ends (settled,
	// end of body, a broken connection) the next page is /inbox: the run
	// goes on server-side and its outcome is the flash message there.
	async function follow(response, progress) {
		var state = { steps: 0, tool: '', toolSince: 0, verb: 'Continuing… ' };
		var ticking = window.setInterval(function () {
			if (state.tool) showState(progress, state);
		}, 1000);
		var decoder = new TextDecoder();
		var buffered = '';
		var lines = function (chunk, last) {
			buffered += chunk;
			var parts = buffered.split('\n');
			buffered = last ? '' : parts.pop();
			for (var i = 0; i < parts.length; i++) {
				var line = parts[i].trim();
				if (line && handle(line, progress, state)) return true;
			}
			return false;
		};
		try {
			if (!response.body || typeof response.body.getReader !== 'function') {
				lines(await response.text(), true);
				return;
			}
			var reader = response.body.getReader();
			for (;;) {
				var r = await reader.read();
				if (r.done) {
					lines(decoder.decode(), true);
					return;
				}
				if (lines(decoder.decode(r.value, { stream: true }), false)) {
					reader.cancel().catch(function () {});
					return;
				}
			}
		} catch (e) {
			// A broken stream: the continuation does not depend on us.
		} finally {
			window.clearInterval(ticking);
			toInbox();
		}
	}

	async function send(form, submitter) {
		var data = new FormData(form);
		if (submitter && submitter.name) data.append(submitter.name, submitter.value);
		// Collected before disabling: disabled controls are not submitted.
		var body = new URLSearchParams(data);
		var action = new URL(attr(form, 'action') || '', window.location.href).href;
		var progress = progressOf(form);

		disable(form);
		showProgress(progress, 'Continuing… ' + steps(0), 0);
		// The run waits no more: "waiting for 3 min" would be wrong now.
		var card = closest(form, '[data-testid="inbox-run"]');
		var waiting = card && one(card, '[data-testid="waiting-since"]');
		if (waiting) waiting.hidden = true;

		var response;
		try {
			response = await window.fetch(action, {
				method: 'POST',
				body: body,
				headers: { 'Accept': 'application/x-ndjson' },
				redirect: 'manual',
				credentials: 'same-origin'
			});
		} catch (e) {
			// No answer at all: let the browser try, and show what it gets.
			// A repeated decision is harmless; the turn digest refuses it.
			fallBack(form, submitter, progress);
			return;
		}
		if (response.type === 'opaqueredirect' || response.status === 0 ||
			(response.status >= 300 && response.status < 400)) {
			// A refusal: 303 to /inbox with a flash message.
			toInbox();
			return;
		}
		if (response.status !== 200) {
			// 422 (the form with its errors) and every error page come from
			// the server itself.
			fallBack(form, submitter, progress);
			return;
		}
		await follow(response, progress);
	}

	document.addEventListener('click', function (event) {
		var button = event.target instanceof Element ? closest(event.target, 'button, input[type="submit"]') : null;
		if (button && button.form) lastButton.set(button.form, button);
	}, true);

	document.addEventListener('submit', function (event) {
		var form = event.target;
		if (!(form instanceof HTMLFormElement) || !matches(form, 'form[data-stream]')) return;
		if (event.defaultPrevented) return;
		event.preventDefault();
		if (busy.has(form)) return;
		busy.add(form);
		forgetSubmitter(form);
		var submitter = event.submitter !== undefined ? event.submitter : lastButton.get(form) || null;
		send(form, submitter);
	});

	// A page restored from the back/forward cache still shows a form frozen
	// mid-submission; make it usable again.
	window.addEventListener('pageshow', function (event) {
		if (!event.persisted) return;
		all(document.documentElement, 'form[data-stream]').forEach(function (form) {
			busy.delete(form);
			forgetSubmitter(form);
			enable(form);
			var progress = progressOf(form);
			if (progress) {
				progress.hidden = true;
				progress.textContent = '';
				progress.removeAttribute('data-steps');
			}
		});
	});

	// The inbox never reloads itself, so that nothing a person types is
	// lost: only the list of runs that continue in the background is kept
	// current, from a fragment of its own, while it lists any.
	var CONTINUING_EVERY = 3000;
	function keepContinuing(box) {
		if (!one(box, '[data-testid="continuing-run"]')) return;
		window.fetch('/inbox/continuing', { credentials: 'same-origin', headers: { 'Accept': 'text/html' } })
			.then(function (r) { return r.ok ? r.text() : null; })
			.then(function (html) {
				if (html !== null) box.innerHTML = html;
				window.setTimeout(function () { keepContinuing(box); }, CONTINUING_EVERY);
			}, function () {
				window.setTimeout(function () { keepContinuing(box); }, CONTINUING_EVERY);
			});
	}
	var continuing = one(document.documentElement, '[data-continuing]');
	if (continuing) window.setTimeout(function () { keepContinuing(continuing); }, CONTINUING_EVERY);
}());
