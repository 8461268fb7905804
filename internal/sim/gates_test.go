package sim

// The gates: checks of invariants that today's engine breaks in ways the
// simulation found (or that another branch changes), each off until the
// fix is merged. While a gate is off the simulation waives exactly that
// breach (and, where it would make a seed's path depend on the
// scheduler, avoids its trigger), so that every other invariant is still
// checked; turn a gate on to see the seeds that break it.

// queuedRunsSurviveCrash turns on the check that runs queued when a host
// stops (crash or not) are not interrupted by the next host's recovery
// but run, in the order they were queued. Today recovery interrupts
// them (seeds 1, 10, 11, 100, …); branch durable changes that (issue 17
// §2). Turn it on once that branch is merged.
const queuedRunsSurviveCrash = false

// recoveryClosesRequests turns on the check that a run that recovery ends
// (run.failed of kind storage after a refused write, run.interrupted
// after a crash) closes its requests and gives every call of its last
// step a result, as every other end of a run does. Today
// reconcile.Session closes only the calls that started: the approvals,
// questions and client tool calls of the run stay open in the log, and a
// call that was approved but had not started when the host crashed gets
// no result (the next model call reads a placeholder). Storage recovery
// also fails a parked run, which the refused write did not cut short,
// and its owner keeps the ended run as its active one: every later run
// of the session is queued behind it and never starts, until the session
// is loaded again. Found by seeds 15 (step 91: a question's call left
// without a result by run.failed) and 79 (step 47: an approved call left
// without a result by run.interrupted); with those waived, the wedge by
// seeds 82 (step 80) and 44 (step 119). The fix belongs to branch
// durable's recovery (internal/reconcile, session.recover).
const recoveryClosesRequests = false

// endSkipsAnsweredRequests turns on the check that a run cancelled (or
// failed) after some of its requests were answered, but before it
// parked, does not answer them again. Today the agent loop's end closes
// every request its last step opened: a second approval.resolved
// (cancelled) after the client's allow_once, a second result of a client
// tool call after the client's. Found by seeds 17 (step 32: an approval
// answered twice) and 27 (step 183: a client tool call with two
// results). The fix needs the closing done under the session's lock,
// against the requests still open then (the agent loop's end, the
// session's run log), as cancelParked does for a parked run.
const endSkipsAnsweredRequests = false

// recoveryWakesCancels turns on the check that run/cancel returns once
// the run's terminal event is committed, also when the commit's answer
// was lost (the store committed, the writer heard an error): the
// session's storage recovery reloads the log but does not wake the
// waiters of the runs that ended in that write, so the cancel hangs
// until its client gives up. Found by seeds 4 (step 221) and 44 (step
// 206); the fix belongs to branch durable's recovery (session.recover:
// close the done channels of the runs the reloaded log has ended).
const recoveryWakesCancels = false

// failedJournalStartsNoRun turns on the faults that fail one write in
// sessions with queued runs (see faultStore.spared). When a run's own
// write fails, two goroutines wake: the run's, which ends and starts the
// next queued run unless the session is already marked failed, and the
// session's watcher, which marks it failed and recovers. Whichever is
// first decides whether the queued run stays queued (as documented) or
// is started on the failed journal and then failed by recovery (kind
// storage). Found by TestSimReproducible under -race (seed 6, before
// the faults spared such sessions); the fix (Session.startNext refusing
// while the journal has failed) belongs to branch durable (queued runs).
const failedJournalStartsNoRun = false
