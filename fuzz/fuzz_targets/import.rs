//! `autoperf import`: any bytes as an access log or a HAR recording give a
//! scenario or an error, never a panic, and a scenario it writes always
//! passes the decoder (the import's promise: its output runs).
//!
//! Input: byte 0 even, the rest is a HAR's text; odd, an access log (its
//! lines also parsed by every format alone).
#![no_main]
use std::path::{Path, PathBuf};
use std::sync::Arc;

use autoperf_core::import::{
    har_scenario, import_log_to, HarOptions, JsonFields, LogFormat, LogInput, LogOptions, Outputs,
};
use autoperf_core::scenario::decode::decode;
use libfuzzer_sys::fuzz_target;

fn scratch() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("autoperf-fuzz-import-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    dir
}

fn decodes(text: &str, path: &Path) {
    if let Err(d) = decode(text, path, &[]) {
        panic!("the imported scenario does not decode:\n{d:#?}\n---\n{text}");
    }
}

fuzz_target!(|data: &[u8]| {
    let [pick, rest @ ..] = data else { return };
    let out = Outputs::for_scenario(&scratch().join("fuzz.yaml"));
    if pick % 2 == 0 {
        let Ok(text) = std::str::from_utf8(rest) else {
            return;
        };
        if let Ok(s) = har_scenario(text, Path::new("fuzz.har"), &HarOptions::default(), &out) {
            decodes(&s.yaml, &out.scenario);
        }
        return;
    }
    for format in [
        LogFormat::Combined,
        LogFormat::Common,
        LogFormat::Json(JsonFields::default()),
    ] {
        for line in String::from_utf8_lossy(rest).lines() {
            let _ = format.parse(line);
        }
    }
    let _ = std::fs::remove_dir_all(&out.data_dir);
    let input = LogInput::Bytes(Arc::from(rest));
    if import_log_to(
        &input,
        "http://127.0.0.1:8080",
        &LogOptions::default(),
        &out,
        &mut (),
    )
    .is_ok()
    {
        let text = std::fs::read_to_string(&out.scenario).expect("the scenario was written");
        decodes(&text, &out.scenario);
    }
});
