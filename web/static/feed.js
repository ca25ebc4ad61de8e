// feed.js follows the person's feed (GET /api/feed) on every page that
// carries a cursor (body[data-feed-cursor], taken by the server before it
// read what the page shows) and hands each run line to the page as a
// "turnstile:run" event on document. It keeps the last cursor it was
// given and, when the connection breaks, attaches again from it: the
// feed then misses nothing (a line may come twice, which every handler
// takes in its stride). It also keeps two pages current itself: the run
// page's status line and the history's rows, with a notice to reload for
// what it does not redraw (the timeline, runs that are new). Without it
// (or without JavaScript) a reload shows the same.
(function () {
	'use strict';

	var E = window.enhance;
	if (!E) return;
	var cursor = document.body && E.attr(document.body, 'data-feed-cursor');
	if (!cursor) return;
	var one = E.one, all = E.all;

	var RETRY_FIRST = 1000, RETRY_MOST = 30000;
	var retry = RETRY_FIRST;
	var leaving = false;
	window.addEventListener('pagehide', function () { leaving = true; });

	function again() {
		if (leaving) return;
		window.setTimeout(attach, retry);
		retry = Math.min(retry * 2, RETRY_MOST);
	}

	async function attach() {
		var response;
		try {
			response = await window.fetch('/api/feed?after=' + encodeURIComponent(cursor), {
				credentials: 'same-origin', headers: { 'Accept': 'application/x-ndjson' }
			});
		} catch (e) {
			again();
			return;
		}
		if (response.status === 410) {
			// The page is older than the feed keeps its changes.
			notice('feed-expired', 'This page is out of date. ', 'Reload');
			return;
		}
		if (response.status !== 200) {
			again();
			return;
		}
		retry = RETRY_FIRST;
		try {
			await E.readLines(response, function (msg) {
				if (typeof msg.cursor === 'string' && msg.cursor) cursor = msg.cursor;
				if (msg.type === 'run') {
					document.dispatchEvent(new CustomEvent('turnstile:run', { detail: msg }));
				}
				return false;
			});
		} catch (e) {
			// A broken connection: attach again from the last cursor.
		}
		again();
	}

	// notice shows one flash-like line with a reload link above the page,
	// once per kind.
	function notice(kind, text, link) {
		var main = document.getElementById('main');
		if (!main || one(main, '[data-notice="' + kind + '"]')) return;
		var p = document.createElement('p');
		p.className = 'flash';
		E.setAttr(p, 'data-notice', kind);
		E.setAttr(p, 'data-testid', kind);
		E.setAttr(p, 'role', 'status');
		p.appendChild(document.createTextNode(text));
		var a = document.createElement('a');
		a.href = window.location.href;
		a.textContent = link;
		p.appendChild(a);
		p.appendChild(document.createTextNode('.'));
		main.insertBefore(p, main.firstChild);
	}

	// shownStatus is a change's status as the pages show it: an erased
	// run's is "erased", whatever it had settled as.
	function shownStatus(m) {
		return m.change === 'erased' ? 'erased' : m.status;
	}

	// showStatus writes a status as the page does: the run page as it is,
	// the history in words ("waiting for approval").
	function showStatus(el, status, words) {
		if (!el) return;
		el.textContent = words ? status.replace(/_/g, ' ') : status;
		el.className = 'status status-' + status;
	}

	// The run page: its status line follows the run; the rest of the page
	// (the timeline, the forms, what anyone typed) stays until a reload.
	var summary = one(document.documentElement, '[data-testid="run-summary"]');
	if (summary) {
		document.addEventListener('turnstile:run', function (event) {
			var m = event.detail, status = shownStatus(m);
			if (String(m.run_id) !== E.attr(summary, 'data-run-id') || status === E.attr(summary, 'data-status')) return;
			E.setAttr(summary, 'data-status', status);
			showStatus(one(summary, '[data-testid="run-status"]'), status, false);
			notice('run-changed', 'This run changed (' + m.change + (m.decided_by ? ' by ' + m.decided_by : '') + '). ', 'Reload to see how');
		});
	}

	// The history: a listed run's status follows it; a run that is new
	// says so, and a reload shows it in its place.
	if (one(document.documentElement, '[data-testid="history-filter"]')) {
		document.addEventListener('turnstile:run', function (event) {
			var m = event.detail;
			var rows = all(document.documentElement, '[data-testid="history-run"][data-run-id="' + m.run_id + '"]');
			if (rows.length === 0) {
				if (m.change === 'started' && m.turn === 1) notice('history-new', 'New runs have started. ', 'Reload');
				return;
			}
			rows.forEach(function (row) {
				E.setAttr(row, 'data-status', shownStatus(m));
				showStatus(one(row, '.status'), shownStatus(m), true);
			});
		});
	}

	attach();
}());
