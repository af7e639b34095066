//! (being ported from the Go build)
