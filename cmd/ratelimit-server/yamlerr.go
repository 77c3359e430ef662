package main

import (
	"fmt"
	"regexp"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// yamlLine matches the line yaml.v3 puts at the head of a syntax error.
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): `)

// yamlFault returns the line of a YAML syntax error err in data, and the
// error's message naming that line. yaml.v3 names the line where the
// construct around the fault began (for its parser's errors, counted
// from 0), so an indentation error deep in a descriptor named the line of
// a mapping above it. The line of the fault is the first line L at or
// after that one such that data cut after line L fails with the very same
// error: before the fault the cut document parses, or fails for want of
// what follows (a different error); from the fault on, the parser stops
// where it stops on the whole. The search is a bisection, a few parses.
// When the error names no line, or the search finds none, err's own line
// and message are returned.
func yamlFault(data []byte, err error) (int, string) {
	msg := err.Error()
	m := yamlLine.FindStringSubmatchIndex(msg)
	if m == nil {
		return 0, msg
	}
	reported, _ := strconv.Atoi(msg[m[2]:m[3]])
	// ends[i] is the offset just past line i+1.
	var ends []int
	for i, b := range data {
		if b == '\n' {
			ends = append(ends, i+1)
		}
	}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		ends = append(ends, len(data))
	}
	same := func(line int) bool {
		var n yaml.Node
		err := yaml.Unmarshal(data[:ends[line-1]], &n)
		return err != nil && err.Error() == msg
	}
	lo, hi := max(1, reported-1), len(ends)
	if lo > hi || !same(hi) {
		return reported, msg
	}
	for lo < hi { // same(hi) holds; find the first line where it does
		mid := lo + (hi-lo)/2
		if same(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return hi, fmt.Sprintf("yaml: line %d: %s", hi, msg[m[1]:])
}
