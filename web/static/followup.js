// followup.js streams a follow-up's turn into the run page: the form posts
// for NDJSON, each recorded step shows as a line in the form's live region
// (the model's text as it says it: its deltas as they stream, its
// thinking folded), and once the turn has paused or
// settled the page is loaded again to show the conversation as stored.
// Without enhance (a browser that cannot stream a fetch) the form posts
// natively and the server lands back on the run page.
(function () {
	'use strict';
	var en = window.enhance;
	if (!en) return;

	var LAST = { done: true, awaiting_approval: true, awaiting_input: true, cancelled: true, error: true };

	function say(region, text, cls) {
		var p = document.createElement('p');
		p.textContent = text;
		if (cls) p.className = cls;
		en.append(region, p);
	}

	function stepText(step) {
		var c = step.content || {};
		if (step.kind === 'llm' && typeof c.text === 'string' && c.text) return c.text;
		if (step.kind === 'tool' && c.tool) return 'Tool ' + c.tool + (c.is_error ? ' failed' : ' answered');
		if (step.kind === 'suspend') return 'The agent waits for a decision.';
		return null;
	}

	document.addEventListener('submit', async function (event) {
		var form = event.target;
		if (!(form instanceof HTMLFormElement) || !en.hasAttr(form, 'data-followup')) return;
		event.preventDefault();
		var button = en.submitter(event);
		var data = en.body(form, button);
		var region = en.one(form, '[data-testid="followup-stream"]');
		en.disable(form);
		region.hidden = false;
		region.textContent = '';
		say(region, 'Sending…', 'meta');
		var back = window.location.pathname;
		try {
			var response = await en.post(en.action(form), data);
			if (en.isRedirect(response)) {
				// A refusal: its flash waits on the run page.
				window.location.assign(back);
				return;
			}
			if (!response.ok) {
				en.enable(form);
				en.submitNatively(form, button);
				return;
			}
			var writing = null, thinking = null;
			var ended = await en.readLines(response, function (msg) {
				if (msg.type === 'delta' || msg.type === 'thinking') {
					if (msg.type === 'thinking' && !thinking) {
						var fold = document.createElement('details');
						fold.className = 'fold thinking';
						var sum = document.createElement('summary');
						sum.textContent = 'Thinking';
						thinking = document.createElement('pre');
						thinking.setAttribute('data-testid', 'followup-thinking');
						fold.appendChild(sum);
						fold.appendChild(thinking);
						en.append(region, fold);
					}
					if (msg.type === 'delta' && !writing) {
						writing = document.createElement('p');
						writing.setAttribute('data-testid', 'followup-writing');
						en.append(region, writing);
					}
					var to = msg.type === 'thinking' ? thinking : writing;
					to.appendChild(document.createTextNode(String(msg.text || '')));
					return false;
				}
				if (msg.type === 'step' && msg.step) {
					var text = stepText(msg.step);
					if (writing && msg.step.kind === 'llm') {
						// The round's step: the streamed text, now whole.
						if (text) writing.textContent = text;
						writing.removeAttribute('data-testid');
						writing = null;
						thinking = null;
						return false;
					}
					if (text) say(region, text);
					return false;
				}
				if (LAST[msg.type]) {
					if (msg.type === 'done' && typeof msg.answer === 'string') say(region, msg.answer, 'said');
					if (msg.type === 'error' && msg.message) say(region, msg.message, 'warning');
					region.setAttribute('data-ended', msg.type);
					return true;
				}
				return false;
			});
			if (!ended) say(region, 'The connection ended; the turn goes on in the background.', 'warning');
			window.location.assign(back);
		} catch (e) {
			say(region, 'The connection broke; the turn goes on in the background. Reload to see it.', 'warning');
			en.enable(form);
		}
	});
}());
