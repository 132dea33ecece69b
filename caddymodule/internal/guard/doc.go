// Package guard is what stands between the gateway's callers and one
// backend, and its doors: Fetch, the answer to one request the handler let
// through, from the micro-cache, from an identical request's trip, or from
// a trip of the caller's own through admission, read through the field
// layer into a spool, and written to the client at the client's pace within
// the held bytes; Own, an answer the gateway makes on its own (a
// network's document), kept, coalesced and handed over the same way; and
// Streams, a handler's live streams, their seats and topics.
//
// The handler tells the guard what it decided of a request as a Ticket of
// plain facts (the endpoint's Station, the Caller, what the answer is
// shared under, the backend's placeholder values, what follows statusgate)
// and gets back a Verdict: how the request ended, or the refusal the
// handler answers in its envelope. The guard knows nothing of the
// handler's routes, keys or config: a guard is joined (Join) with its
// resolved Limits, and shared in the process by its name (Name).
//
// Four kinds of trips have no client: a stale cache entry's refresh, a
// live stream's poll, a network member's status and the game metrics'
// figures. They are all made the same way (BackgroundRequest, Background).
package guard
