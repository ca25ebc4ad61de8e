// cancel.js sends the Cancel forms (form[data-cancel]: the run page's,
// "page", and the playground's beside a run that runs or waits) with fetch, asking for
// JSON, and says in place what became of the run: cancelled (the server
// waits for the holder to stop the call in flight), or still stopping. On
// the run page it sets the status too; in the playground the stream's own
// last line ("cancelled") replaces the form. Without it (or without
// enhance.js) the form posts natively and the run page answers, with a
// flash.
(function () {
	'use strict';

	var E = window.enhance;
	if (!E) return;
	var attr = E.attr, hasAttr = E.hasAttr, setAttr = E.setAttr, disable = E.disable, enable = E.enable;

	function message(form, text, testid, role) {
		var old = form.parentNode && form.parentNode.querySelector('[data-cancel-result]');
		if (old) old.remove();
		var p = document.createElement('p');
		setAttr(p, 'data-cancel-result', '');
		setAttr(p, 'data-testid', testid);
		setAttr(p, 'role', role);
		setAttr(p, 'class', role === 'alert' ? 'form-error' : 'flash');
		p.appendChild(document.createTextNode(text));
		form.before(p);
	}

	// showStatus sets the run page's status badge to what the cancel left.
	function showStatus(status) {
		var badge = document.querySelector('[data-testid="run-status"]');
		if (!badge) return;
		badge.textContent = status;
		setAttr(badge, 'class', 'status status-' + status);
		var summary = document.querySelector('[data-testid="run-summary"]');
		if (summary) setAttr(summary, 'data-status', status);
	}

	async function send(form) {
		var data = E.body(form, null);
		disable(form);
		var response, body = null;
		try {
			response = await window.fetch(E.action(form), {
				method: 'POST', body: data, redirect: 'manual', credentials: 'same-origin',
				headers: { 'Accept': 'application/json' }
			});
			body = await response.json().catch(function () { return null; });
		} catch (e) {
			enable(form);
			message(form, 'The server could not be reached. Try again.', 'cancel-error', 'alert');
			return;
		}
		if (!response.ok || !body) {
			enable(form);
			var err = body && body.error && body.error.message;
			message(form, err ? 'Not cancelled: ' + err + '.' :
				(E.isRedirect(response) ? 'You are signed out. Reload the page and sign in again.' :
					'The request failed (' + response.status + '). Reload the page and try again.'), 'cancel-error', 'alert');
			return;
		}
		var id = body.run_id;
		if (body.status === 'cancelled') {
			message(form, 'Run ' + id + ' was cancelled.', 'cancel-result', 'status');
			form.remove();
		} else if (body.status === 'running') {
			message(form, 'Run ' + id + ' is being cancelled: it stops as soon as its holder sees the request.', 'cancel-result', 'status');
		} else {
			message(form, 'Run ' + id + ' is ' + body.status + '.', 'cancel-result', 'status');
			form.remove();
		}
		if (attr(form, 'data-cancel') === 'page') showStatus(body.status);
	}

	document.addEventListener('submit', function (event) {
		var form = event.target;
		if (!(form instanceof HTMLFormElement) || !hasAttr(form, 'data-cancel') || event.defaultPrevented) return;
		event.preventDefault();
		if (hasAttr(form, 'aria-busy')) return;
		send(form);
	});
}());
