package runtime

// FeedPolling reports whether an engine's feed has a poller running: the
// tests' way to see it stop, rather than wait and see nothing happen.
func FeedPolling(e *Engine) bool {
	e.feed.mu.Lock()
	defer e.feed.mu.Unlock()
	return e.feed.running
}
