// Package repotree lists the repository's Go files as the go tool sees
// its tree, for the tests that check every file of it.
package repotree

import (
	"io/fs"
	"path/filepath"
	"strings"
)

// GoFiles returns the .go files under root, as paths relative to it
// with forward slashes, in lexical order. Like the go tool, it skips
// testdata, vendor and directories whose names start with "." or "_"
// (TestREADME builds its blocks in a "_readmetest" directory, which may
// come and go while other packages' tests walk the tree).
func GoFiles(root string) ([]string, error) { return Files(root, ".go") }

// Files returns the files under root whose names end in ext, as GoFiles
// does the .go files.
func Files(root, ext string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(name, ext) {
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	return files, err
}
