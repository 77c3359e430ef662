package memorystore_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/gcra"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// TestMismatchNamesAlgorithmsInWords: a state written by another
// algorithm under the same state ID is refused with an error that says
// what each algorithm is in words (issue 43), not as tags ("T100" vs
// "G100,36000000").
func TestMismatchNamesAlgorithmsInWords(t *testing.T) {
	st := memorystore.New[string]()
	meter, err := gcra.Per(100, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	bucket, err := tokenbucket.PerSecond(100)
	if err != nil {
		t.Fatal(err)
	}
	writer, errW := ratelimit.New(meter, st, ratelimit.WithName("x"))
	reader, errR := ratelimit.New(bucket, st, ratelimit.WithName("x"))
	if errW != nil || errR != nil {
		t.Fatal(errW, errR)
	}
	if _, err := writer.Allow(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	_, err = reader.Allow(ctx, "k")
	if !errors.Is(err, ratelimit.ErrStateMismatch) {
		t.Fatalf("reading a GCRA state with a token bucket: %v; want ErrStateMismatch", err)
	}
	for _, want := range []string{"GCRA, burst 100, one every 36s", "a token bucket of 100 refilled in 1s"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}
