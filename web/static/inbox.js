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

	// The inbox follows the person's feed (feed.js): a run that starts
	// waiting gets its card, one decided (or settled) elsewhere leaves the
	// page with who decided it, and the count follows — without touching
	// any other card, so nothing typed into one is lost. For each change
	// the run's card is asked of /inbox/cards/:id, which says whether it
	// waits for this person and how many runs do: right however often, or
	// in whatever order, the feed tells of a change.
	var cards = one(document.documentElement, '[data-inbox-cards]');
	if (!cards) return;
	var mode = E.attr(cards, 'data-inbox-cards');
	var asking = {}; // run id: the change to ask about again once the answer is in

	// A run that starts waiting is asked for its card; a change of a run
	// with a card on the page, for whether it still waits; any other
	// change (a run on another page, or one that never waited here) only
	// moves the count, asked at most every COUNT_EVERY: a busy feed does
	// not become a request a change.
	var COUNT_EVERY = 2000;
	var counting = null; // the run to ask the count by, once the timer fires
	document.addEventListener('turnstile:run', function (event) {
		var m = event.detail;
		if (m.change === 'waiting' || cardOf(String(m.run_id))) {
			ask(m);
		} else if (m.change !== 'started' && mode !== 'filtered') {
			if (counting === null) {
				window.setTimeout(function () { var c = counting; counting = null; ask(c); }, COUNT_EVERY);
			}
			counting = m;
		}
	});

	function cardOf(id) {
		return one(document.documentElement, '[data-testid="inbox-run"][data-run-id="' + id + '"]');
	}

	// mine: the person submitted one of the card's forms; its own stream
	// says how it ends.
	function mine(card) {
		var forms = E.all(card, 'form');
		for (var i = 0; i < forms.length; i++) {
			if (busy.has(forms[i])) return true;
		}
		return false;
	}

	function ask(m) {
		var id = String(m.run_id);
		if (asking[id] !== undefined) {
			asking[id] = m;
			return;
		}
		asking[id] = null;
		window.fetch('/inbox/cards/' + id, { credentials: 'same-origin', headers: { 'Accept': 'text/html' }, redirect: 'manual' })
			.then(function (r) {
				var total = r.headers.get('X-Inbox-Total');
				if (total !== null && mode !== 'filtered') showTotal(parseInt(total, 10));
				if (r.status === 204) {
					gone(id, m);
					return null;
				}
				return r.status === 200 ? r.text() : null;
			})
			.then(function (html) { if (html) show(id, html); }, function () {})
			.then(function () {
				var next = asking[id];
				delete asking[id];
				if (next) ask(next);
			});
	}

	// show puts a waiting run's card on the page: a new one at the end
	// (the list is oldest first), one of a new turn in place of the old.
	function show(id, html) {
		var t = document.createElement('template');
		t.innerHTML = html.trim();
		var fresh = t.content.firstElementChild;
		if (!fresh) return;
		var old = cardOf(id);
		if (old) {
			if (E.attr(old, 'data-digest') !== E.attr(fresh, 'data-digest')) {
				if (!mine(old)) old.replaceWith(fresh);
			} else {
				recount(old, fresh);
			}
			return;
		}
		if (mode !== 'all') {
			var more = one(document.documentElement, '[data-inbox-more]');
			if (more) more.hidden = false;
			return;
		}
		E.append(cards, fresh);
	}

	// recount brings a card's count of approvals up to date (someone voted
	// on its turn), leaving the rest of the card, and what was typed into
	// it, as it is.
	function recount(old, fresh) {
		var was = one(old, '[data-testid="votes"]'), now = one(fresh, '[data-testid="votes"]');
		if (was && now && was.textContent !== now.textContent) was.textContent = now.textContent;
	}

	// gone replaces the card of a run that waits no more with who decided
	// it (or how it ended).
	function gone(id, m) {
		var old = cardOf(id);
		if (!old || mine(old)) return;
		var note = document.createElement('p');
		note.className = 'card decided-elsewhere';
		E.setAttr(note, 'data-testid', 'decided-elsewhere');
		E.setAttr(note, 'data-run-id', id);
		note.textContent = 'Run #' + id + ' ' + outcome(m) + '.';
		old.replaceWith(note);
	}

	var VERBS = { approve: 'approved', deny: 'denied', mixed: 'decided call by call', input: 'answered' };

	function outcome(m) {
		if (m.change === 'decided') {
			var verb = VERBS[m.decision] || 'decided';
			return m.decided_by ? verb + ' by ' + m.decided_by : verb + ': nobody decided in time';
		}
		if (m.change === 'erased') return 'was erased';
		if (m.change === 'settled') return 'is ' + String(m.status).replace(/_/g, ' ');
		return 'no longer waits';
	}

	// showTotal keeps the count line (or the empty inbox's line) right.
	function showTotal(n) {
		if (isNaN(n)) return;
		var total = one(document.documentElement, '[data-testid="inbox-total"]');
		var empty = one(document.documentElement, '[data-testid="inbox-empty"]');
		var line = n === 0 ? empty : total;
		if (!line) {
			line = document.createElement('p');
			line.className = n === 0 ? 'empty' : 'lede';
			E.setAttr(line, 'data-testid', n === 0 ? 'inbox-empty' : 'inbox-total');
			cards.parentNode.insertBefore(line, cards);
		}
		line.hidden = false;
		line.textContent = n === 0 ? 'Nothing waits for you.' : E.plural(n, 'run waits', 'runs wait') + ' for a decision, oldest first.';
		var other = n === 0 ? total : empty;
		if (other) other.hidden = true;
	}
}());
