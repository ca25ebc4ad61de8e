// inbox.js streams the inbox's decision forms (form[data-stream]): it posts
// the form with fetch, shows a live step counter from the NDJSON answer and
// loads /inbox when the run settles. Every form works without it (and
// without enhance.js, which it needs); whenever this script cannot do
// better it lets the browser submit the form natively.
(function () {
	'use strict';

	var E = window.enhance;
	if (!E) return;
	var closest = E.closest, one = E.one;
	var busy = new WeakSet();

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

	// fallBack submits the form natively so that the server answers with its
	// own page (the 422 form with field errors, a 403, a 503…).
	function fallBack(form, submitter, progress) {
		E.enable(form);
		if (progress) progress.hidden = true;
		busy.delete(form);
		E.submitNatively(form, submitter);
	}

	function toInbox() {
		window.location.assign('/inbox');
	}

	// handle applies one line of the answer; it answers true once the run
	// settled (or the server ended the stream with an error line).
	function handle(msg, progress, state) {
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
		var text = state.verb + E.plural(state.steps, 'step', 'steps');
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
		try {
			await E.readLines(response, function (msg) { return handle(msg, progress, state); });
		} catch (e) {
			// A broken stream: the continuation does not depend on us.
		} finally {
			window.clearInterval(ticking);
			toInbox();
		}
	}

	async function send(form, submitter) {
		var body = E.body(form, submitter);
		var action = E.action(form);
		var progress = progressOf(form);

		E.disable(form);
		showProgress(progress, 'Continuing… ' + E.plural(0, 'step', 'steps'), 0);
		// The run waits no more: "waiting for 3 min" would be wrong now.
		var card = closest(form, '[data-testid="inbox-run"]');
		var waiting = card && one(card, '[data-testid="waiting-since"]');
		if (waiting) waiting.hidden = true;

		var response;
		try {
			response = await E.post(action, body);
		} catch (e) {
			// No answer at all: let the browser try, and show what it gets.
			// A repeated decision is harmless; the turn digest refuses it.
			fallBack(form, submitter, progress);
			return;
		}
		if (E.isRedirect(response)) {
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

	document.addEventListener('submit', function (event) {
		var form = event.target;
		if (!(form instanceof HTMLFormElement) || !E.matches(form, 'form[data-stream]')) return;
		if (event.defaultPrevented) return;
		event.preventDefault();
		if (busy.has(form)) return;
		busy.add(form);
		E.forgetSubmitter(form);
		send(form, E.submitter(event));
	});

	// A page restored from the back/forward cache still shows a form frozen
	// mid-submission; make it usable again.
	window.addEventListener('pageshow', function (event) {
		if (!event.persisted) return;
		E.all(document.documentElement, 'form[data-stream]').forEach(function (form) {
			busy.delete(form);
			E.forgetSubmitter(form);
			E.enable(form);
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
