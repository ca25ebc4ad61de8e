package web

// HoldSlots takes n continuation slots, as n continuations running inside
// requests would, until release is called.
func (s *Server) HoldSlots(n int) (release func()) {
	var held []func()
	for range n {
		r, ok := s.admission.acquire()
		if !ok {
			panic("HoldSlots: fewer slots free than asked for")
		}
		held = append(held, r)
	}
	return func() {
		for _, r := range held {
			r()
		}
	}
}
