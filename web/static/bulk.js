// bulk.js streams the inbox's bulk form (form[data-bulk]): the runs whose
// boxes are checked (each box belongs to the form through its form
// attribute) are posted with fetch, every card shows its run's progress
// from the NDJSON answer, and /inbox is loaded after the last line, where
// the flash counts what was decided and refused. Without this script the
// form posts natively and the server answers with a 303 and that flash.
(function () {
	'use strict';

	if (typeof window.fetch !== 'function' || typeof window.ReadableStream !== 'function' ||
		typeof window.TextDecoder !== 'function' || typeof window.URLSearchParams !== 'function' ||
		typeof window.FormData !== 'function') {
		return;
	}
	var form = document.querySelector('form[data-bulk]');
	if (!form) return;
	var submitNative = HTMLFormElement.prototype.submit;
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

	function steps(n) { return n + (n === 1 ? ' step' : ' steps'); }

	function handle(msg, counts) {
		switch (msg.type) {
		case 'claimed':
			(msg.runs || []).forEach(function (id) { show(id, 'Decision recorded…', 'claimed'); });
			(msg.refused || []).forEach(function (r) { show(r.run, 'Refused: ' + (r.message || r.code), 'refused'); });
			counts.total = (msg.runs || []).length;
			say('Deciding ' + counts.total + ' runs…');
			return false;
		case 'progress':
			show(msg.run, 'Continuing… ' + steps(msg.steps), 'progress');
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

	async function follow(response) {
		var counts = { total: 0, settled: 0 };
		var decoder = new TextDecoder();
		var buffered = '';
		try {
			var reader = response.body.getReader();
			for (;;) {
				var r = await reader.read();
				buffered += r.done ? decoder.decode() : decoder.decode(r.value, { stream: true });
				var parts = buffered.split('\n');
				buffered = r.done ? '' : parts.pop();
				for (var i = 0; i < parts.length; i++) {
					var line = parts[i].trim();
					if (!line) continue;
					var msg;
					try { msg = JSON.parse(line); } catch (e) { continue; }
					if (msg && handle(msg, counts)) {
						reader.cancel().catch(function () {});
						return;
					}
				}
				if (r.done) return;
			}
		} catch (e) {
			// A broken stream: the runs go on server-side.
		} finally {
			window.location.assign('/inbox');
		}
	}

	// fallBack posts natively, the button's choice in a hidden input, so
	// that the server answers with its own page.
	function fallBack(submitter) {
		if (submitter && submitter.name) {
			var input = document.createElement('input');
			input.type = 'hidden';
			input.name = submitter.name;
			input.value = submitter.value;
			form.appendChild(input);
		}
		form.querySelectorAll('button').forEach(function (b) { b.disabled = false; });
		boxes().forEach(function (b) { b.disabled = false; });
		submitNative.call(form);
	}

	form.addEventListener('submit', async function (event) {
		event.preventDefault();
		if (busy) return;
		var submitter = event.submitter || null;
		var data = new FormData(form);
		if (submitter && submitter.name) data.append(submitter.name, submitter.value);
		if (!data.getAll('run').length) {
			say('Select at least one run first.');
			return;
		}
		busy = true;
		var body = new URLSearchParams(data);
		form.querySelectorAll('button').forEach(function (b) { b.disabled = true; });
		boxes().forEach(function (b) { b.disabled = true; });
		say('Sending…');
		var response;
		try {
			response = await window.fetch(form.action, {
				method: 'POST', body: body, redirect: 'manual', credentials: 'same-origin',
				headers: { 'Accept': 'application/x-ndjson' }
			});
		} catch (e) {
			fallBack(submitter);
			return;
		}
		if (response.type === 'opaqueredirect' || (response.status >= 300 && response.status < 400)) {
			window.location.assign('/inbox');
			return;
		}
		if (response.status !== 200 || !response.body) {
			fallBack(submitter);
			return;
		}
		await follow(response);
	});
}());
