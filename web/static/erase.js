// erase.js asks in the page before a run is erased: the run page's
// "Erase run…" button opens the confirmation box beside it instead of the
// confirmation page, and "Keep it" closes it again. Without JavaScript the
// box stays hidden and the button opens the page of its own; either way
// the erase is the same POST with its CSRF token.
(function () {
	'use strict';

	if (typeof Element.prototype.closest !== 'function') {
		return;
	}

	function parts(el) {
		var root = el.closest('[data-erase]');
		if (!root) return null;
		return {
			open: root.querySelector('form[data-erase-open]'),
			box: root.querySelector('[data-erase-confirm]')
		};
	}

	document.addEventListener('submit', function (event) {
		var form = event.target;
		if (!(form instanceof HTMLFormElement) || !form.hasAttribute('data-erase-open')) return;
		var p = parts(form);
		if (!p || !p.box) return;
		event.preventDefault();
		p.open.hidden = true;
		p.box.hidden = false;
		var keep = p.box.querySelector('[data-erase-cancel]');
		if (keep) keep.focus();
	});

	document.addEventListener('click', function (event) {
		var keep = event.target instanceof Element ? event.target.closest('[data-erase-cancel]') : null;
		if (!keep) return;
		var p = parts(keep);
		if (!p) return;
		p.box.hidden = true;
		p.open.hidden = false;
		var button = p.open.querySelector('button');
		if (button) button.focus();
	});
}());
