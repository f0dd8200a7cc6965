//! The scenario decoder: any text gives a scenario or located diagnostics,
//! never a panic. Data files resolve against a directory that does not
//! exist, so an input naming one is a diagnostic too.
#![no_main]
use std::path::Path;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Err(diagnostics) =
        autoperf_core::scenario::decode::decode(text, Path::new("/nonexistent/fuzz.yaml"), &[])
    {
        assert!(!diagnostics.is_empty(), "a rejected scenario says why");
    }
});
