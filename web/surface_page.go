package web

import (
	"fmt"
	"net/http"
)

// pageSurface answers the other pages: refusals as error pages, or a 303
// back with the refusal's own words — to the run's page (its only
// refusals with a flash come from a cancel), or to the run history for a
// bad filter of it. Its refusals are not counted in the metrics.
type pageSurface struct {
	// history sends a refusal back to the history (/runs) instead of the
	// run's page.
	history bool
}

func (pageSurface) name() string            { return "" }
func (pageSurface) html(*http.Request) bool { return true }
func (pageSurface) ownWords() bool          { return true }

func (sf pageSurface) back(id int64) string {
	if sf.history {
		return "/runs"
	}
	return fmt.Sprintf("/runs/%d", id)
}
