//go:build !linux

package standalone

// lowerPriority does nothing where threads have no priority of their own.
func lowerPriority() {}
