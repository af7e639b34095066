package standalone

import (
	"runtime"
	"syscall"
)

// lowerPriority runs the calling goroutine on its own OS thread at nice
// 10, so that when the CPU is short a long scheduling cycle yields to the
// API's requests and the store's writer instead of sharing evenly with
// them. The caller's goroutine keeps the thread until it returns.
func lowerPriority() {
	runtime.LockOSThread()
	_ = syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), 10)
}
