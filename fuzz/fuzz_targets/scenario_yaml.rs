//! The scenario reader returns a Scenario or an error naming the file,
//! never panics; what it accepts validates again, builds its nodes and
//! (when small) its jobs, every one of which validates.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| partita_fuzz::check_scenario(data));
