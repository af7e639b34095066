//! The MIG layout parser returns a layout or an error, never panics; what
//! it accepts reads the same once written back, and the geometry over it
//! keeps its promises on every MIG model.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| partita_fuzz::check_mig_layout(data));
