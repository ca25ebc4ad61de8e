// playground.js streams the playground's forms (form[data-playground]:
// start, resume, input): it posts them with fetch and stream=1, appends
// every step with its full content to the output as it arrives, and
// renders the terminal line: the answer, or the pending calls with the form
// that resumes the run in place. Every form works without it (and without
// enhance.js, which it needs): a native post answers the playground page
// with the run's result.
(function () {
	'use strict';

	var E = window.enhance;
	if (!E) return;
	var attr = E.attr, hasAttr = E.hasAttr, setAttr = E.setAttr, removeAttr = E.removeAttr,
		closest = E.closest, all = E.all, one = E.one, plural = E.plural, disable = E.disable, enable = E.enable;
	var busy = new WeakSet();

	// el builds an element: el('p', {class: 'meta'}, 'text', child…).
	// Attributes whose value is false or null are left out.
	function el(tag, attrs) {
		var node = document.createElement(tag);
		Object.keys(attrs || {}).forEach(function (k) {
			var v = attrs[k];
			if (v === false || v === null || v === undefined) return;
			setAttr(node, k, v === true ? '' : String(v));
		});
		for (var i = 2; i < arguments.length; i++) {
			var c = arguments[i];
			if (c === null || c === undefined || c === false) continue;
			node.appendChild(typeof c === 'string' || typeof c === 'number' ? document.createTextNode(String(c)) : c);
		}
		return node;
	}

	function pretty(v) {
		if (v === undefined || v === null) return '';
		try {
			return JSON.stringify(v, null, 2);
		} catch (e) {
			return String(v);
		}
	}

	// The output area and its parts, as templates/playground.templ renders
	// them.
	function parts() {
		var out = document.querySelector('[data-testid="playground-output"]');
		if (!out) return null;
		return {
			out: out,
			steps: one(out, '[data-testid="playground-steps"]'),
			outcome: one(out, '[data-testid="playground-outcome-area"]'),
			progress: one(out, '[data-testid="playground-progress"]')
		};
	}

	function csrfToken() {
		var input = document.querySelector('form[data-playground] input[name="csrf_token"]') ||
			document.querySelector('input[name="csrf_token"]');
		return input ? input.value : '';
	}

	function clear(node) {
		while (node && node.firstChild) node.removeChild(node.firstChild);
	}

	// Progress: a count of the steps seen, and a subtle "still working"
	// whenever a keepalive says the server is busy without news.
	function progress(p, state) {
		if (!p.progress) return;
		p.progress.hidden = false;
		clear(p.progress);
		// The steps on the screen, those of earlier requests of this run
		// included, so the counter and the list always agree.
		var shown = p.steps ? p.steps.querySelectorAll('[data-testid="playground-step"]').length : state.steps;
		p.progress.appendChild(document.createTextNode('Running… ' + plural(shown, 'step', 'steps')));
		if (state.keepalives > 0) {
			p.progress.appendChild(el('span', { 'class': 'meta', 'data-testid': 'playground-keepalive',
				'data-keepalives': state.keepalives }, ' · still working'));
		}
	}

	function stopProgress(p) {
		if (!p.progress) return;
		p.progress.hidden = true;
		clear(p.progress);
	}

	function stepItem(msg) {
		var s = msg.step || {};
		var kind = String(s.kind || '');
		var seq = typeof msg.seq === 'number' ? msg.seq : s.seq;
		return el('li', { 'class': 'event', 'data-testid': 'playground-step', 'data-seq': seq, 'data-kind': kind },
			el('p', { 'class': 'event-head' },
				el('span', { 'class': 'seq' }, '#' + seq),
				el('strong', { 'class': 'kind' }, kind),
				el('span', { 'class': 'round' }, 'round ' + (s.round || 0)),
				typeof s.duration_ms === 'number' ? el('span', { 'class': 'duration' }, s.duration_ms + ' ms') : null),
			s.content !== undefined && s.content !== null ? el('pre', { tabindex: '0' }, pretty(s.content)) : null);
	}

	function callsList(calls) {
		var list = el('ul', { 'class': 'calls' });
		(Array.isArray(calls) ? calls : []).forEach(function (c) {
			list.appendChild(el('li', { 'class': 'call', 'data-testid': 'call', 'data-call-id': c.id || '' },
				el('code', { 'class': 'tool' }, String(c.name || '')),
				c.arguments !== undefined ? el('pre', { tabindex: '0' }, pretty(c.arguments)) : null));
		});
		return list;
	}

	function hidden(name, value) {
		return el('input', { type: 'hidden', name: name, value: value || '' });
	}

	function runPath(id, action) {
		return '/playground/runs/' + encodeURIComponent(String(id)) + '/' + action;
	}

	// resumeForm is the Approve/Deny form of templates/playground.templ. It
	// is a real form: if the script cannot stream it, it submits natively.
	function resumeForm(msg) {
		return el('form', { method: 'post', action: runPath(msg.run_id, 'resume'), 'class': 'decide stack',
			'data-playground': 'resume' },
			hidden('csrf_token', csrfToken()),
			hidden('turn_digest', msg.turn_digest),
			el('fieldset', { 'class': 'scope' },
				el('legend', {}, 'Approval scope'),
				el('label', {}, el('input', { type: 'radio', name: 'scope', value: 'once', checked: true }), ' only this time'),
				el('label', {}, el('input', { type: 'radio', name: 'scope', value: 'session' }), ' for the rest of this run')),
			el('div', { 'class': 'field' },
				el('label', { 'for': 'playground-reason' }, 'Reason ', el('span', { 'class': 'hint' }, '(optional)')),
				el('textarea', { id: 'playground-reason', name: 'reason', rows: 2, maxlength: 2000 })),
			el('div', { 'class': 'actions' },
				el('button', { type: 'submit', name: 'decision', value: 'approve', 'class': 'primary' }, 'Approve'),
				el('button', { type: 'submit', name: 'decision', value: 'deny', 'class': 'danger' }, 'Deny')));
	}

	// cancelForm is the Cancel button of a run that streams, the form of
	// templates/components.templ's cancelForm.
	function cancelForm(id) {
		return el('form', { method: 'post', action: '/runs/' + encodeURIComponent(String(id)) + '/cancel', 'class': 'actions',
			'data-cancel': 'playground', 'data-testid': 'cancel-form' },
			hidden('csrf_token', csrfToken()),
			el('button', { type: 'submit', 'class': 'danger', 'data-testid': 'cancel-button' }, 'Cancel run'));
	}

	// fields reads the top-level properties of an input schema the way
	// runtime/schema.Fields does: the first type other than null, else
	// string; enum values as text.
	function fields(schema) {
		var props = schema && typeof schema === 'object' && schema.properties && typeof schema.properties === 'object' ?
			schema.properties : {};
		var required = schema && Array.isArray(schema.required) ? schema.required : [];
		return Object.keys(props).map(function (name) {
			var p = props[name] && typeof props[name] === 'object' ? props[name] : {};
			var type = p.type;
			if (Array.isArray(type)) type = type.filter(function (t) { return t !== 'null'; })[0];
			if (typeof type !== 'string') type = 'string';
			return {
				name: name,
				title: typeof p.title === 'string' && p.title ? p.title : name,
				description: typeof p.description === 'string' ? p.description : '',
				type: type,
				options: Array.isArray(p.enum) ? p.enum.map(function (v) { return typeof v === 'string' ? v : JSON.stringify(v); }) : null,
				required: required.indexOf(name) >= 0,
				minimum: typeof p.minimum === 'number' ? p.minimum : null,
				maximum: typeof p.maximum === 'number' ? p.maximum : null
			};
		});
	}

	// control is one field's control, named after the property, like the
	// server's inputField: a select for an enum, a checkbox for a boolean
	// (never required: false must stay sayable), a number input for
	// integers and numbers, else a text input.
	function control(f, id, helpID) {
		var common = { id: id, name: f.name, 'aria-describedby': helpID };
		if (f.options) {
			var select = el('select', Object.assign({ required: f.required }, common));
			if (!f.required) select.appendChild(el('option', { value: '' }, '—'));
			f.options.forEach(function (o) { select.appendChild(el('option', { value: o }, o)); });
			return select;
		}
		switch (f.type) {
		case 'boolean':
			return el('input', Object.assign({ type: 'checkbox', value: 'true' }, common));
		case 'integer':
		case 'number':
			return el('input', Object.assign({ type: 'number', required: f.required,
				step: f.type === 'integer' ? '1' : 'any', inputmode: f.type === 'integer' ? 'numeric' : 'decimal',
				min: f.minimum, max: f.maximum }, common));
		default:
			return el('input', Object.assign({ type: 'text', required: f.required }, common));
		}
	}

	function inputForm(msg) {
		var form = el('form', { method: 'post', action: runPath(msg.run_id, 'input'), 'class': 'answer stack',
			'data-playground': 'input' },
			hidden('csrf_token', csrfToken()),
			hidden('turn_digest', msg.turn_digest));
		fields(msg.schema).forEach(function (f) {
			var id = 'run-' + msg.run_id + '-field-' + f.name;
			var helpID = f.description ? id + '-help' : null;
			var help = f.description ? el('p', { 'class': 'help', id: helpID }, f.description) : null;
			var label = el('label', { 'for': id }, f.title, f.required && f.type !== 'boolean' ? el('span', { 'class': 'hint' }, ' (required)') : null);
			var box;
			if (f.type === 'boolean' && !f.options) {
				box = el('div', { 'class': 'field field-check', 'data-field': f.name },
					el('div', { 'class': 'check' }, control(f, id, helpID), label), help);
			} else {
				box = el('div', { 'class': 'field', 'data-field': f.name }, label, help, control(f, id, helpID));
			}
			form.appendChild(box);
		});
		form.appendChild(el('div', { 'class': 'actions' }, el('button', { type: 'submit', 'class': 'primary' }, 'Submit')));
		return form;
	}

	// outcome renders a terminal line into the outcome area, replacing the
	// form that was just sent.
	function outcome(p, msg) {
		var fourEyes = hasAttr(p.out, 'data-four-eyes');
		var box = el('div', { 'class': 'card', 'data-testid': 'playground-outcome', 'data-event': msg.type, role: 'status' });
		switch (msg.type) {
		case 'done':
			var usage = msg.usage || {};
			box.appendChild(el('h3', {}, 'Done'));
			box.appendChild(el('pre', { 'class': 'text', 'data-testid': 'playground-answer' }, String(msg.answer || '')));
			box.appendChild(el('p', { 'class': 'meta' }, plural(msg.iterations || 0, 'iteration', 'iterations') + ' · ' +
				(usage.input_tokens || 0) + ' input tokens · ' + (usage.output_tokens || 0) + ' output tokens'));
			break;
		case 'awaiting_approval':
			box.appendChild(el('h3', {}, 'Waiting for approval'));
			if (msg.note) box.appendChild(el('p', { 'class': 'warning', role: 'note', 'data-testid': 'run-note' }, String(msg.note)));
			box.appendChild(callsList(msg.pending_calls));
			if (fourEyes) {
				box.appendChild(el('p', { 'class': 'four-eyes', 'data-testid': 'four-eyes' },
					'This configuration needs a second approver, and you started the run: someone else decides it in the ',
					el('a', { href: '/inbox' }, 'inbox'), '.'));
			} else {
				box.appendChild(resumeForm(msg));
			}
			box.appendChild(cancelForm(msg.run_id));
			break;
		case 'awaiting_input':
			box.appendChild(el('h3', {}, 'Waiting for input'));
			box.appendChild(callsList(msg.pending_calls));
			box.appendChild(inputForm(msg));
			box.appendChild(cancelForm(msg.run_id));
			break;
		case 'cancelled':
			box.appendChild(el('h3', {}, 'Cancelled'));
			box.appendChild(el('p', {}, 'The run was cancelled.'));
			break;
		default:
			box.appendChild(el('h3', {}, 'Stopped'));
			box.appendChild(el('p', { 'class': 'form-error', role: 'alert', 'data-testid': 'playground-error',
				'data-code': msg.code || '' }, String(msg.message || 'The run stopped.')));
		}
		if (msg.run_id) {
			setAttr(p.out, 'data-run-id', msg.run_id);
			box.appendChild(el('p', { 'class': 'meta' }, el('a', { href: '/runs/' + encodeURIComponent(String(msg.run_id)) }, 'Run #' + msg.run_id + ' in full')));
		}
		clear(p.outcome);
		p.outcome.appendChild(box);
	}

	// showError puts a message (a refusal, a broken stream) above the form
	// it concerns, or in the outcome area.
	function showError(form, p, message) {
		var box = el('p', { 'class': 'form-error', role: 'alert', 'data-testid': 'playground-refusal' }, message);
		if (form && form.parentNode && form.isConnected) {
			form.parentNode.insertBefore(box, form);
		} else {
			clear(p.outcome);
			p.outcome.appendChild(box);
		}
	}

	function clearErrors(form) {
		var scope = form.parentNode || form;
		all(scope, '[data-testid="playground-refusal"]').forEach(function (n) { n.remove(); });
		all(form, '[data-testid="field-error"]').forEach(function (n) { n.remove(); });
		all(form, '[aria-invalid]').forEach(function (n) { removeAttr(n, 'aria-invalid'); });
		all(form, '.field.invalid').forEach(function (n) { n.classList.remove('invalid'); });
	}

	// fieldErrors marks the fields of a 422 refusal next to their controls.
	function fieldErrors(form, errs) {
		Object.keys(errs || {}).forEach(function (name) {
			var ctl = null;
			all(form, '[name]').forEach(function (c) {
				if (!ctl && attr(c, 'name') === name && attr(c, 'type') !== 'hidden') ctl = c;
			});
			var msg = el('p', { 'class': 'field-error', 'data-testid': 'field-error', 'data-field': name }, String(errs[name]));
			if (!ctl) {
				var actions = one(form, '.actions');
				if (actions) actions.before(msg); else form.appendChild(msg);
				return;
			}
			setAttr(ctl, 'aria-invalid', 'true');
			var field = closest(ctl, '.field');
			if (field) {
				field.classList.add('invalid');
				field.appendChild(msg);
			} else {
				ctl.after(msg);
			}
		});
	}

	// refusal shows what the server refused: its JSON error message, with
	// field errors for invalid input; or, for a page that is not JSON (an
	// expired CSRF token, a signed-out session), what to do about it.
	async function refusal(response, form, p) {
		if (response.type === 'opaqueredirect' || (response.status >= 300 && response.status < 400)) {
			showError(form, p, 'You are signed out. Reload the page and sign in again.');
			return;
		}
		var body = null;
		try {
			body = await response.json();
		} catch (e) {
			body = null;
		}
		var err = body && body.error;
		if (err && err.message) {
			showError(form, p, err.message);
			if (err.fields) fieldErrors(form, err.fields);
			return;
		}
		showError(form, p, response.status === 403 ?
			'The request was refused: the form expired. Reload the page and try again.' :
			'The request failed (' + response.status + '). Reload the page and try again.');
	}

	// live shows the model's text (and thinking, folded) as it streams, in
	// one item after the steps, which the round's step replaces.
	function live(p, msg) {
		var item = one(p.steps, '[data-testid="playground-live"]');
		if (!item) {
			item = el('li', { 'class': 'event live', 'data-testid': 'playground-live', 'aria-live': 'polite' });
			p.steps.appendChild(item);
		}
		var id = msg.type === 'thinking' ? 'playground-live-thinking' : 'playground-live-text';
		var pre = one(item, '[data-testid="' + id + '"]');
		if (!pre) {
			pre = el('pre', { 'class': 'text', 'data-testid': id });
			if (msg.type === 'thinking') {
				item.insertBefore(el('details', { 'class': 'fold thinking' }, el('summary', {}, 'Thinking'), pre), item.firstChild);
			} else {
				item.appendChild(pre);
			}
		}
		pre.appendChild(document.createTextNode(String(msg.text || '')));
	}

	// follow reads the NDJSON stream line by line; it answers true when a
	// terminal line arrived.
	async function follow(response, p) {
		var state = { steps: 0, keepalives: 0, done: false };
		function handle(msg) {
			switch (msg.type) {
			case 'step':
				state.steps++;
				state.keepalives = 0;
				var streamed = one(p.steps, '[data-testid="playground-live"]');
				if (streamed) streamed.remove();
				p.steps.appendChild(stepItem(msg));
				progress(p, state);
				break;
			case 'delta':
			case 'thinking':
				live(p, msg);
				break;
			case 'keepalive':
				state.keepalives++;
				progress(p, state);
				break;
			case 'following':
				break; // someone else's decision: its steps follow
			default:
				state.done = true;
				stopProgress(p);
				outcome(p, msg);
			}
		}
		progress(p, state);
		return E.readLines(response, function (msg) {
			handle(msg);
			return state.done;
		});
	}

	async function send(form, submitter) {
		var p = parts();
		var kind = attr(form, 'data-playground');
		var body = E.body(form, submitter);
		body.set('stream', '1');
		var action = E.action(form);

		clearErrors(form);
		if (kind === 'start') {
			// A new run: a fresh output, and whether its configuration lets
			// the admin who starts it approve it.
			var option = one(form, 'select[name="configuration"] option:checked');
			if (option && hasAttr(option, 'data-four-eyes')) {
				setAttr(p.out, 'data-four-eyes', '');
			} else {
				removeAttr(p.out, 'data-four-eyes');
			}
			removeAttr(p.out, 'data-run-id');
			clear(p.steps);
			clear(p.outcome);
			all(p.out, '[data-testid="playground-run"]').forEach(function (n) { n.remove(); });
		}
		disable(form);

		var response;
		try {
			response = await E.post(action, body);
		} catch (e) {
			enable(form);
			showError(form, p, 'The server could not be reached. Try again.');
			return;
		}
		var type = response.headers.get('Content-Type') || '';
		if (response.status !== 200 || type.indexOf('application/x-ndjson') !== 0) {
			enable(form);
			await refusal(response, form, p);
			return;
		}
		var running = response.headers.get('Turnstile-Run-Id') || attr(p.out, 'data-run-id');
		if (running) {
			// Until the stream's last line replaces it (cancelled, when
			// this is used): cancel.js sends it.
			clear(p.outcome);
			p.outcome.appendChild(cancelForm(running));
		}
		var finished = false;
		try {
			finished = await follow(response, p);
		} catch (e) {
			finished = false;
		}
		if (!finished) {
			// The run goes on server-side whatever happens to the stream.
			stopProgress(p);
			var id = attr(p.out, 'data-run-id');
			clear(p.outcome);
			p.outcome.appendChild(el('p', { 'class': 'form-error', role: 'alert', 'data-testid': 'playground-refusal' },
				'The connection broke before the run paused or finished; it goes on on the server.',
				id ? el('span', {}, ' See ', el('a', { href: '/runs/' + encodeURIComponent(id) }, 'run #' + id), '.') : null));
		}
		if (kind === 'start') enable(form);
	}

	document.addEventListener('submit', function (event) {
		var form = event.target;
		if (!(form instanceof HTMLFormElement) || !hasAttr(form, 'data-playground')) return;
		if (event.defaultPrevented || !parts()) return;
		event.preventDefault();
		if (busy.has(form)) return;
		busy.add(form);
		send(form, E.submitter(event)).finally(function () { busy.delete(form); });
	});

	// A page restored from the back/forward cache still shows forms frozen
	// mid-submission; make them usable again.
	window.addEventListener('pageshow', function (event) {
		if (!event.persisted) return;
		all(document.documentElement, 'form[data-playground]').forEach(function (form) {
			busy.delete(form);
			enable(form);
		});
	});
}());
