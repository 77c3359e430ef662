package algorithm

import "time"

// Quota is a limit as people say it: Limit per Window, such as "100 per
// minute". HTTP and gRPC adapters advertise it (the RateLimit-Policy
// field's q and w).
type Quota struct {
	// Limit is how much cost the quota admits per Window.
	Limit int64
	// Window is the period Limit is counted over.
	Window time.Duration
}

// Quoter is implemented by algorithms that know the quota their user
// configured, which may differ from their Limit (a token bucket of 100 per
// minute with a burst of 20 has a Limit of 20 and a quota of 100 per
// minute). Adapters find it by type assertion.
type Quoter interface {
	// Quota returns the quota the algorithm was configured with.
	Quota() Quota
}

// QuotaOf returns the quota alg was configured with (Quoter), or else its
// Limit per its Window, when it has a Window() time.Duration method, or per
// 0.
func QuotaOf(alg Algorithm) Quota {
	if q, ok := alg.(Quoter); ok {
		return q.Quota()
	}
	q := Quota{Limit: alg.Limit()}
	if w, ok := alg.(interface{ Window() time.Duration }); ok {
		q.Window = w.Window()
	}
	return q
}
