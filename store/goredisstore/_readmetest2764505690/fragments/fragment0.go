package fragments

//line /work/wt/service/README.md:198
import (
	"net/http"
	"net/netip"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/httplimit"
	"github.com/go-ratelimit/ratelimit/store/goredisstore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)


func block2() error {
//line /work/wt/service/README.md:211
client := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
st, err := goredisstore.New(client,
	goredisstore.WithTimeout[netip.Prefix](50*time.Millisecond)) // a hung Redis costs a request at most this
if err != nil {
	return err
}
alg, err := tokenbucket.PerMinute(100, tokenbucket.Burst(20)) // 100 a minute, bursts of 20
if err != nil {
	return err
}
lim, err := ratelimit.New(alg, st, ratelimit.WithName("api"),
	ratelimit.WithBreaker(ratelimit.Breaker{}),       // a dead Redis fails at once, not after a timeout each
	ratelimit.WithFailurePolicy(ratelimit.FailLocal)) // meanwhile each instance limits on its own
if err != nil {
	return err
}
// Behind proxies in 10.0.0.0/8: the client is the rightmost X-Forwarded-For address not theirs.
ip := httplimit.ClientIP{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}
api := http.NotFoundHandler() // your API
mux := http.NewServeMux()
mux.Handle("/api/", httplimit.New(lim, ip.Key).Handler(api))
srv := &http.Server{Addr: ":8080", Handler: mux, ReadHeaderTimeout: 5 * time.Second}
return srv.ListenAndServe()
}
