//! Reading the files a scenario names — itself, CSV data, PEM certificates,
//! Avro schemas — as untrusted input: regular files only (a FIFO would
//! block `check` forever, `/dev/zero` would fill memory) and no larger than
//! a limit stated in the error, so a typo cannot hang or exhaust the run.

use std::io::Read;
use std::path::Path;

/// A scenario file: the description of a test, not its data.
pub(crate) const SCENARIO_LIMIT: u64 = 16 << 20;
/// A CSV feeder file.
pub(crate) const DATA_LIMIT: u64 = 1 << 30;
/// A certificate, key or schema.
pub(crate) const SMALL_FILE_LIMIT: u64 = 4 << 20;

/// Reads `path` whole if it is a regular file of at most `limit` bytes;
/// the error says which rule it broke, in words for `what` the file is.
pub(crate) fn read_bounded(path: &Path, limit: u64, what: &str) -> Result<Vec<u8>, String> {
    let shown = path.display();
    // On a worker: the copy the controller read and shipped.
    if let Some(shipped) = super::sources::replayed_file(path, what) {
        let bytes = shipped?;
        if bytes.len() as u64 > limit {
            return Err(format!(
                "{what} `{shown}` is {} — more than the {} a {what} may hold",
                human_bytes(bytes.len() as u64),
                human_bytes(limit)
            ));
        }
        return Ok(bytes);
    }
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot read {what} `{shown}`: {e}"))?;
    if !meta.is_file() {
        let kind = if meta.is_dir() {
            "a directory"
        } else {
            "not a regular file (a device, pipe or socket)"
        };
        return Err(format!("cannot read {what} `{shown}`: it is {kind}"));
    }
    let too_big = |size: u64| {
        format!(
            "{what} `{shown}` is {} — more than the {} a {what} may hold",
            human_bytes(size),
            human_bytes(limit)
        )
    };
    if meta.len() > limit {
        return Err(too_big(meta.len()));
    }
    let file =
        std::fs::File::open(path).map_err(|e| format!("cannot read {what} `{shown}`: {e}"))?;
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    // The file may grow between the size check and the read.
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read {what} `{shown}`: {e}"))?;
    if bytes.len() as u64 > limit {
        return Err(too_big(bytes.len() as u64));
    }
    super::sources::note_file(path, &bytes);
    Ok(bytes)
}

/// A size as people read it: `1.0 MiB`, `512 bytes`.
pub(crate) fn human_bytes(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 => format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64),
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64),
        b if b >= 1 << 10 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{b} bytes"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_directories_and_large_files_are_refused_with_the_rule() {
        let e = read_bounded(Path::new("/dev/zero"), 1 << 20, "scenario file").unwrap_err();
        assert!(e.contains("not a regular file"), "{e}");
        let e = read_bounded(Path::new("/tmp"), 1 << 20, "scenario file").unwrap_err();
        assert!(e.contains("a directory"), "{e}");
        let dir = std::env::temp_dir().join(format!("autoperf-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let big = dir.join("big.yaml");
        std::fs::write(&big, vec![b'#'; 3000]).unwrap();
        let e = read_bounded(&big, 2048, "scenario file").unwrap_err();
        assert!(e.contains("2.9 KiB") && e.contains("2.0 KiB"), "{e}");
        assert_eq!(
            read_bounded(&big, 3000, "scenario file").unwrap().len(),
            3000
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
