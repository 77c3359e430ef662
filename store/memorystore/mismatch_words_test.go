package memorystore_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/gcra"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// unregistered is an algorithm of no registered Kind (it has no Tag): it
// cannot read another algorithm's state, nor carry what it had used.
type unregistered struct{ algorithm.Algorithm }

// Describe says what the algorithm it wraps is, in words.
func (u unregistered) Describe() string { return algorithm.Describe(u.Algorithm) }

// TestMismatchNamesAlgorithmsInWords: a state written by another
// algorithm under the same state ID, which the reader cannot read (it is
// of no registered Kind: one of another Kind carries what it had used),
// is refused with an error that says what each algorithm is in words
// (issue 43), not as tags ("T100" vs "G100,36000000").
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
	reader, errR := ratelimit.New(unregistered{bucket}, st, ratelimit.WithName("x"))
	if errW != nil || errR != nil {
		t.Fatal(errW, errR)
	}
	if _, err := writer.Allow(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	_, err = reader.Allow(ctx, "k")
	if !errors.Is(err, ratelimit.ErrStateMismatch) {
		t.Fatalf("reading a GCRA state with an algorithm of no Kind: %v; want ErrStateMismatch", err)
	}
	for _, want := range []string{"GCRA, burst 100, one every 36s", "a token bucket of 100 refilled in 1s"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}
