//! The pod list reader returns a list or an error, never panics; what it
//! accepts keeps its promises and reads the same once written back.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| partita_fuzz::check_pods(data));
