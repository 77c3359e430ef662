package main

import (
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// watchDebounce is how long the watch waits after the last change it saw
// before it reloads: a ConfigMap's update, an editor's save or a copy of
// several files each make several events in a few milliseconds.
const watchDebounce = 300 * time.Millisecond

// watch reloads the configuration when its files change on disk, and
// returns how to stop watching. It watches the directory -config names
// (or the one holding the file it names), which sees files written,
// added, removed or renamed there and the swap of the "..data" link by
// which Kubernetes updates a mounted ConfigMap, and the directories the
// symbolic links among the files point into, so that a linked file
// changed in place is seen too. Each change is reloaded once no further
// event came for watchDebounce; a reload of the same files is nothing
// (see reload), so events of other files in a watched directory cost a
// read of the configuration and no more.
func (a *app) watch() (func(), error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	if err := a.watchDirs(w); err != nil {
		w.Close()
		return nil, err
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		// The files may have changed between their load and the watch:
		// look once now.
		debounce := time.NewTimer(0)
		for {
			select {
			case <-stop:
				debounce.Stop()
				return
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				if ev.Op != fsnotify.Chmod {
					debounce.Reset(watchDebounce)
				}
			case err, ok := <-w.Errors:
				if !ok {
					return
				}
				a.log.Warn("watching the configuration", "err", err)
			case <-debounce.C:
				a.logReload("change on disk")
				if err := a.watchDirs(w); err != nil {
					a.log.Warn("watching the configuration", "err", err)
				}
			}
		}
	}()
	return func() {
		close(stop)
		<-done
		w.Close()
	}, nil
}

// watchDirs adds to w the directories the configuration's files live in
// (see watch). Adding one already watched changes nothing; a directory
// removed is no longer watched (inotify drops it), so the set is added
// again after each reload.
func (a *app) watchDirs(w *fsnotify.Watcher) error {
	path := a.opts.configPath
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	dir, files := path, []string(nil)
	if fi.IsDir() {
		entries, err := os.ReadDir(path)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if e.Type()&os.ModeSymlink != 0 {
				files = append(files, filepath.Join(path, e.Name()))
			}
		}
	} else {
		dir, files = filepath.Dir(path), []string{path}
	}
	dirs := []string{dir}
	if l, err := os.Lstat(path); err == nil && l.Mode()&os.ModeSymlink != 0 {
		dirs = append(dirs, filepath.Dir(path)) // a link swapped to another target
	}
	for _, f := range files {
		if target, err := filepath.EvalSymlinks(f); err == nil {
			dirs = append(dirs, filepath.Dir(target))
		}
	}
	for _, d := range dirs {
		if err := w.Add(d); err != nil && d == dir {
			return err
		}
	}
	return nil
}
