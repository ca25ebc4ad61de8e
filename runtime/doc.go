// Package runtime is the agent engine of Turnstile: run states, the turn
// digest, the decision pipeline, the continuation that carries a run on
// step by step, and the interfaces that providers, tools and the store
// satisfy. It imports no HTTP and no SQL: web and store depend on it, and
// cmd/turnstile wires them together.
//
// # Files
//
// The package is one, so that the pipeline, the continuation and the
// store's interface share their unexported types; its files are grouped by
// prefix, one concept a prefix:
//
//	run.go, state.go, digest.go     a run, its states and statuses, what a paused run carries, the turn digest
//	engine.go, cancel.go            the Engine, starting a run, cancelling one
//	conversation.go                 a follow-up message: the next turn of a settled run, one at a time
//	title.go                        a run's title: cut from its prompt, generated once, or set
//	erase.go                        erasing a settled run's content, keeping the audit
//	decide.go                       the decision pipeline: checks that write nothing, then one claim
//	decide_edit.go                  edited arguments: the edit form read against the turn, checked by the tools' schemas
//	decide_input.go                 an answer to an input turn
//	decide_standing.go              what an approval for the rest of the run stands for
//	decide_bulk.go                  many decisions at once, each through the whole pipeline
//	decide_lost.go                  a claim that did not go through, explained (stale_turn, already_resuming, not_waiting)
//	continuation.go                 a claimed run carried on: loading it, applying its decision
//	continuation_call.go            the next call, whether it needs a person, running it, the model's rounds
//	continuation_end.go             one commit per step, and pausing, settling, cancelling, handing back
//	continuation_delta.go           the text a round streams, coalesced over 75 ms to readers
//	continuation_partial.go         the answer a round is streaming, written for readers (run_partials)
//	continuation_cancel.go          a cancel inside a model round or a tool call: the call cut short, what it left
//	leases.go                       one timer renews every held lease and looks for cancels asked elsewhere
//	worker.go, worker_sweep.go      workers: decided, queued and orphaned runs; dead tokens and sessions
//	deadline.go, deadline_expiry.go decision deadlines: the keys, and what a worker does when one passes
//	follow.go, follow_feed.go       following a run someone else continues: one look, and one poll per process
//	follow_changes.go, follow_changes_client.go
//	                                the change feed (GET /api/feed): every run's changes, one poll per process
//	read_inbox.go, read_history.go, read_run.go, read_messages.go
//	                                what people read: the waiting runs, the history, one run, its conversation
//	event.go, event_payload.go, event_decode.go
//	                                the event log: kinds, a struct per kind, reading a stored payload back
//	privacy.go                      the privacy filter, by field type (Content)
//	content.go, content_place.go    sealing run content at rest, each value bound to its row
//	notify.go, notify_check.go, notify_deliveries.go
//	                                notifications written in a step's commit, their configuration, what operators see
//	configuration.go, env.go        agent configurations; the environment variables no configuration may read
//	agent.go                        a configuration with its version, a file applied, its errors by line (/api/agents)
//	user.go, user_delete.go         users, scopes, and deleting a user with everything of theirs
//	tool.go, provider.go, validator.go, store.go, metrics.go, errors.go, jsonvalue.go
//	                                what the engine needs of others, and its errors
//
// Beside it: provider/ (scripted, openai), tool/ (builtin, mcp), outbox
// (delivering the notifications), webhook (signed HTTP), configfile (YAML
// files), schema (JSON Schema), seal (AES-GCM state keys), metrics
// (Prometheus).
//
// # A decision, from the handler to the claim
//
// An approval posted from the inbox without JavaScript takes this path,
// each function once (the API's and the playground's differ only in their
// handler and their surface):
//
//	web.Server.signedIn              the session's user
//	web.Server.form                  the form parsed once, its CSRF token checked
//	web.Server.decision              the run id; approvalForm puts the raw form values in a DecideRequest
//	web.Server.decide                the one decision flow, on the inboxSurface
//	web.admission.choose             the path the surface wants (inboxSurface.want): in this request,
//	                                 in a continuation slot, or a worker's
//	Engine.Decide                    the pipeline:
//	  validDecision                    kind, scope, reason
//	  pipeline.check, checkRun         one read of the run and its configuration; who may decide,
//	                                   status, origin, configuration, four-eyes, the state decoded
//	  pipeline.checkGrants             the grants the pending write tools name
//	  Engine.readEditForm              the edit form read against the pending turn
//	  pipeline.checkEdits              each edit checked by its tool's schema (invalid_input)
//	  pipeline.standing                what a scope=session approval stands for, after the edit
//	  pipeline.claim, prepare          the Claim, and the decision sealed
//	  Store.Claim                      one transaction: the UPDATE guarded by status and digest,
//	                                   the decision's INSERT (UNIQUE(run_id, turn_digest))
//	  pipeline.won or claimFailed      a Continuation (or nil on the durable path), or the lost claim explained
//	inboxSurface.run or recorded     the continuation streamed (Continuation.Run), or the flash of a recorded decision
package runtime
