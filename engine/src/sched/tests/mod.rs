//! The scheduler's tests.
