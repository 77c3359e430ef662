package redisstore

import (
	"fmt"
	"regexp"
	"strconv"

	"github.com/go-ratelimit/ratelimit/algorithm"
)

// mismatchTags finds the two tags of an RLMISMATCH reply of load.lua,
// "field ID holds G100,36000000:, not T100:": the state ID, the writer's
// Kind and meaning parameters, then the reader's.
var mismatchTags = regexp.MustCompile(`field (.*) holds ([A-Z])(\d+)(?:,(\d+))?:, not ([A-Z])(\d+)(?:,(\d+))?:`)

// mismatch returns what err, an RLMISMATCH reply, says in words, ending
// in ": " ("state ID "x" holds the state of GCRA, burst 100, one every
// 36s, which this limit, a token bucket of 100 refilled in 1s, cannot
// read: "), or "" when the reply names no writer's tag.
func (t *Table[K]) mismatch(err error) string {
	m := mismatchTags.FindStringSubmatch(err.Error())
	if m == nil {
		return ""
	}
	id, was, reader := m[1], tagOf(m[2:5]), tagOf(m[5:8]).Describe()
	for i, sid := range t.ids {
		if sid == id {
			reader = algorithm.Describe(t.algs[i])
			break
		}
	}
	return fmt.Sprintf("state ID %q holds the state of %s, which this limit, %s, cannot read: ", id, was.Describe(), reader)
}

// tagOf returns the Tag of a header's Kind letter and meaning parameters
// (the second "" when it has one).
func tagOf(m []string) algorithm.Tag {
	p0, _ := strconv.ParseInt(m[1], 10, 64)
	p1, _ := strconv.ParseInt(m[2], 10, 64)
	return algorithm.Tag{Kind: m[0][0], P0: p0, P1: p1}
}
