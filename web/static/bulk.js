// bulk.js streams the inbox's bulk form (form[data-bulk]): the runs whose
// boxes are checked (each box belongs to the form through its form
// attribute) are posted with fetch, every card shows its run's progress
// from the NDJSON answer, and /inbox is loaded after the last line, where
// the flash counts what was decided and refused. Without this script (or
// without enhance.js, which it needs) the form posts natively and the
// server answers with a 303 and that flash.
(function () {
	'use strict';

	var E = window.enhance;
	if (!E) return;
	var form = document.querySelector('form[data-bulk]');
	if (!form) return;
	var status = form.querySelector('[data-testid="bulk-progress"]');
	var busy = false;

	function boxes() {
		return document.querySelectorAll('input[name="run"][form="' + form.id + '"]');
	}

	// Select all on this page: a checkbox here, a link without JavaScript.
	var all = form.querySelector('[data-select-all]');
	var links = form.querySelector('[data-select-links]');
	if (all && links) {
		all.hidden = false;
		links.hidden = true;
		all.querySelector('input').addEventListener('change', function (event) {
			boxes().forEach(function (b) { b.checked = event.target.checked; });
		});
	}

	function say(text) {
		status.hidden = false;
		status.textContent = text;
	}

	function card(id) {
		var c = document.querySelector('[data-testid="inbox-run"][data-run-id="' + id + '"]');
		return c && c.querySelector('[data-testid="progress"]');
	}

	function show(id, text, state) {
		var p = card(id);
		if (!p) return;
		p.hidden = false;
		p.textContent = text;
		if (state) p.setAttribute('data-bulk', state);
	}

	function handle(msg, counts) {
		switch (msg.type) {
		case 'claimed':
			(msg.runs || []).forEach(function (id) { show(id, 'Decision recorded…', 'claimed'); });
			(msg.refused || []).forEach(function (r) { show(r.run, 'Refused: ' + (r.message || r.code), 'refused'); });
			counts.total = (msg.runs || []).length;
			say('Deciding ' + counts.total + ' runs…');
			return false;
		case 'progress':
			show(msg.run, 'Continuing… ' + E.plural(msg.steps, 'step', 'steps'), 'progress');
			return false;
		case 'settled':
			counts.settled++;
			show(msg.run, msg.path === 'durable' ? 'Continues in the background.' : 'Done.', 'settled');
			say(counts.settled + ' of ' + counts.total + ' runs done…');
			return false;
		case 'done':
		case 'error':
			return true;
		}
		return false;
	}

	// follow reads the stream to its end; /inbox comes next however it
	// ends, since the runs go on server-side.
	async function follow(response) {
		var counts = { total: 0, settled: 0 };
		try {
			await E.readLines(response, function (msg) { return handle(msg, counts); });
		} catch (e) {
			// A broken stream: the runs go on server-side.
		} finally {
			window.location.assign('/inbox');
		}
	}

	// setDisabled turns the buttons and the boxes (the reason stays
	// editable) off while the stream runs.
	function setDisabled(off) {
		form.querySelectorAll('button').forEach(function (b) { b.disabled = off; });
		boxes().forEach(function (b) { b.disabled = off; });
	}

	function fallBack(submitter) {
		setDisabled(false);
		E.submitNatively(form, submitter);
	}

	form.addEventListener('submit', async function (event) {
		event.preventDefault();
		if (busy) return;
		var submitter = E.submitter(event);
		var body = E.body(form, submitter);
		if (!body.getAll('run').length) {
			say('Select at least one run first.');
			return;
		}
		busy = true;
		setDisabled(true);
		say('Sending…');
		var response;
		try {
			response = await E.post(E.action(form), body);
		} catch (e) {
			fallBack(submitter);
			return;
		}
		if (E.isRedirect(response)) {
			window.location.assign('/inbox');
			return;
		}
		if (response.status !== 200 || !response.body) {
			fallBack(submitter);
			return;
		}
		await follow(response);
	});

	// A page restored from the back/forward cache (back after a native
	// fallback) still shows the form frozen mid-submission, which would
	// ignore every submit: make it usable again.
	window.addEventListener('pageshow', function (event) {
		if (!event.persisted) return;
		busy = false;
		E.forgetSubmitter(form);
		setDisabled(false);
		status.hidden = true;
		status.textContent = '';
	});
}());
