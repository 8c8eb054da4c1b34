// Package reviewguard keeps unauthenticated callers of the operator's own
// listeners (the registry token service, the team build cache) from
// turning their requests into API server load: each request that would
// cost a TokenReview first passes a Guard, which
//
//   - answers a token refused within RefusalTTL from memory (keyed by the
//     token's SHA-256, never the token), and
//   - allows each source address a bounded rate of reviews (a caller
//     trying new garbage tokens gets 429 instead of a review each).
//
// The review client's own QPS bound (ReviewConfig) caps what all sources
// together can ask of the API server.
package reviewguard
