package sim

import (
	"fmt"
	"io"
	"os"
)

// WriteFile creates path and fills it with write: the experiments'
// reports (fill, mixed) write their tables and charts this way. An error
// names the file.
func WriteFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}
