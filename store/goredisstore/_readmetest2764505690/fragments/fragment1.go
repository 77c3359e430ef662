package fragments

//line /work/wt/service/docs/operating.md:286
import (
	"github.com/redis/go-redis/v9"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/store/goredisstore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)


func block22() error {
//line /work/wt/service/docs/operating.md:294
client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
refusing, err := goredisstore.New[string](client, goredisstore.WithEvictionCheck[string](goredisstore.EvictionRefuse))
if err != nil {
	return err
}
alg, err := tokenbucket.PerSecond(10)
if err != nil {
	return err
}
// Fails with an error wrapping store.ErrEvicting on allkeys-*, volatile-lru…
checked, err := ratelimit.New(alg, refusing, ratelimit.WithName("api"))
if err != nil {
	return err
}
_ = checked // decides as usual
return nil
}
