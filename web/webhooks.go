package web

import (
	"context"
	"net/http"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/templates"
)

// Webhooks is what a run's page needs of the outbox: the notifications
// about the run that the workers gave up on.
type Webhooks interface {
	// FailedDeliveriesOfRun returns them oldest first; none is an empty
	// list, not an error.
	FailedDeliveriesOfRun(ctx context.Context, runID int64) ([]runtime.DeliveryInfo, error)
}

// failedDeliveries are a run's failed notifications for its page: for
// admins only (an endpoint and a receiver's error are the operators'
// business, not the run owner's), none without Deps.Webhooks. Even admins
// see an endpoint's scheme and host only: the rest of a URL may be its
// credential.
func (s *Server) failedDeliveries(r *http.Request, runID int64) ([]templates.FailedDelivery, error) {
	if s.webhooks == nil || currentUser(r).Role != runtime.RoleAdmin {
		return nil, nil
	}
	ds, err := s.webhooks.FailedDeliveriesOfRun(r.Context(), runID)
	if err != nil {
		return nil, err
	}
	out := make([]templates.FailedDelivery, 0, len(ds))
	for _, d := range ds {
		out = append(out, templates.FailedDelivery{ID: d.ID, Event: d.Event, Target: d.Target(), Attempts: d.Attempts,
			Last: d.LastAnswer(), CreatedAt: d.CreatedAt})
		if out[len(out)-1].Last == "" {
			out[len(out)-1].Last = "no answer recorded"
		}
	}
	return out, nil
}
